"""Kubernetes Events on the resource the operator acted on, posted by kopf (its queue,
its back-off): every action on a cluster or topic is one, so `kubectl describe` tells
what the operator did and why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import kopf


def info(owner: Mapping[str, Any], reason: str, message: str) -> None:
    kopf.info(_body(owner), reason=reason, message=message)


def warning(owner: Mapping[str, Any], reason: str, message: str) -> None:
    kopf.warn(_body(owner), reason=reason, message=message)


def _body(owner: Mapping[str, Any]) -> kopf.Body:
    # a KafkaCluster as read by k8s.Client is the same JSON kopf's RawBody types
    return kopf.Body(cast(kopf.RawBody, dict(owner)))
