"""The data the reconcile functions take and give: a resource's spec as typed values, what
the operator observed of the pods and of the brokers, and the plans it decided on.

Everything here is frozen and free of I/O: `spec` builds the specs from custom resources,
`kafka_admin` builds `KafkaState` from the brokers' answers, `handlers` builds `BrokerPod`
from the pods it watches, and the planners (`rolling`, `balancing`, `scaling`, `topics`)
turn them into plans that `handlers` carries out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

GROUP = "strom.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

# The broker's listener names inside a cluster pod (the controller listener is internal).
KAFKA_PORT = 9092
CONTROLLER_PORT = 9093
METRICS_PORT = 9404
# The metadata quorum's voters: the first pods of the StatefulSet (combined broker and
# controller nodes); pods past them are brokers only (Raft observers). Fixed at creation:
# the voter set of a KRaft quorum does not change by scaling.
DEFAULT_CONTROLLERS = 3

JsonObject = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ClusterNames:
    """The names of everything a KafkaCluster owns, from its own name."""

    cluster: str
    namespace: str

    @property
    def statefulset(self) -> str:
        return f"{self.cluster}-broker"

    @property
    def headless_service(self) -> str:
        return f"{self.cluster}-brokers"

    @property
    def bootstrap_service(self) -> str:
        return f"{self.cluster}-bootstrap"

    @property
    def configmap(self) -> str:
        return f"{self.cluster}-config"

    @property
    def pdb(self) -> str:
        return f"{self.cluster}-broker"

    def pod(self, broker_id: int) -> str:
        return f"{self.statefulset}-{broker_id}"

    def claim(self, broker_id: int) -> str:
        """The PVC the StatefulSet makes from its volumeClaimTemplate `data`."""
        return f"data-{self.statefulset}-{broker_id}"

    def pod_dns(self, broker_id: int) -> str:
        return f"{self.pod(broker_id)}.{self.headless_service}.{self.namespace}.svc"

    @property
    def bootstrap_dns(self) -> str:
        return f"{self.bootstrap_service}.{self.namespace}.svc:{KAFKA_PORT}"

    @property
    def selector(self) -> dict[str, str]:
        """The labels every broker pod of this cluster carries (and the Services select)."""
        return {
            "app.kubernetes.io/name": "strom",
            "app.kubernetes.io/instance": self.cluster,
            "app.kubernetes.io/component": "broker",
        }

    @property
    def selector_string(self) -> str:
        """The label selector as text: the `/scale` subresource's status.selector."""
        return ",".join(f"{key}={value}" for key, value in self.selector.items())


# --- specs ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class StorageSpec:
    size: str  # a Kubernetes quantity, as written ("10Gi")
    size_bytes: int
    storage_class: str | None
    delete_claim: bool


@dataclasses.dataclass(frozen=True)
class ListenerSpec:
    name: str  # the listener name in the broker's `listeners` (upper case, e.g. PLAINTEXT)
    port: int


@dataclasses.dataclass(frozen=True)
class MetricsSpec:
    enabled: bool
    port: int


@dataclasses.dataclass(frozen=True)
class TemplateSpec:
    """What a user adds to the broker pods (Strimzi's `template.pod`)."""

    pod_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    pod_annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: tuple[JsonObject, ...] = ()
    affinity: JsonObject | None = None
    priority_class_name: str | None = None


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    """A KafkaCluster's spec with its defaults filled in, checked (spec.parse_cluster)."""

    names: ClusterNames
    uid: str
    generation: int
    brokers: int
    controllers: int
    image: str
    storage: StorageSpec
    resources: JsonObject
    # broker properties from spec.config, as strings, checked against the broker's own
    # config definitions (unknown keys and bad values refused before anything rolls)
    config: Mapping[str, str]
    listeners: tuple[ListenerSpec, ...]
    rack_topology_key: str | None
    metrics: MetricsSpec
    template: TemplateSpec


@dataclasses.dataclass(frozen=True)
class TopicSpec:
    """A Topic's spec with its defaults filled in (spec.parse_topic)."""

    cluster: str
    namespace: str
    topic_name: str
    partitions: int | None  # None: the brokers' num.partitions
    replication_factor: int | None  # None: the brokers' default.replication.factor
    config: Mapping[str, str]
    generation: int


class SpecError(ValueError):
    """A resource's spec cannot be carried out; the message is the status condition's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason  # CamelCase, a condition's `reason`


# --- observed state ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BrokerPod:
    """One broker pod as the operator last saw it (or the absence of it)."""

    broker_id: int
    name: str
    exists: bool
    ready: bool
    deleting: bool  # metadata.deletionTimestamp is set
    revision: str | None  # the controller-revision-hash label
    claim_exists: bool
    claim_uid: str | None = None


@dataclasses.dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int


@dataclasses.dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    replicas: tuple[int, ...]  # in preference order: replicas[0] is the preferred leader
    isr: tuple[int, ...]
    leader: int | None  # None: leaderless
    min_isr: int  # the topic's effective min.insync.replicas

    @property
    def key(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclasses.dataclass(frozen=True)
class KafkaState:
    """What the brokers said: who is alive, who leads the quorum, every partition."""

    cluster_id: str | None
    controller_id: int | None  # the active controller (the quorum's leader)
    live_brokers: frozenset[int]  # brokers registered and unfenced
    partitions: tuple[PartitionState, ...]
    reassigning: frozenset[TopicPartition]  # reassignments in progress

    def leaders_of(self, broker_id: int) -> int:
        return sum(1 for p in self.partitions if p.leader == broker_id)


@dataclasses.dataclass(frozen=True)
class ObservedTopic:
    """A topic as the brokers describe it."""

    name: str
    topic_id: str
    partitions: int
    replication_factor: int
    # the topic's own overrides (DescribeConfigs source TOPIC_CONFIG), as strings
    overrides: Mapping[str, str]


# --- plans ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Restart:
    """Delete this pod now: the StatefulSet makes it again from the new template."""

    broker_id: int
    reason: str


@dataclasses.dataclass(frozen=True)
class Wait:
    """Nothing may be done yet; `reason` says why (shown in the status and an Event)."""

    reason: str


@dataclasses.dataclass(frozen=True)
class Done:
    """Every pod runs the current template."""


RollDecision = Restart | Wait | Done


@dataclasses.dataclass(frozen=True)
class Reassignment:
    """New replica lists for some partitions (applied with AlterPartitionReassignments),
    then a preferred-leader election for `elect` (empty: none)."""

    moves: Mapping[TopicPartition, tuple[int, ...]]
    elect: frozenset[TopicPartition]
    reason: str


@dataclasses.dataclass(frozen=True)
class Refusal:
    """The plan cannot be carried out: `reason` (CamelCase) and `message` go to a status
    condition; nothing was changed."""

    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class Condition:
    type: str  # Ready, Reconciling, Degraded
    status: str  # "True" / "False" / "Unknown"
    reason: str
    message: str

    def as_json(self, now_iso: str, generation: int) -> JsonObject:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": now_iso,
            "observedGeneration": generation,
        }
