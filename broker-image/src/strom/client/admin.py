"""The Kafka admin API as plain data: topics, configs, consumer groups, offsets, leader
elections, reassignments, log dirs and the metadata quorum.

One `Admin` per tool run or test, one `AsyncAdmin` per operator reconcile loop: the same
operations, blocking or awaited. Every call waits with a deadline while serving
librdkafka's callbacks, so an unreachable bootstrap server fails at once with the reason
(connection.Watch). Results are frozen dataclasses (`results`) with Kafka's names for
states and config sources, so callers never touch confluent-kafka or kio types; failures
are errors.ClientError subclasses whose message names the topic or group. What librdkafka
has no call for (reassignments, log dirs, the quorum, OffsetDelete, the cluster-wide broker
defaults) is sent by `wire` as plain Kafka requests.

The operations themselves are written once, as generators of `steps`, in `topics`,
`groups` and `cluster`; this module runs them: `Admin` blocking, `AsyncAdmin` awaited.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import confluent_kafka

from strom.client import (
    cluster,
    connection,
    errors,
    groups,
    offset_deletion,
    results,
    steps,
    topics,
    wire,
)

T = TypeVar("T")

DEFAULT_TIMEOUT_S = steps.DEFAULT_TIMEOUT_S
# The calls' argument types, named here: in the classes `cluster` is the method, not the module.
OffsetSpec = groups.OffsetSpec
Election = cluster.Election


class Admin(steps.Session):
    """A connection to a Kafka cluster for admin operations, blocking (confluent-kafka
    AdminClient, plus the requests it lacks sent by `wire`)."""

    # --- topics -----------------------------------------------------------------------

    def topic_names(self, *, include_internal: bool = True) -> list[str]:
        """All topic names, sorted."""
        return topics.topic_names(self, include_internal)

    def describe_topics(self, names: Sequence[str]) -> dict[str, results.TopicInfo]:
        """Partitions, leaders, replicas and ISR of each topic; NotFoundError for the first
        one that does not exist (describing never creates a topic)."""
        return self._run(topics.describe_topics(self, names))

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
            topics.create_topic(
                self,
                name,
                partitions,
                replication_factor,
                configs,
                replica_assignment,
                if_not_exists,
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
        self._run(topics.create_partitions(self, name, total, replica_assignment))

    def delete_topics(self, names: Sequence[str]) -> None:
        self._run(topics.delete_topics(self, names))

    # --- configs ----------------------------------------------------------------------

    def topic_configs(self, names: Sequence[str]) -> dict[str, list[results.ConfigEntry]]:
        """Every config of each topic, with its source and synonyms, in the broker's order."""
        return self._run(topics.topic_configs(self, names))

    def broker_configs(self, broker: str) -> list[results.ConfigEntry]:
        """Every config of one broker (`broker` is its id; "" the cluster-wide defaults:
        only what is set there). An unknown id is a NotFoundError at once."""
        return self._run(topics.broker_configs(self, broker))

    def alter_configs(
        self,
        resource_type: str,
        name: str,
        set_configs: Mapping[str, str],
        delete_configs: Sequence[str],
    ) -> None:
        """IncrementalAlterConfigs on a topic or a broker (`resource_type` "topic" or
        "broker"; broker "" is the cluster-wide default): SET the given values, DELETE the
        given names (back to their default)."""
        self._run(topics.alter_configs(self, resource_type, name, set_configs, delete_configs))

    # --- cluster ----------------------------------------------------------------------

    def cluster(self) -> results.ClusterInfo:
        return self._run(cluster.describe_cluster(self))

    # --- consumer groups --------------------------------------------------------------

    def list_groups(self) -> list[results.GroupListing]:
        """Every group the cluster knows, sorted by id."""
        return self._run(groups.list_groups(self))

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, results.GroupInfo]:
        """State, members and assignments. A group that does not exist is described with
        state "Dead" (results.GroupInfo.exists is False), as Kafka's classic DescribeGroups does."""
        return self._run(groups.describe_groups(self, group_ids))

    def committed_offsets(self, group_id: str) -> dict[results.TopicPartition, int]:
        """The group's committed offsets (partitions without one are left out)."""
        return self._run(groups.committed_offsets(self, group_id))

    def alter_committed_offsets(
        self, group_id: str, offsets: Mapping[results.TopicPartition, int]
    ) -> None:
        """Commit `offsets` for a group (it must have no active members)."""
        self._run(groups.alter_committed_offsets(self, group_id, offsets))

    def delete_committed_offsets(
        self, group_id: str, partitions: Sequence[results.TopicPartition]
    ) -> results.OffsetDeletion:
        """OffsetDelete: remove the group's committed offsets of `partitions` (refused with
        GROUP_SUBSCRIBED_TO_TOPIC for a topic its members consume). (Sent by `wire`.)"""
        return self._run(offset_deletion.delete_committed_offsets(self, group_id, partitions))

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, errors.ClientError | None]:
        """Delete groups; for each, None on success or the error that refused it."""
        return self._run(groups.delete_groups(self, group_ids))

    # --- offsets ----------------------------------------------------------------------

    def list_offsets(
        self, partitions: Iterable[results.TopicPartition], spec: OffsetSpec
    ) -> dict[results.TopicPartition, int]:
        """ListOffsets for each partition: the earliest or latest offset, or (spec is a
        timestamp in ms) the first offset whose timestamp is at or after it, -1 if none."""
        return self._run(groups.list_offsets(self, partitions, spec))

    # --- leaders and replicas ---------------------------------------------------------

    def elect_leaders(
        self, election: Election, partitions: Iterable[results.TopicPartition] | None = None
    ) -> dict[results.TopicPartition, errors.ClientError | None]:
        """ElectLeaders (KIP-460): "preferred" moves leadership back to each partition's
        first replica, "unclean" lets an out-of-sync replica lead a leaderless partition.
        `partitions` None means every partition. For each partition the broker reports on:
        None when its leader is now the one asked for (ELECTION_NOT_NEEDED included), or
        the error that refused it."""
        return self._run(cluster.elect_leaders(self, election, partitions))

    def alter_partition_reassignments(
        self, reassignments: Mapping[results.TopicPartition, Sequence[int] | None]
    ) -> dict[results.TopicPartition, errors.ClientError | None]:
        """AlterPartitionReassignments (KIP-455): move each partition to the given replica
        list; None cancels the partition's ongoing reassignment. For each partition, None
        when accepted or the error that refused it. (Sent by `wire`: librdkafka lacks it.)"""
        return self._run(cluster.alter_partition_reassignments(self, reassignments))

    def list_partition_reassignments(
        self, partitions: Iterable[results.TopicPartition] | None = None
    ) -> dict[results.TopicPartition, results.Reassignment]:
        """The reassignments in progress (of `partitions`, or all). (Sent by `wire`.)"""
        return self._run(cluster.list_partition_reassignments(self, partitions))

    def describe_log_dirs(
        self, broker_ids: Sequence[int] | None = None
    ) -> dict[int, tuple[results.LogDirInfo, ...]]:
        """DescribeLogDirs of each broker (all by default): its log directories, their
        space and the replicas in them. (Sent by `wire` to each broker.)"""
        return self._run(cluster.describe_log_dirs(self, broker_ids))

    def describe_metadata_quorum(self) -> results.QuorumInfo:
        """DescribeQuorum (KIP-595) of the KRaft metadata log: leader, epoch, high
        watermark, voters and observers with their log end offsets. (Sent by `wire`.)"""
        return self._run(cluster.describe_metadata_quorum(self))

    # --- plumbing ---------------------------------------------------------------------

    def _run(self, operation: steps.Operation[T]) -> T:
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

    def _wait(self, step: steps.Step) -> Any:
        if isinstance(step, steps.Request):
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
                poll=self.client.poll,
                watch=self.watch,
                timeout=self.timeout,
                what=step.what,
            )
        except confluent_kafka.KafkaException as e:
            raise steps.translate(e, step.subject) from None


class AsyncAdmin(steps.Session):
    """`Admin` for asyncio code (the operator's kopf handlers): the same operations,
    awaited without blocking the event loop. confluent-kafka's futures are awaited through
    asyncio.wrap_future while librdkafka's callbacks are served (connection.wait_async);
    the requests librdkafka lacks go over asyncio streams. See `Admin` for each call."""

    async def topic_names(self, *, include_internal: bool = True) -> list[str]:
        # librdkafka's metadata call has no future: it runs in a worker thread
        return await asyncio.to_thread(topics.topic_names, self, include_internal)

    async def describe_topics(self, names: Sequence[str]) -> dict[str, results.TopicInfo]:
        return await self._run(topics.describe_topics(self, names))

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
            topics.create_topic(
                self,
                name,
                partitions,
                replication_factor,
                configs,
                replica_assignment,
                if_not_exists,
            )
        )

    async def create_partitions(
        self,
        name: str,
        total: int,
        *,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        await self._run(topics.create_partitions(self, name, total, replica_assignment))

    async def delete_topics(self, names: Sequence[str]) -> None:
        await self._run(topics.delete_topics(self, names))

    async def topic_configs(self, names: Sequence[str]) -> dict[str, list[results.ConfigEntry]]:
        return await self._run(topics.topic_configs(self, names))

    async def broker_configs(self, broker: str) -> list[results.ConfigEntry]:
        return await self._run(topics.broker_configs(self, broker))

    async def alter_configs(
        self,
        resource_type: str,
        name: str,
        set_configs: Mapping[str, str],
        delete_configs: Sequence[str],
    ) -> None:
        await self._run(
            topics.alter_configs(self, resource_type, name, set_configs, delete_configs)
        )

    async def cluster(self) -> results.ClusterInfo:
        return await self._run(cluster.describe_cluster(self))

    async def list_groups(self) -> list[results.GroupListing]:
        return await self._run(groups.list_groups(self))

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, results.GroupInfo]:
        return await self._run(groups.describe_groups(self, group_ids))

    async def committed_offsets(self, group_id: str) -> dict[results.TopicPartition, int]:
        return await self._run(groups.committed_offsets(self, group_id))

    async def alter_committed_offsets(
        self, group_id: str, offsets: Mapping[results.TopicPartition, int]
    ) -> None:
        await self._run(groups.alter_committed_offsets(self, group_id, offsets))

    async def delete_committed_offsets(
        self, group_id: str, partitions: Sequence[results.TopicPartition]
    ) -> results.OffsetDeletion:
        return await self._run(offset_deletion.delete_committed_offsets(self, group_id, partitions))

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, errors.ClientError | None]:
        return await self._run(groups.delete_groups(self, group_ids))

    async def list_offsets(
        self, partitions: Iterable[results.TopicPartition], spec: OffsetSpec
    ) -> dict[results.TopicPartition, int]:
        return await self._run(groups.list_offsets(self, partitions, spec))

    async def elect_leaders(
        self, election: Election, partitions: Iterable[results.TopicPartition] | None = None
    ) -> dict[results.TopicPartition, errors.ClientError | None]:
        return await self._run(cluster.elect_leaders(self, election, partitions))

    async def alter_partition_reassignments(
        self, reassignments: Mapping[results.TopicPartition, Sequence[int] | None]
    ) -> dict[results.TopicPartition, errors.ClientError | None]:
        return await self._run(cluster.alter_partition_reassignments(self, reassignments))

    async def list_partition_reassignments(
        self, partitions: Iterable[results.TopicPartition] | None = None
    ) -> dict[results.TopicPartition, results.Reassignment]:
        return await self._run(cluster.list_partition_reassignments(self, partitions))

    async def describe_log_dirs(
        self, broker_ids: Sequence[int] | None = None
    ) -> dict[int, tuple[results.LogDirInfo, ...]]:
        return await self._run(cluster.describe_log_dirs(self, broker_ids))

    async def describe_metadata_quorum(self) -> results.QuorumInfo:
        return await self._run(cluster.describe_metadata_quorum(self))

    async def _run(self, operation: steps.Operation[T]) -> T:
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

    async def _wait(self, step: steps.Step) -> Any:
        if isinstance(step, steps.Request):
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
                poll=self.client.poll,
                watch=self.watch,
                timeout=self.timeout,
                what=step.what,
            )
        except confluent_kafka.KafkaException as e:
            raise steps.translate(e, step.subject) from None
