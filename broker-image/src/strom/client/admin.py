"""The Kafka admin API as plain data: topics, configs, consumer groups and offsets.

One `Admin` per tool run (or operator reconcile, or test). Every call waits with a
deadline while serving librdkafka's callbacks, so an unreachable bootstrap server fails
at once with the reason (connection.Watch). Results are frozen dataclasses with Kafka's
names for states and config sources, so callers never touch confluent-kafka types; failures
are errors.ClientError subclasses whose message names the topic or group.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

import confluent_kafka
from confluent_kafka import admin as kafka_admin

from strom.client import connection, errors, settings

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


class Admin:
    """A connection to a Kafka cluster for admin operations (confluent-kafka AdminClient)."""

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

    def topic_names(self, *, include_internal: bool = True) -> list[str]:
        """All topic names, sorted."""
        metadata = self._metadata()
        names = sorted(metadata.topics)
        if include_internal:
            return names
        return [name for name in names if not _is_internal(name)]

    def describe_topics(self, names: Sequence[str]) -> dict[str, TopicInfo]:
        """Partitions, leaders, replicas and ISR of each topic; NotFoundError for the first
        one that does not exist (describing never creates a topic)."""
        if not names:
            return {}
        futures = self._client.describe_topics(
            confluent_kafka.TopicCollection(list(names)), request_timeout=self.timeout
        )
        out: dict[str, TopicInfo] = {}
        for name in names:
            described = self._result(futures[name], f"the description of topic '{name}'", name)
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
            self._result(futures[name], f"the creation of topic '{name}'", name)
        except errors.AlreadyExistsError:
            if if_not_exists:
                return False
            raise
        return True

    def create_partitions(
        self,
        name: str,
        total: int,
        *,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Grow a topic to `total` partitions."""
        if replica_assignment:
            assignment = [list(r) for r in replica_assignment]
            new = kafka_admin.NewPartitions(name, total, assignment)
        else:
            new = kafka_admin.NewPartitions(name, total)
        futures = self._client.create_partitions(
            [new], operation_timeout=self.timeout, request_timeout=self.timeout
        )
        self._result(futures[name], f"new partitions of topic '{name}'", name)

    def delete_topics(self, names: Sequence[str]) -> None:
        if not names:
            return
        futures = self._client.delete_topics(
            list(names), operation_timeout=self.timeout, request_timeout=self.timeout
        )
        for name in names:
            self._result(futures[name], f"the deletion of topic '{name}'", name)

    # --- configs ----------------------------------------------------------------------

    def topic_configs(self, names: Sequence[str]) -> dict[str, list[ConfigEntry]]:
        """Every config of each topic, with its source and synonyms, in the broker's order."""
        resources = [
            kafka_admin.ConfigResource(kafka_admin.ResourceType.TOPIC, name) for name in names
        ]
        return {resource.name: entries for resource, entries in self._describe_configs(resources)}

    def broker_configs(self, broker: str) -> list[ConfigEntry]:
        """Every config of one broker (`broker` is its id)."""
        resource = kafka_admin.ConfigResource(kafka_admin.ResourceType.BROKER, broker)
        [(_, entries)] = self._describe_configs([resource])
        return entries

    def alter_configs(
        self,
        resource_type: str,
        name: str,
        set_configs: Mapping[str, str],
        delete_configs: Sequence[str],
    ) -> None:
        """IncrementalAlterConfigs on a topic or a broker (`resource_type` "topic" or
        "broker"): SET the given values, DELETE the given names (back to their default)."""
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
        self._result(futures[resource], f"the configs of {resource_type} '{name}'", name)

    def _describe_configs(
        self, resources: list[kafka_admin.ConfigResource]
    ) -> list[tuple[kafka_admin.ConfigResource, list[ConfigEntry]]]:
        if not resources:
            return []
        futures = self._client.describe_configs(resources, request_timeout=self.timeout)
        out = []
        for resource in resources:
            entity = f"{resource.restype.name.lower()} '{resource.name}'"
            described = self._result(futures[resource], f"the configs of {entity}", resource.name)
            out.append((resource, [_config_entry(entry) for entry in described.values()]))
        return out

    # --- cluster ----------------------------------------------------------------------

    def cluster(self) -> ClusterInfo:
        described = self._result(
            self._client.describe_cluster(request_timeout=self.timeout), "the cluster description"
        )
        controller = described.controller
        return ClusterInfo(
            cluster_id=described.cluster_id,
            controller=None if controller is None else controller.id,
            nodes=tuple(_node(n) for n in described.nodes),
        )

    # --- consumer groups --------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every group the cluster knows, sorted by id."""
        listed = self._result(
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

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        """State, members and assignments. A group that does not exist is described with
        state "Dead" (GroupInfo.exists is False), as Kafka's classic DescribeGroups does."""
        if not group_ids:
            return {}
        futures = self._client.describe_consumer_groups(
            list(group_ids), request_timeout=self.timeout
        )
        out = {}
        for group_id in group_ids:
            try:
                described = self._result(futures[group_id], f"the description of '{group_id}'")
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

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (partitions without one are left out)."""
        request = [confluent_kafka.ConsumerGroupTopicPartitions(group_id)]
        futures = self._client.list_consumer_group_offsets(request, request_timeout=self.timeout)
        result = self._result(futures[group_id], f"the committed offsets of '{group_id}'")
        out = {}
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise errors.ClientError(f"offsets of {tp.topic}-{tp.partition}: {tp.error}")
            if tp.offset >= 0:
                out[TopicPartition(tp.topic, tp.partition)] = tp.offset
        return out

    def alter_committed_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit `offsets` for a group (it must have no active members)."""
        if not offsets:
            return
        partitions = [
            confluent_kafka.TopicPartition(tp.topic, tp.partition, offset)
            for tp, offset in sorted(offsets.items())
        ]
        request = [confluent_kafka.ConsumerGroupTopicPartitions(group_id, partitions)]
        futures = self._client.alter_consumer_group_offsets(request, request_timeout=self.timeout)
        result = self._result(futures[group_id], f"the offset commit of '{group_id}'")
        failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            raise errors.ClientError(
                f"committing offsets of group '{group_id}' failed: "
                + ", ".join(f"{tp.topic}-{tp.partition}: {tp.error}" for tp in failed)
            )

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, errors.ClientError | None]:
        """Delete groups; for each, None on success or the error that refused it."""
        if not group_ids:
            return {}
        futures = self._client.delete_consumer_groups(list(group_ids), request_timeout=self.timeout)
        out: dict[str, errors.ClientError | None] = {}
        for group_id in group_ids:
            try:
                self._result(futures[group_id], f"the deletion of '{group_id}'")
                out[group_id] = None
            except errors.ConnectError:
                raise
            except errors.ClientError as e:
                out[group_id] = e
        return out

    # --- offsets ----------------------------------------------------------------------

    def list_offsets(
        self, partitions: Iterable[TopicPartition], spec: OffsetSpec
    ) -> dict[TopicPartition, int]:
        """ListOffsets for each partition: the earliest or latest offset, or (spec is a
        timestamp in ms) the first offset whose timestamp is at or after it, -1 if none."""
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
            info = self._result(future, f"the offsets of {tp}", key.topic)
            out[tp] = int(info.offset)
        return out

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

    def _result(
        self, future: concurrent.futures.Future[Any], what: str, subject: str | None = None
    ) -> Any:
        try:
            return connection.wait(
                future, poll=self._client.poll, watch=self.watch, timeout=self.timeout, what=what
            )
        except confluent_kafka.KafkaException as e:
            raise translate(e, subject) from None


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
