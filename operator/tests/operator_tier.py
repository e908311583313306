"""Helpers of the operator's kmock tier (imported by the tests; conftest puts this folder
on sys.path)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import kmock
from strom_operator import k8s
from strom_operator.reconcile import model

NAMESPACE = "strom-test"
T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T | None]], what: str, timeout: float = 15.0
) -> T:
    """Poll `probe` until it returns something truthy, or fail naming `what`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")


def condition(body: model.JsonObject | None, kind: str) -> model.JsonObject | None:
    for entry in ((body or {}).get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return dict(entry)
    return None


async def wait_condition(
    kube: k8s.Client, kind: str, name: str, condition_type: str, status: str, what: str
) -> model.JsonObject:
    """Wait until the resource's `condition_type` condition has `status`; return it."""

    async def probe() -> model.JsonObject | None:
        found = condition(await kube.get(kind, NAMESPACE, name), condition_type)
        return found if (found or {}).get("status") == status else None

    return await eventually(probe, f"{kind} {name}: {condition_type} {status} ({what})")


def _metadata(name: str) -> model.JsonObject:
    # kmock sets neither a uid nor a resourceVersion; kopf's patches test the latter
    return {"name": name, "namespace": NAMESPACE, "uid": str(uuid.uuid4()), "resourceVersion": "1"}


def cluster_body(name: str, **spec: Any) -> model.JsonObject:
    """A KafkaCluster as `kubectl apply` would send it (kmock sets no uid: we do)."""
    return {
        "apiVersion": model.API_VERSION,
        "kind": "KafkaCluster",
        "metadata": _metadata(name),
        "spec": {"brokers": 1, "storage": {"size": "1Gi"}, **spec},
    }


def topic_body(name: str, cluster: str, **spec: Any) -> model.JsonObject:
    return {
        "apiVersion": model.API_VERSION,
        "kind": "Topic",
        "metadata": _metadata(name),
        "spec": {"cluster": cluster, **spec},
    }


def broker_pod(cluster: str, broker_id: int, *, ready: bool = True) -> model.JsonObject:
    """A broker pod as the StatefulSet and the kubelet would leave it (kmock runs neither)."""
    names = model.ClusterNames(cluster, NAMESPACE)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**_metadata(names.pod(broker_id)), "labels": dict(names.selector)},
        "spec": {"containers": [{"name": "broker", "image": "strom"}]},
        "status": {
            "podIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def events_posted(emulator: kmock.KubernetesEmulator, name: str) -> list[model.JsonObject]:
    """The Events posted about the object `name` (the requests: kopf names no Event, and
    kmock keeps only one object without a name)."""
    posts = emulator[f"post /api/v1/namespaces/{NAMESPACE}/events"]
    return [
        posts[i].data
        for i in range(len(posts))
        if (posts[i].data.get("involvedObject") or {}).get("name") == name
    ]
