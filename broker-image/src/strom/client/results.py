"""What the admin calls return: frozen dataclasses of plain values.

Kafka's names for states and config sources, so callers (the tools, the operator, the
tests) never touch confluent-kafka or kio types. A failure reported per item (a log dir
that is offline) is an errors.ClientError in the result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import NamedTuple

from strom.client import errors


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclasses.dataclass(frozen=True)
class Node:
    id: int
    host: str
    port: int


@dataclasses.dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: str  # Kafka's printed form: URL-safe base64 without padding
    internal: bool
    partitions: tuple[PartitionInfo, ...]


@dataclasses.dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: str


@dataclasses.dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str  # Kafka's ConfigSource name, e.g. DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG
    sensitive: bool
    read_only: bool
    synonyms: tuple[ConfigSynonym, ...]

    @property
    def is_default(self) -> bool:
        return self.source == "DEFAULT_CONFIG"


@dataclasses.dataclass(frozen=True)
class GroupListing:
    group_id: str
    state: str
    type: str
    simple: bool


@dataclasses.dataclass(frozen=True)
class MemberInfo:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclasses.dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str
    type: str
    assignor: str
    coordinator: Node | None
    members: tuple[MemberInfo, ...]
    simple: bool

    @property
    def exists(self) -> bool:
        return self.state != "Dead"


@dataclasses.dataclass(frozen=True)
class OffsetDeletion:
    """What OffsetDelete did: the group's error and each partition's, by Kafka's names
    (e.g. GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC), None where there was none."""

    error: str | None
    partitions: Mapping[TopicPartition, str | None]


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str | None
    controller: int | None
    nodes: tuple[Node, ...]


@dataclasses.dataclass(frozen=True)
class Reassignment:
    """A reassignment in progress: the full replica set while it runs, and the change."""

    partition: TopicPartition
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class LogDirReplica:
    partition: TopicPartition
    size: int  # bytes
    offset_lag: int  # behind the log end offset (a future replica being moved), else 0
    is_future: bool  # the target copy of a move between log dirs


@dataclasses.dataclass(frozen=True)
class LogDirInfo:
    path: str
    error: errors.ClientError | None  # e.g. KAFKA_STORAGE_ERROR for an offline dir
    total_bytes: int | None  # None when the broker does not say
    usable_bytes: int | None
    replicas: tuple[LogDirReplica, ...]


@dataclasses.dataclass(frozen=True)
class QuorumReplica:
    id: int
    log_end_offset: int  # -1 if unknown
    last_fetch_timestamp: int | None  # ms, None if unknown
    last_caught_up_timestamp: int | None


@dataclasses.dataclass(frozen=True)
class QuorumInfo:
    leader_id: int  # -1 while no leader is known
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumReplica, ...]
    observers: tuple[QuorumReplica, ...]
