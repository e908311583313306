"""The Kafka admin API as plain data: topics, configs, consumer groups, offsets, leader
elections, reassignments, log dirs and the metadata quorum.

One `Admin` per tool run or test, one `AsyncAdmin` per operator reconcile loop: the same
operations, blocking or awaited. Every call waits with a deadline while serving
librdkafka's callbacks, so an unreachable bootstrap server fails at once with the reason
(connection.Watch). Results are frozen dataclasses with Kafka's names for states and
config sources, so callers never touch confluent-kafka or kio types; failures are
errors.ClientError subclasses whose message names the topic or group. What librdkafka has
no call for (reassignments, log dirs, the quorum) is sent by `wire` as plain Kafka requests.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import datetime
import time
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypeVar

import confluent_kafka
from confluent_kafka import admin as kafka_admin
from kio.schema.alter_partition_reassignments.v0 import request as alter_reassignments_request
from kio.schema.alter_partition_reassignments.v0 import response as alter_reassignments_response
from kio.schema.describe_log_dirs.v4 import request as log_dirs_request
from kio.schema.describe_log_dirs.v4 import response as log_dirs_response
from kio.schema.describe_quorum.v1 import request as quorum_request
from kio.schema.describe_quorum.v1 import response as quorum_response
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0 import request as list_reassignments_request
from kio.schema.list_partition_reassignments.v0 import response as list_reassignments_response
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta

from strom.client import connection, errors, settings, wire

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0

_RETRIABLE_METADATA = frozenset(
    {confluent_kafka.KafkaError._TRANSPORT, confluent_kafka.KafkaError._TIMED_OUT}
)

# Kafka's names (org.apache.kafka.common.GroupState / GroupType toString()).
GROUP_STATES = {
    confluent_kafka.ConsumerGroupState.UNKNOWN: "Unknown",
    confluent_kafka.ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    confluent_kafka.ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    confluent_kafka.ConsumerGroupState.STABLE: "Stable",
    confluent_kafka.ConsumerGroupState.DEAD: "Dead",
    confluent_kafka.ConsumerGroupState.EMPTY: "Empty",
}
GROUP_TYPES = {
    confluent_kafka.ConsumerGroupType.UNKNOWN: "Unknown",
    confluent_kafka.ConsumerGroupType.CONSUMER: "Consumer",
    confluent_kafka.ConsumerGroupType.CLASSIC: "Classic",
}

OffsetSpec = Literal["earliest", "latest"] | int  # an int is a timestamp in ms
Election = Literal["preferred", "unclean"]
METADATA_TOPIC = "__cluster_metadata"  # the KRaft metadata log's topic


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


# --- how an operation waits: one step at a time --------------------------------------
#
# Every operation is written once, as a generator that yields what it waits for (a
# confluent-kafka future, or a request strom.client sends itself) and receives the
# result, or has the ClientError thrown in. `Admin` runs it blocking, `AsyncAdmin` on
# the event loop; neither repeats an operation's logic.


class _Future(NamedTuple):
    future: concurrent.futures.Future[Any]
    what: str
    subject: str | None = None


class _Request(NamedTuple):
    addresses: tuple[tuple[str, int], ...]
    request: Any  # a kio request object
    response_type: type[Any]
    what: str


_Step = _Future | _Request
_Operation = Generator[_Step, Any, T]


class _Operations:
    """The connection (confluent-kafka AdminClient) and every operation as a generator."""

    def __init__(
        self,
        bootstrap: str | None,
        properties: Mapping[str, str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        config: dict[str, Any] = dict(settings.librdkafka_settings(bootstrap, properties or {}))
        self.bootstrap = str(config["bootstrap.servers"])
        self.timeout = timeout
        self.security_protocol = str(config.get("security.protocol", "plaintext"))
        self.watch = connection.Watch(self.bootstrap)
        config["error_cb"] = self.watch
        config["logger"] = settings.quiet_logger()
        try:
            self._client = kafka_admin.AdminClient(config)
        except confluent_kafka.KafkaException as e:
            raise errors.ConfigurationError(_library_message(e)) from None
        except (ValueError, TypeError) as e:
            raise errors.ConfigurationError(str(e)) from None

    # --- topics -----------------------------------------------------------------------

    def _describe_topics(self, names: Sequence[str]) -> _Operation[dict[str, TopicInfo]]:
        if not names:
            return {}
        futures = self._client.describe_topics(
            confluent_kafka.TopicCollection(list(names)), request_timeout=self.timeout
        )
        out: dict[str, TopicInfo] = {}
        for name in names:
            described = yield _Future(futures[name], f"the description of topic '{name}'", name)
            out[name] = TopicInfo(
                name=described.name,
                topic_id=kafka_topic_id(str(described.topic_id)),
                internal=bool(described.is_internal),
                partitions=tuple(
                    sorted(
                        (
                            PartitionInfo(
                                partition=p.id,
                                leader=None if p.leader is None or p.leader.id < 0 else p.leader.id,
                                replicas=tuple(node.id for node in p.replicas),
                                isr=tuple(node.id for node in p.isr),
                            )
                            for p in described.partitions
                        ),
                        key=lambda p: p.partition,
                    )
                ),
            )
        return out

    def _create_topic(
        self,
        name: str,
        partitions: int | None,
        replication_factor: int | None,
        configs: Mapping[str, str] | None,
        replica_assignment: Sequence[Sequence[int]] | None,
        if_not_exists: bool,
    ) -> _Operation[bool]:
        kwargs: dict[str, Any] = {"config": dict(configs or {})}
        if replica_assignment:
            kwargs["replica_assignment"] = [list(r) for r in replica_assignment]
        else:
            kwargs["num_partitions"] = -1 if partitions is None else partitions
            kwargs["replication_factor"] = -1 if replication_factor is None else replication_factor
        new_topic = kafka_admin.NewTopic(name, **kwargs)
        futures = self._client.create_topics(
            [new_topic], operation_timeout=self.timeout, request_timeout=self.timeout
        )
        try:
            yield _Future(futures[name], f"the creation of topic '{name}'", name)
        except errors.AlreadyExistsError:
            if if_not_exists:
                return False
            raise
        return True

    def _create_partitions(
        self, name: str, total: int, replica_assignment: Sequence[Sequence[int]] | None
    ) -> _Operation[None]:
        if replica_assignment:
            assignment = [list(r) for r in replica_assignment]
            new = kafka_admin.NewPartitions(name, total, assignment)
        else:
            new = kafka_admin.NewPartitions(name, total)
        futures = self._client.create_partitions(
            [new], operation_timeout=self.timeout, request_timeout=self.timeout
        )
        yield _Future(futures[name], f"new partitions of topic '{name}'", name)

    def _delete_topics(self, names: Sequence[str]) -> _Operation[None]:
        if not names:
            return
        futures = self._client.delete_topics(
            list(names), operation_timeout=self.timeout, request_timeout=self.timeout
        )
        for name in names:
            yield _Future(futures[name], f"the deletion of topic '{name}'", name)

    # --- configs ----------------------------------------------------------------------

    def _topic_configs(self, names: Sequence[str]) -> _Operation[dict[str, list[ConfigEntry]]]:
        resources = [
            kafka_admin.ConfigResource(kafka_admin.ResourceType.TOPIC, name) for name in names
        ]
        described = yield from self._describe_configs(resources)
        return {resource.name: entries for resource, entries in described}

    def _broker_configs(self, broker: str) -> _Operation[list[ConfigEntry]]:
        resource = kafka_admin.ConfigResource(kafka_admin.ResourceType.BROKER, broker)
        [(_, entries)] = yield from self._describe_configs([resource])
        return entries

    def _alter_configs(
        self,
        resource_type: str,
        name: str,
        set_configs: Mapping[str, str],
        delete_configs: Sequence[str],
    ) -> _Operation[None]:
        op = kafka_admin.AlterConfigOpType
        entries = [
            kafka_admin.ConfigEntry(key, value, incremental_operation=op.SET)
            for key, value in set_configs.items()
        ] + [
            kafka_admin.ConfigEntry(key, None, incremental_operation=op.DELETE)
            for key in delete_configs
        ]
        restype = (
            kafka_admin.ResourceType.TOPIC
            if resource_type == "topic"
            else kafka_admin.ResourceType.BROKER
        )
        resource = kafka_admin.ConfigResource(restype, name, incremental_configs=entries)
        futures = self._client.incremental_alter_configs([resource], request_timeout=self.timeout)
        yield _Future(futures[resource], f"the configs of {resource_type} '{name}'", name)

    def _describe_configs(
        self, resources: list[kafka_admin.ConfigResource]
    ) -> _Operation[list[tuple[kafka_admin.ConfigResource, list[ConfigEntry]]]]:
        if not resources:
            return []
        futures = self._client.describe_configs(resources, request_timeout=self.timeout)
        out = []
        for resource in resources:
            entity = f"{resource.restype.name.lower()} '{resource.name}'"
            described = yield _Future(futures[resource], f"the configs of {entity}", resource.name)
            out.append((resource, [_config_entry(entry) for entry in described.values()]))
        return out

    # --- cluster ----------------------------------------------------------------------

    def _cluster(self) -> _Operation[ClusterInfo]:
        described = yield _Future(
            self._client.describe_cluster(request_timeout=self.timeout), "the cluster description"
        )
        controller = described.controller
        return ClusterInfo(
            cluster_id=described.cluster_id,
            controller=None if controller is None else controller.id,
            nodes=tuple(_node(n) for n in described.nodes),
        )

    # --- consumer groups --------------------------------------------------------------

    def _list_groups(self) -> _Operation[list[GroupListing]]:
        listed = yield _Future(
            self._client.list_consumer_groups(request_timeout=self.timeout), "the group list"
        )
        if listed.errors:
            raise errors.ClientError(
                "listing groups failed: " + "; ".join(str(e) for e in listed.errors)
            )
        return sorted(
            (
                GroupListing(
                    group_id=g.group_id,
                    state=GROUP_STATES.get(g.state, "Unknown"),
                    type=GROUP_TYPES.get(g.type, "Unknown"),
                    simple=bool(g.is_simple_consumer_group),
                )
                for g in listed.valid
            ),
            key=lambda g: g.group_id,
        )

    def _describe_groups(self, group_ids: Sequence[str]) -> _Operation[dict[str, GroupInfo]]:
        if not group_ids:
            return {}
        futures = self._client.describe_consumer_groups(
            list(group_ids), request_timeout=self.timeout
        )
        out = {}
        for group_id in group_ids:
            try:
                described = yield _Future(futures[group_id], f"the description of '{group_id}'")
            except errors.NotFoundError:
                out[group_id] = GroupInfo(group_id, "Dead", "Unknown", "", None, (), False)
                continue
            members = tuple(
                MemberInfo(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id or None,
                    client_id=m.client_id,
                    host=m.host,
                    assignment=tuple(
                        TopicPartition(tp.topic, tp.partition)
                        for tp in (m.assignment.topic_partitions if m.assignment else [])
                    ),
                )
                for m in described.members
            )
            out[group_id] = GroupInfo(
                group_id=described.group_id,
                state=GROUP_STATES.get(described.state, "Unknown"),
                type=GROUP_TYPES.get(described.type, "Unknown"),
                assignor=described.partition_assignor or "",
                coordinator=None if described.coordinator is None else _node(described.coordinator),
                members=members,
                simple=bool(described.is_simple_consumer_group),
            )
        return out

    def _committed_offsets(self, group_id: str) -> _Operation[dict[TopicPartition, int]]:
        request = [confluent_kafka.ConsumerGroupTopicPartitions(group_id)]
        futures = self._client.list_consumer_group_offsets(request, request_timeout=self.timeout)
        result = yield _Future(futures[group_id], f"the committed offsets of '{group_id}'")
        out = {}
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise errors.ClientError(f"offsets of {tp.topic}-{tp.partition}: {tp.error}")
            if tp.offset >= 0:
                out[TopicPartition(tp.topic, tp.partition)] = tp.offset
        return out

    def _alter_committed_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> _Operation[None]:
        if not offsets:
            return
        partitions = [
            confluent_kafka.TopicPartition(tp.topic, tp.partition, offset)
            for tp, offset in sorted(offsets.items())
        ]
        request = [confluent_kafka.ConsumerGroupTopicPartitions(group_id, partitions)]
        futures = self._client.alter_consumer_group_offsets(request, request_timeout=self.timeout)
        result = yield _Future(futures[group_id], f"the offset commit of '{group_id}'")
        failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            raise errors.ClientError(
                f"committing offsets of group '{group_id}' failed: "
                + ", ".join(f"{tp.topic}-{tp.partition}: {tp.error}" for tp in failed)
            )

    def _delete_groups(
        self, group_ids: Sequence[str]
    ) -> _Operation[dict[str, errors.ClientError | None]]:
        if not group_ids:
            return {}
        futures = self._client.delete_consumer_groups(list(group_ids), request_timeout=self.timeout)
        out: dict[str, errors.ClientError | None] = {}
        for group_id in group_ids:
            try:
                yield _Future(futures[group_id], f"the deletion of '{group_id}'")
                out[group_id] = None
            except errors.ConnectError:
                raise
            except errors.ClientError as e:
                out[group_id] = e
        return out

    # --- offsets ----------------------------------------------------------------------

    def _list_offsets(
        self, partitions: Iterable[TopicPartition], spec: OffsetSpec
    ) -> _Operation[dict[TopicPartition, int]]:
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        if spec == "earliest":
            offset_spec = kafka_admin.OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        elif spec == "latest":
            offset_spec = kafka_admin.OffsetSpec.latest()  # type: ignore[no-untyped-call]
        else:
            offset_spec = kafka_admin.OffsetSpec.for_timestamp(int(spec))
        request = {
            confluent_kafka.TopicPartition(tp.topic, tp.partition): offset_spec for tp in wanted
        }
        futures = self._client.list_offsets(
            request,
            isolation_level=confluent_kafka.IsolationLevel.READ_UNCOMMITTED,
            request_timeout=self.timeout,
        )
        out = {}
        for key, future in futures.items():
            tp = TopicPartition(key.topic, key.partition)
            info = yield _Future(future, f"the offsets of {tp}", key.topic)
            out[tp] = int(info.offset)
        return out

    # --- leaders and replicas ---------------------------------------------------------

    def _elect_leaders(
        self, election: Election, partitions: Iterable[TopicPartition] | None
    ) -> _Operation[dict[TopicPartition, errors.ClientError | None]]:
        election_type = (
            confluent_kafka.ElectionType.PREFERRED
            if election == "preferred"
            else confluent_kafka.ElectionType.UNCLEAN
        )
        wanted = (
            None
            if partitions is None
            else [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        )
        # No request_timeout/operation_timeout: confluent-kafka 2.16.1 rejects either one
        # ("more argument specifiers than keyword list entries"); librdkafka's defaults
        # apply, and our own deadline bounds the wait as for every call.
        future = self._client.elect_leaders(election_type, wanted)
        results = yield _Future(future, f"the {election} leader election")
        out: dict[TopicPartition, errors.ClientError | None] = {}
        for key, failure in results.items():
            tp = TopicPartition(key.topic, key.partition)
            # a KafkaError per partition (the docstring says KafkaException: accept both)
            if isinstance(failure, confluent_kafka.KafkaError):
                failure = confluent_kafka.KafkaException(failure)
            error = None if failure is None else errors.kafka_error(failure)
            if failure is None or (
                error is not None and error.code() == confluent_kafka.KafkaError.ELECTION_NOT_NEEDED
            ):
                out[tp] = None
            else:
                out[tp] = translate(failure, key.topic)
        return out

    def _alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> _Operation[dict[TopicPartition, errors.ClientError | None]]:
        if not reassignments:
            return {}
        by_topic: dict[str, list[alter_reassignments_request.ReassignablePartition]] = {}
        for tp, replicas in sorted(reassignments.items()):
            by_topic.setdefault(tp.topic, []).append(
                alter_reassignments_request.ReassignablePartition(
                    partition_index=i32(tp.partition),
                    replicas=None if replicas is None else tuple(BrokerId(r) for r in replicas),
                )
            )
        request = alter_reassignments_request.AlterPartitionReassignmentsRequest(
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=self.timeout)),
            topics=tuple(
                alter_reassignments_request.ReassignableTopic(
                    name=TopicName(topic), partitions=tuple(partitions)
                )
                for topic, partitions in by_topic.items()
            ),
        )
        response = yield self._any_broker(
            request,
            alter_reassignments_response.AlterPartitionReassignmentsResponse,
            "the partition reassignments",
        )
        _raise_for(response.error_code, response.error_message, "the partition reassignments")
        out: dict[TopicPartition, errors.ClientError | None] = {}
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(str(topic.name), int(p.partition_index))
                out[tp] = _error_for(p.error_code, p.error_message, f"reassigning {tp}")
        return out

    def _list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None
    ) -> _Operation[dict[TopicPartition, Reassignment]]:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(set(partitions)):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = tuple(
                list_reassignments_request.ListPartitionReassignmentsTopics(
                    name=TopicName(topic), partition_indexes=tuple(i32(p) for p in indexes)
                )
                for topic, indexes in by_topic.items()
            )
        request = list_reassignments_request.ListPartitionReassignmentsRequest(
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=self.timeout)), topics=topics
        )
        response = yield self._any_broker(
            request,
            list_reassignments_response.ListPartitionReassignmentsResponse,
            "the ongoing partition reassignments",
        )
        _raise_for(response.error_code, response.error_message, "listing reassignments")
        out = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(str(topic.name), int(p.partition_index))
                out[tp] = Reassignment(
                    partition=tp,
                    replicas=tuple(int(r) for r in p.replicas),
                    adding_replicas=tuple(int(r) for r in p.adding_replicas),
                    removing_replicas=tuple(int(r) for r in p.removing_replicas),
                )
        return dict(sorted(out.items()))

    def _describe_log_dirs(
        self, broker_ids: Sequence[int] | None
    ) -> _Operation[dict[int, tuple[LogDirInfo, ...]]]:
        cluster = yield from self._cluster()
        nodes = {node.id: node for node in cluster.nodes}
        wanted = sorted(nodes) if broker_ids is None else list(broker_ids)
        out = {}
        for broker in wanted:
            if broker not in nodes:
                raise errors.NotFoundError(f"Broker {broker} is not in the cluster")
            node = nodes[broker]
            what = f"the log dirs of broker {broker}"
            response = yield _Request(
                ((node.host, node.port),),
                log_dirs_request.DescribeLogDirsRequest(topics=None),
                log_dirs_response.DescribeLogDirsResponse,
                what,
            )
            _raise_for(response.error_code, None, what)
            out[broker] = tuple(
                LogDirInfo(
                    path=result.log_dir,
                    error=_error_for(result.error_code, None, result.log_dir),
                    total_bytes=None if result.total_bytes < 0 else int(result.total_bytes),
                    usable_bytes=None if result.usable_bytes < 0 else int(result.usable_bytes),
                    replicas=tuple(
                        sorted(
                            (
                                LogDirReplica(
                                    partition=TopicPartition(
                                        str(topic.name), int(p.partition_index)
                                    ),
                                    size=int(p.partition_size),
                                    offset_lag=int(p.offset_lag),
                                    is_future=bool(p.is_future_key),
                                )
                                for topic in result.topics
                                for p in topic.partitions
                            ),
                            key=lambda r: r.partition,
                        )
                    ),
                )
                for result in response.results
            )
        return out

    def _describe_metadata_quorum(self) -> _Operation[QuorumInfo]:
        request = quorum_request.DescribeQuorumRequest(
            topics=(
                quorum_request.TopicData(
                    topic_name=TopicName(METADATA_TOPIC),
                    partitions=(quorum_request.PartitionData(partition_index=i32(0)),),
                ),
            )
        )
        what = "the metadata quorum description"
        response = yield self._any_broker(request, quorum_response.DescribeQuorumResponse, what)
        _raise_for(response.error_code, None, what)
        [topic] = response.topics
        [partition] = topic.partitions
        _raise_for(partition.error_code, None, what)

        def replicas(states: Iterable[Any]) -> tuple[QuorumReplica, ...]:
            return tuple(
                QuorumReplica(
                    id=int(s.replica_id),
                    log_end_offset=int(s.log_end_offset),
                    last_fetch_timestamp=_optional_ms(s.last_fetch_timestamp),
                    last_caught_up_timestamp=_optional_ms(s.last_caught_up_timestamp),
                )
                for s in states
            )

        return QuorumInfo(
            leader_id=int(partition.leader_id),
            leader_epoch=int(partition.leader_epoch),
            high_watermark=int(partition.high_watermark),
            voters=replicas(partition.current_voters),
            observers=replicas(partition.observers),
        )

    def _any_broker(self, request: Any, response_type: type[Any], what: str) -> _Request:
        """A request for whichever bootstrap server answers first (brokers forward
        controller requests to the active controller, as for the Java admin client)."""
        wire.check_security(self.security_protocol)
        return _Request(tuple(wire.split_addresses(self.bootstrap)), request, response_type, what)

    # --- plumbing ---------------------------------------------------------------------

    def _metadata(self) -> Any:
        """Cluster metadata (topics and brokers), failing fast when nothing answers.

        list_topics blocks, so it is asked in short slices with callbacks served between."""
        deadline = time.monotonic() + self.timeout
        while True:
            slice_s = max(0.05, min(0.5, deadline - time.monotonic()))
            try:
                metadata = self._client.list_topics(timeout=slice_s)
            except confluent_kafka.KafkaException as e:
                error = errors.kafka_error(e)
                if error is None or error.code() not in _RETRIABLE_METADATA:
                    raise translate(e, None) from None
            else:
                self.watch.connected()
                return metadata
            self._client.poll(0)
            self.watch.check()
            if time.monotonic() >= deadline:
                raise errors.ClientError(
                    f"timed out after {self.timeout:g}s waiting for the cluster metadata"
                )

    def _topic_names(self, include_internal: bool) -> list[str]:
        names = sorted(self._metadata().topics)
        if include_internal:
            return names
        return [name for name in names if not _is_internal(name)]


class Admin(_Operations):
    """A connection to a Kafka cluster for admin operations, blocking (confluent-kafka
    AdminClient, plus the requests it lacks sent by `wire`)."""

    # --- topics -----------------------------------------------------------------------

    def topic_names(self, *, include_internal: bool = True) -> list[str]:
        """All topic names, sorted."""
        return self._topic_names(include_internal)

    def describe_topics(self, names: Sequence[str]) -> dict[str, TopicInfo]:
        """Partitions, leaders, replicas and ISR of each topic; NotFoundError for the first
        one that does not exist (describing never creates a topic)."""
        return self._run(self._describe_topics(names))

    def create_topic(
        self,
        name: str,
        *,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
        replica_assignment: Sequence[Sequence[int]] | None = None,
        if_not_exists: bool = False,
    ) -> bool:
        """Create a topic (the broker's defaults for what is not given). False if it
        existed and `if_not_exists`; AlreadyExistsError if it existed otherwise."""
        return self._run(
            self._create_topic(
                name, partitions, replication_factor, configs, replica_assignment, if_not_exists
            )
        )

    def create_partitions(
        self,
        name: str,
        total: int,
        *,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Grow a topic to `total` partitions."""
        self._run(self._create_partitions(name, total, replica_assignment))

    def delete_topics(self, names: Sequence[str]) -> None:
        self._run(self._delete_topics(names))

    # --- configs ----------------------------------------------------------------------

    def topic_configs(self, names: Sequence[str]) -> dict[str, list[ConfigEntry]]:
        """Every config of each topic, with its source and synonyms, in the broker's order."""
        return self._run(self._topic_configs(names))

    def broker_configs(self, broker: str) -> list[ConfigEntry]:
        """Every config of one broker (`broker` is its id)."""
        return self._run(self._broker_configs(broker))

    def alter_configs(
        self,
        resource_type: str,
        name: str,
        set_configs: Mapping[str, str],
        delete_configs: Sequence[str],
    ) -> None:
        """IncrementalAlterConfigs on a topic or a broker (`resource_type` "topic" or
        "broker"): SET the given values, DELETE the given names (back to their default)."""
        self._run(self._alter_configs(resource_type, name, set_configs, delete_configs))

    # --- cluster ----------------------------------------------------------------------

    def cluster(self) -> ClusterInfo:
        return self._run(self._cluster())

    # --- consumer groups --------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every group the cluster knows, sorted by id."""
        return self._run(self._list_groups())

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        """State, members and assignments. A group that does not exist is described with
        state "Dead" (GroupInfo.exists is False), as Kafka's classic DescribeGroups does."""
        return self._run(self._describe_groups(group_ids))

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (partitions without one are left out)."""
        return self._run(self._committed_offsets(group_id))

    def alter_committed_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit `offsets` for a group (it must have no active members)."""
        self._run(self._alter_committed_offsets(group_id, offsets))

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, errors.ClientError | None]:
        """Delete groups; for each, None on success or the error that refused it."""
        return self._run(self._delete_groups(group_ids))

    # --- offsets ----------------------------------------------------------------------

    def list_offsets(
        self, partitions: Iterable[TopicPartition], spec: OffsetSpec
    ) -> dict[TopicPartition, int]:
        """ListOffsets for each partition: the earliest or latest offset, or (spec is a
        timestamp in ms) the first offset whose timestamp is at or after it, -1 if none."""
        return self._run(self._list_offsets(partitions, spec))

    # --- leaders and replicas ---------------------------------------------------------

    def elect_leaders(
        self, election: Election, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, errors.ClientError | None]:
        """ElectLeaders (KIP-460): "preferred" moves leadership back to each partition's
        first replica, "unclean" lets an out-of-sync replica lead a leaderless partition.
        `partitions` None means every partition. For each partition the broker reports on:
        None when its leader is now the one asked for (ELECTION_NOT_NEEDED included), or
        the error that refused it."""
        return self._run(self._elect_leaders(election, partitions))

    def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, errors.ClientError | None]:
        """AlterPartitionReassignments (KIP-455): move each partition to the given replica
        list; None cancels the partition's ongoing reassignment. For each partition, None
        when accepted or the error that refused it. (Sent by `wire`: librdkafka lacks it.)"""
        return self._run(self._alter_partition_reassignments(reassignments))

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, Reassignment]:
        """The reassignments in progress (of `partitions`, or all). (Sent by `wire`.)"""
        return self._run(self._list_partition_reassignments(partitions))

    def describe_log_dirs(
        self, broker_ids: Sequence[int] | None = None
    ) -> dict[int, tuple[LogDirInfo, ...]]:
        """DescribeLogDirs of each broker (all by default): its log directories, their
        space and the replicas in them. (Sent by `wire` to each broker.)"""
        return self._run(self._describe_log_dirs(broker_ids))

    def describe_metadata_quorum(self) -> QuorumInfo:
        """DescribeQuorum (KIP-595) of the KRaft metadata log: leader, epoch, high
        watermark, voters and observers with their log end offsets. (Sent by `wire`.)"""
        return self._run(self._describe_metadata_quorum())

    # --- plumbing ---------------------------------------------------------------------

    def _run(self, operation: _Operation[T]) -> T:
        try:
            step = next(operation)
            while True:
                try:
                    result = self._wait(step)
                except errors.ClientError as e:
                    step = operation.throw(e)
                else:
                    step = operation.send(result)
        except StopIteration as done:
            value: T = done.value
            return value

    def _wait(self, step: _Step) -> Any:
        if isinstance(step, _Request):
            return wire.request(
                step.addresses,
                step.request,
                step.response_type,
                timeout=self.timeout,
                what=step.what,
            )
        try:
            return connection.wait(
                step.future,
                poll=self._client.poll,
                watch=self.watch,
                timeout=self.timeout,
                what=step.what,
            )
        except confluent_kafka.KafkaException as e:
            raise translate(e, step.subject) from None


class AsyncAdmin(_Operations):
    """`Admin` for asyncio code (the operator's kopf handlers): the same operations,
    awaited without blocking the event loop. confluent-kafka's futures are awaited through
    asyncio.wrap_future while librdkafka's callbacks are served (connection.wait_async);
    the requests librdkafka lacks go over asyncio streams. See `Admin` for each call."""

    async def topic_names(self, *, include_internal: bool = True) -> list[str]:
        # librdkafka's metadata call has no future: it runs in a worker thread
        return await asyncio.to_thread(self._topic_names, include_internal)

    async def describe_topics(self, names: Sequence[str]) -> dict[str, TopicInfo]:
        return await self._run(self._describe_topics(names))

    async def create_topic(
        self,
        name: str,
        *,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
        replica_assignment: Sequence[Sequence[int]] | None = None,
        if_not_exists: bool = False,
    ) -> bool:
        return await self._run(
            self._create_topic(
                name, partitions, replication_factor, configs, replica_assignment, if_not_exists
            )
        )

    async def create_partitions(
        self,
        name: str,
        total: int,
        *,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        await self._run(self._create_partitions(name, total, replica_assignment))

    async def delete_topics(self, names: Sequence[str]) -> None:
        await self._run(self._delete_topics(names))

    async def topic_configs(self, names: Sequence[str]) -> dict[str, list[ConfigEntry]]:
        return await self._run(self._topic_configs(names))

    async def broker_configs(self, broker: str) -> list[ConfigEntry]:
        return await self._run(self._broker_configs(broker))

    async def alter_configs(
        self,
        resource_type: str,
        name: str,
        set_configs: Mapping[str, str],
        delete_configs: Sequence[str],
    ) -> None:
        await self._run(self._alter_configs(resource_type, name, set_configs, delete_configs))

    async def cluster(self) -> ClusterInfo:
        return await self._run(self._cluster())

    async def list_groups(self) -> list[GroupListing]:
        return await self._run(self._list_groups())

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        return await self._run(self._describe_groups(group_ids))

    async def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        return await self._run(self._committed_offsets(group_id))

    async def alter_committed_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        await self._run(self._alter_committed_offsets(group_id, offsets))

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, errors.ClientError | None]:
        return await self._run(self._delete_groups(group_ids))

    async def list_offsets(
        self, partitions: Iterable[TopicPartition], spec: OffsetSpec
    ) -> dict[TopicPartition, int]:
        return await self._run(self._list_offsets(partitions, spec))

    async def elect_leaders(
        self, election: Election, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, errors.ClientError | None]:
        return await self._run(self._elect_leaders(election, partitions))

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, errors.ClientError | None]:
        return await self._run(self._alter_partition_reassignments(reassignments))

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, Reassignment]:
        return await self._run(self._list_partition_reassignments(partitions))

    async def describe_log_dirs(
        self, broker_ids: Sequence[int] | None = None
    ) -> dict[int, tuple[LogDirInfo, ...]]:
        return await self._run(self._describe_log_dirs(broker_ids))

    async def describe_metadata_quorum(self) -> QuorumInfo:
        return await self._run(self._describe_metadata_quorum())

    async def _run(self, operation: _Operation[T]) -> T:
        try:
            step = next(operation)
            while True:
                try:
                    result = await self._wait(step)
                except errors.ClientError as e:
                    step = operation.throw(e)
                else:
                    step = operation.send(result)
        except StopIteration as done:
            value: T = done.value
            return value

    async def _wait(self, step: _Step) -> Any:
        if isinstance(step, _Request):
            return await wire.request_async(
                step.addresses,
                step.request,
                step.response_type,
                timeout=self.timeout,
                what=step.what,
            )
        try:
            return await connection.wait_async(
                step.future,
                poll=self._client.poll,
                watch=self.watch,
                timeout=self.timeout,
                what=step.what,
            )
        except confluent_kafka.KafkaException as e:
            raise translate(e, step.subject) from None


def translate(exception: confluent_kafka.KafkaException, subject: str | None) -> errors.ClientError:
    """A confluent-kafka exception as a ClientError naming `subject` (a topic or group)."""
    error = errors.kafka_error(exception)
    if error is None:
        return errors.ClientError(str(exception))
    code = error.code()
    if code in (
        confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART,
        confluent_kafka.KafkaError._UNKNOWN_TOPIC,
    ):
        return errors.NotFoundError(
            f"Topic '{subject}' does not exist" if subject else errors.describe(error)
        )
    if code == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND:
        return errors.NotFoundError(errors.describe(error))
    if code == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
        return errors.AlreadyExistsError(
            f"Topic '{subject}' already exists." if subject else errors.describe(error)
        )
    if code in (
        confluent_kafka.KafkaError._UNSUPPORTED_FEATURE,
        confluent_kafka.KafkaError.UNSUPPORTED_VERSION,
    ):
        return errors.UnsupportedError(errors.describe(error))
    if code in (confluent_kafka.KafkaError._TRANSPORT, confluent_kafka.KafkaError._TIMED_OUT):
        return errors.ClientError(f"{errors.describe(error)} (is the broker reachable?)")
    return errors.ClientError(errors.describe(error))


def kafka_topic_id(text: str) -> str:
    """librdkafka prints topic ids in standard base64; Kafka in URL-safe base64."""
    return text.replace("+", "-").replace("/", "_").rstrip("=")


def _is_internal(name: str) -> bool:
    return name in ("__consumer_offsets", "__transaction_state", "__share_group_state")


def _node(node: Any) -> Node:
    return Node(id=int(node.id), host=str(node.host), port=int(node.port))


def _source_name(source: Any) -> str:
    try:
        return kafka_admin.ConfigSource(source).name
    except ValueError:
        return "UNKNOWN_CONFIG"


def _config_entry(entry: Any) -> ConfigEntry:
    return ConfigEntry(
        name=entry.name,
        value=entry.value,
        source=_source_name(entry.source),
        sensitive=bool(entry.is_sensitive),
        read_only=bool(entry.is_read_only),
        synonyms=tuple(
            ConfigSynonym(s.name, s.value, _source_name(s.source))
            for s in (entry.synonyms or {}).values()
        ),
    )


def _library_message(exception: confluent_kafka.KafkaException) -> str:
    error = errors.kafka_error(exception)
    return errors.describe(error) if error is not None else str(exception)


def _error_for(code: ErrorCode, message: str | None, what: str) -> errors.ClientError | None:
    """A kio error code (with the broker's message) as a ClientError; None for NONE."""
    if code == ErrorCode.none:
        return None
    text = f"{what}: {wire.error_name(code)}" + (f" ({message})" if message else "")
    if code == ErrorCode.unknown_topic_or_partition:
        return errors.NotFoundError(text)
    if code == ErrorCode.unsupported_version:
        return errors.UnsupportedError(text)
    return errors.ClientError(text)


def _raise_for(code: ErrorCode, message: str | None, what: str) -> None:
    error = _error_for(code, message, what)
    if error is not None:
        raise error


def _optional_ms(value: int) -> int | None:
    return None if value < 0 else int(value)
