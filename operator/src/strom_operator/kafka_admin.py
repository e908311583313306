"""The operator's side of the Kafka protocol: the only module that imports strom.client.

A `Session` is made per reconcile (strom.client's AsyncAdmin: every wait has its
deadline, and each call here a bound on the whole; librdkafka's admin client has no close,
it goes with the session); `observe` reads what the brokers say into model.KafkaState, the
other calls carry out plans. Any failure to reach the brokers is `Unreachable` and any
refusal is `AdminError` (message from the broker), which the reconcilers turn into
status conditions instead of crashing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import TypeVar

from strom.client import admin, errors, results

from strom_operator.reconcile import model

MIN_INSYNC_REPLICAS = "min.insync.replicas"
# the source of a topic's own overrides in DescribeConfigs
TOPIC_OVERRIDE_SOURCE = "DYNAMIC_TOPIC_CONFIG"

T = TypeVar("T")


class AdminError(Exception):
    """The brokers refused or failed an admin call; the message is theirs."""

    @property
    def reason(self) -> str:
        """The status condition's reason for this failure."""
        return "KafkaError"


class Unreachable(AdminError):
    """No broker of the cluster answered (reason BrokersUnreachable in status)."""

    @property
    def reason(self) -> str:
        return "BrokersUnreachable"


class TopicExists(AdminError):
    pass


class Session:
    """Admin calls against one cluster, each within `timeout` seconds."""

    def __init__(self, bootstrap: str, *, timeout: float) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        with _translated():
            self._admin = admin.AsyncAdmin(bootstrap, timeout=timeout)

    # --- observing --------------------------------------------------------------------

    async def observe(self) -> model.KafkaState:
        """Every partition with its replicas, ISR, leader and min.insync.replicas; the live
        brokers, the quorum's leader and the reassignments in progress."""
        with _translated():
            info = await self._call(self._admin.cluster())
            names = await self._call(self._admin.topic_names(include_internal=True))
            described = await self._call(self._admin.describe_topics(names)) if names else {}
            configs = await self._call(self._admin.topic_configs(names)) if names else {}
            quorum = await self._call(self._admin.describe_metadata_quorum())
            moving = await self._call(self._admin.list_partition_reassignments())
        partitions = tuple(
            model.PartitionState(
                topic=name,
                partition=p.partition,
                replicas=p.replicas,
                isr=p.isr,
                leader=p.leader,
                min_isr=_min_isr(configs.get(name, [])),
            )
            for name, topic in sorted(described.items())
            for p in topic.partitions
        )
        return model.KafkaState(
            cluster_id=info.cluster_id,
            controller_id=quorum.leader_id if quorum.leader_id >= 0 else info.controller,
            live_brokers=frozenset(node.id for node in info.nodes),
            partitions=partitions,
            reassigning=frozenset(model.TopicPartition(*tp) for tp in moving),
        )

    async def observe_topic(self, name: str) -> model.ObservedTopic | None:
        with _translated():
            try:
                topic = (await self._call(self._admin.describe_topics([name])))[name]
            except errors.NotFoundError:
                return None
            configs = (await self._call(self._admin.topic_configs([name])))[name]
        return model.ObservedTopic(
            name=name,
            topic_id=topic.topic_id,
            partitions=len(topic.partitions),
            replication_factor=len(topic.partitions[0].replicas) if topic.partitions else 0,
            overrides={
                entry.name: entry.value
                for entry in configs
                if entry.source == TOPIC_OVERRIDE_SOURCE and entry.value is not None
            },
        )

    async def cluster_defaults(self) -> dict[str, str]:
        """The cluster-wide dynamic broker config (what `--entity-default` shows): the keys
        set on the default broker entity only."""
        with _translated():
            entries = await self._call(self._admin.broker_configs(""))
        return {
            entry.name: entry.value
            for entry in entries
            if entry.value is not None and entry.source == "DYNAMIC_DEFAULT_BROKER_CONFIG"
        }

    # --- acting -----------------------------------------------------------------------

    async def reassign(self, moves: Mapping[model.TopicPartition, Sequence[int]]) -> None:
        """Start moving partitions to new replica lists (AlterPartitionReassignments)."""
        if not moves:
            return
        request = {
            results.TopicPartition(tp.topic, tp.partition): list(r) for tp, r in moves.items()
        }
        with _translated():
            outcome = await self._call(self._admin.alter_partition_reassignments(request))
        _raise_first(outcome)

    async def elect_preferred(self, partitions: Iterable[model.TopicPartition]) -> None:
        chosen = [results.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        if not chosen:
            return
        with _translated():
            outcome = await self._call(self._admin.elect_leaders("preferred", chosen))
        _raise_first(outcome)

    async def create_topic(
        self,
        name: str,
        *,
        partitions: int | None,
        replication_factor: int | None,
        configs: Mapping[str, str],
    ) -> None:
        with _translated():
            await self._call(
                self._admin.create_topic(
                    name,
                    partitions=partitions,
                    replication_factor=replication_factor,
                    configs=dict(configs),
                )
            )

    async def grow_topic(self, name: str, total: int) -> None:
        with _translated():
            await self._call(self._admin.create_partitions(name, total))

    async def alter_topic_configs(
        self, name: str, set_configs: Mapping[str, str], delete_configs: Sequence[str]
    ) -> None:
        if not set_configs and not delete_configs:
            return
        with _translated():
            await self._call(
                self._admin.alter_configs("topic", name, dict(set_configs), list(delete_configs))
            )

    async def alter_cluster_defaults(
        self, set_configs: Mapping[str, str], delete_configs: Sequence[str]
    ) -> None:
        """The cluster-wide dynamic broker config: applies to every broker, no restart."""
        if set_configs or delete_configs:
            await self._alter("broker", "", set_configs, delete_configs)

    async def delete_topic(self, name: str) -> bool:
        """False if the topic did not exist."""
        with _translated():
            try:
                await self._call(self._admin.delete_topics([name]))
            except errors.NotFoundError:
                return False
        return True

    async def set_configs(
        self, brokers: Mapping[int, Mapping[str, str]], topics: Mapping[str, Mapping[str, str]]
    ) -> None:
        """Set configs per broker id and per topic (a reassignment's throttles)."""
        for broker, configs in sorted(brokers.items()):
            await self._alter("broker", str(broker), configs, ())
        for topic, configs in sorted(topics.items()):
            await self._alter("topic", topic, configs, ())

    async def delete_configs(
        self, brokers: Mapping[int, Sequence[str]], topics: Mapping[str, Sequence[str]]
    ) -> None:
        """Delete configs per broker id and per topic (back to their defaults)."""
        for broker, names in sorted(brokers.items()):
            await self._alter("broker", str(broker), {}, names)
        for topic, names in sorted(topics.items()):
            await self._alter("topic", topic, {}, names)

    async def _alter(
        self,
        resource_type: str,
        name: str,
        set_configs: Mapping[str, str],
        delete_configs: Sequence[str],
    ) -> None:
        with _translated():
            await self._call(
                self._admin.alter_configs(
                    resource_type, name, dict(set_configs), list(delete_configs)
                )
            )

    # --- plumbing ---------------------------------------------------------------------

    async def _call(self, call: Awaitable[T]) -> T:
        # the client's own deadline is per wait; this one bounds a whole call
        try:
            return await asyncio.wait_for(call, self.timeout * 2)
        except TimeoutError:
            raise Unreachable(
                f"{self.bootstrap}: no answer within {self.timeout * 2:g} s"
            ) from None


class _translated:
    """strom.client's errors as this module's."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        if isinstance(error, errors.ConnectError):
            raise Unreachable(str(error)) from error
        if isinstance(error, errors.AlreadyExistsError):
            raise TopicExists(str(error)) from error
        if isinstance(error, errors.ClientError):
            raise AdminError(str(error)) from error


def _min_isr(entries: Sequence[results.ConfigEntry]) -> int:
    for entry in entries:
        if entry.name == MIN_INSYNC_REPLICAS and entry.value is not None:
            return int(entry.value)
    return 1


def _raise_first(outcome: Mapping[results.TopicPartition, errors.ClientError | None]) -> None:
    for tp, error in sorted(outcome.items()):
        if error is not None:
            raise AdminError(f"{tp}: {error}")
