"""What every handler shares while the operator runs: its settings, the Kubernetes client,
and the little it remembers between reconciles of a cluster (kept in memory: after a
restart the operator learns it again from what it observes, and the PVC uids from the
KafkaCluster's status.brokers[].claimUid)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from collections.abc import Mapping

import kopf

from strom_operator import k8s
from strom_operator import settings as settings_module


@dataclasses.dataclass
class ClusterMemory:
    """Per KafkaCluster: a lock so that the timer and pod events never reconcile it at
    once, the uid of each broker's PVC as last seen (a new uid means the volume was lost),
    and the throttles set for the reassignment in progress (cleared when it ends)."""

    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    claim_uids: dict[int, str] = dataclasses.field(default_factory=dict)
    throttles: tuple[Mapping[int, Mapping[str, str]], Mapping[str, Mapping[str, str]]] | None = None
    degraded: bool = False


@dataclasses.dataclass
class Runtime:
    settings: settings_module.OperatorSettings
    connection: kopf.ConnectionInfo  # also kopf's own login (handlers.login)
    kube: k8s.Client
    clusters: dict[tuple[str, str], ClusterMemory] = dataclasses.field(default_factory=dict)

    @classmethod
    def start(
        cls, settings: settings_module.OperatorSettings, connection: kopf.ConnectionInfo
    ) -> Runtime:
        return cls(settings, connection, k8s.Client(connection))

    def memory(self, namespace: str, name: str) -> ClusterMemory:
        return self.clusters.setdefault((namespace, name), ClusterMemory())


def now_iso() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
