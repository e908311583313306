"""The metadata image: what the cluster's metadata says at one offset of the metadata log.

Immutable: a change builds a new image through a `delta.MetadataDelta`, so a request
handler that took the image keeps a consistent view however long it runs. Readers look
topics up by name or id; partitions carry Kafka's replicas, ISR, leader and epochs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    listener: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerImage:
    """A registered broker: where it listens, its rack, and whether it is fenced (it
    missed its heartbeats, or has not caught up yet: it leads no partition then)."""

    node_id: int
    incarnation_id: uuid.UUID
    epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False

    @property
    def is_active(self) -> bool:
        """It may lead partitions and join ISRs (Kafka's ClusterControlManager.isActive):
        unfenced, and not in a controlled shutdown."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)


@dataclass(frozen=True, slots=True)
class PartitionImage:
    """A partition's replicas (in preferred order), ISR, leader and epochs. While a
    reassignment runs, ``replicas`` is the union of the target replicas and those being
    removed (Kafka's PartitionRegistration), and the two lists say which are which."""

    index: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """The replicas before the running reassignment (what cancelling it restores)."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    # index -> partition; never mutated once the image is built
    partitions: Mapping[int, PartitionImage]
    configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def replication_factor(self) -> int:
        first = self.partitions.get(0)
        return len(first.replicas) if first is not None else 0


@dataclass(frozen=True, slots=True)
class MetadataImage:
    cluster_id: str
    # the metadata log offset this image includes (-1: nothing applied yet)
    offset: int = -1
    topics: Mapping[str, TopicImage] = field(default_factory=dict)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=dict)
    # dynamic broker configs by resource name: "" cluster-wide defaults, "<id>" one broker
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # the first producer id of the next block the controller hands out
    next_producer_id: int = 0
    brokers: Mapping[int, BrokerImage] = field(default_factory=dict)
    # group configs (GROUP resources) by group id: only the groups that have some
    group_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def topic(self, name: str) -> TopicImage | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self.topics_by_id.get(topic_id)

    def partition(self, name: str, index: int) -> PartitionImage | None:
        topic = self.topics.get(name)
        return topic.partitions.get(index) if topic is not None else None

    def dynamic_broker_configs(self, resource_name: str) -> dict[str, str]:
        return dict(self.broker_configs.get(resource_name, {}))

    def group_overrides(self, group_id: str) -> dict[str, str]:
        """A group's stored configs (raw strings); its effective config is the config
        cache's `group(group_id)`."""
        return dict(self.group_configs.get(group_id, {}))

    def partitions_of(self, node_id: int) -> Iterator[tuple[TopicImage, PartitionImage]]:
        """Every partition with a replica on `node_id`."""
        for topic in self.topics.values():
            for partition in topic.partitions.values():
                if node_id in partition.replicas:
                    yield topic, partition

    def live_brokers(self) -> list[BrokerImage]:
        """Registered brokers that are not fenced, by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def is_active_broker(self, node_id: int) -> bool:
        broker = self.brokers.get(node_id)
        return broker is not None and broker.is_active

    @property
    def partition_total(self) -> int:
        return sum(len(topic.partitions) for topic in self.topics.values())
