"""The controller: validates metadata changes and turns them into records.

Every change (topics, partitions, configs, producer id blocks) is checked against the
current image, written as Kafka's metadata records to the metadata log, and only then
applied to the image and published. Operations run one at a time, as Kafka's
controller event queue runs them, so each validates against the image the previous
one left.

A topic exists for clients only once its records are durable and its logs are
created: the logs this node will host are prepared first (off the event loop); if
that or the metadata write fails, the prepared logs are removed and the request gets
a retriable error, with nothing half-made left behind.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from strom.cluster import (
    broker_sessions,
    config_records,
    isr_changes,
    leader_election,
    metadata_log,
    placement,
    reassignments,
    records,
    topic_requests,
    topics,
)
from strom.cluster import image as images
from strom.cluster import loader as loaders
from strom.config import broker as broker_config
from strom.config import definitions as config_definitions
from strom.config import topics as topic_config

log = logging.getLogger(__name__)

# Kafka's controller refuses requests that would create more partitions than this at once
# (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH), with this message.
MAX_PARTITIONS_PER_REQUEST = 10_000
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."
# Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
PRODUCER_ID_BLOCK_SIZE = 1000

PartitionKey = tuple[str, int]
P = ParamSpec("P")
T = TypeVar("T")


def _not_cancelled_midway(
    operation: Callable[Concatenate[Controller, P], Awaitable[T]],
) -> Callable[Concatenate[Controller, P], Awaitable[T]]:
    """Run a controller operation to its end even if the request that asked for it is
    cancelled (its client went away): records made durable must also be applied, and the
    lock must not be released while a write is still under way in a worker thread."""

    @functools.wraps(operation)
    async def run(controller: Controller, /, *args: P.args, **kwargs: P.kwargs) -> T:
        task = asyncio.ensure_future(operation(controller, *args, **kwargs))
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    return run


def _retrieve(task: asyncio.Future[Any]) -> None:
    # An outcome nobody waits for any more (its request was cancelled) is still looked at.
    if not task.cancelled() and task.exception() is not None:
        log.debug("a controller operation whose request went away failed: %s", task.exception())


class LogPreparer(Protocol):
    """Creates (and on failure removes) the logs of new partitions this node hosts."""

    async def prepare_logs(self, partitions: Sequence[PartitionKey]) -> None:
        """Raises topics.StorageFailedError, having removed what it created."""
        ...

    async def abandon_logs(self, partitions: Sequence[PartitionKey]) -> None: ...


@dataclass(slots=True)
class _Batch:
    """Records of one operation, and the partitions it adds on this node."""

    entries: list[records.MetadataRecord] = field(default_factory=list)
    local_partitions: list[PartitionKey] = field(default_factory=list)


class Controller:
    def __init__(
        self,
        node_id: int,
        metadata: metadata_log.MetadataLog,
        loader: loaders.MetadataLoader,
        config: Callable[[], broker_config.BrokerConfig],
        preparer: LogPreparer,
    ) -> None:
        self.node_id = node_id
        self._log = metadata
        self._loader = loader
        self._config = config
        self._preparer = preparer
        self._lock = asyncio.Lock()
        self._placement_start = 0
        self._sessions = broker_sessions.BrokerSessions(
            config().get_int("broker.session.timeout.ms")
        )

    @property
    def image(self) -> images.MetadataImage:
        return self._loader.image

    def live_brokers(self) -> list[int]:
        """Brokers new replicas may go to: the registered, unfenced ones (this node alone
        while none has registered, as on a single node)."""
        live = [broker.node_id for broker in self.image.live_brokers()]
        return live or [self.node_id]

    def _racks(self) -> dict[int, str | None]:
        return {node_id: broker.rack for node_id, broker in self.image.brokers.items()}

    # Topics --------------------------------------------------------------------------

    @_not_cancelled_midway
    async def create_topics(
        self, wanted: Sequence[topic_requests.NewTopic], *, validate_only: bool = False
    ) -> list[topic_requests.TopicOutcome]:
        """One outcome per topic, in order; the valid ones are created together."""
        async with self._lock:
            config = self._config()
            total = sum(topic_requests.requested_count(topic, config) for topic in wanted)
            if total > MAX_PARTITIONS_PER_REQUEST:
                refusal = topics.PolicyViolationError(EXCESSIVE_PARTITIONS)
                return [topic_requests.TopicOutcome(topic.name, refusal) for topic in wanted]
            batch = _Batch()
            outcomes: list[topic_requests.TopicOutcome] = []
            names_in_request: set[str] = set()
            hosted = self._partitions_hosted()
            for topic in wanted:
                try:
                    outcome = self._plan_topic(topic, config, names_in_request, hosted, batch)
                except (topics.MetadataError, config_definitions.ConfigError) as error:
                    outcome = topic_requests.TopicOutcome(topic.name, error)
                else:
                    names_in_request.add(topic.name)
                    hosted += outcome.partitions
                outcomes.append(outcome)
            if validate_only or not batch.entries:
                return [
                    outcome if outcome.error else topic_requests.without_id(outcome)
                    for outcome in outcomes
                ]
            try:
                await self._commit(batch)
            except topics.MetadataError as error:
                return [
                    outcome if outcome.error else topic_requests.TopicOutcome(outcome.name, error)
                    for outcome in outcomes
                ]
        for outcome in outcomes:
            if outcome.error is None:
                log.info(
                    "created topic %s with %d partition(s), replication factor %d",
                    outcome.name,
                    outcome.partitions,
                    outcome.replication_factor,
                )
        return outcomes

    def _plan_topic(
        self,
        wanted: topic_requests.NewTopic,
        config: broker_config.BrokerConfig,
        names_in_request: set[str],
        hosted: int,
        batch: _Batch,
    ) -> topic_requests.TopicOutcome:
        overrides = topic_config.validate_topic_configs(wanted.configs)
        self._check_new_name(wanted.name, names_in_request)
        replicas = self._replica_lists(wanted, config)
        self._check_capacity(config, hosted, sum(1 for r in replicas if self.node_id in r))
        topic_id = uuid.uuid4()
        batch.entries.append(records.TopicRecord(name=wanted.name, topic_id=topic_id))
        self._add_partitions(batch, wanted.name, topic_id, 0, replicas)
        batch.entries.extend(
            config_records.change(records.TOPIC_RESOURCE, wanted.name, key, value)
            for key, value in sorted(overrides.items())
        )
        return topic_requests.TopicOutcome(
            wanted.name,
            None,
            topic_id,
            len(replicas),
            len(replicas[0]),
            dict(overrides),
        )

    def _check_new_name(self, name: str, names_in_request: set[str]) -> None:
        topics.validate_topic_name(name)
        if name in self.image.topics or name in names_in_request:
            raise topics.TopicExistsError(f"Topic '{name}' already exists.")
        key = topics.collision_key(name)
        for existing in (*self.image.topics, *names_in_request):
            if topics.collision_key(existing) == key:
                raise topics.InvalidTopicError(
                    f"Topic '{name}' collides with existing topic: {existing}"
                )

    def _replica_lists(
        self, wanted: topic_requests.NewTopic, config: broker_config.BrokerConfig
    ) -> list[tuple[int, ...]]:
        if wanted.assignments:
            if wanted.partitions != -1 or wanted.replication_factor != -1:
                raise topics.InvalidPartitionsError(
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time."
                )
            return self._checked_assignments(wanted.assignments)
        count = config.num_partitions if wanted.partitions == -1 else wanted.partitions
        factor = (
            config.default_replication_factor
            if wanted.replication_factor == -1
            else wanted.replication_factor
        )
        if count < 1:
            raise topics.InvalidPartitionsError("Number of partitions must be larger than 0.")
        if factor < 1:
            raise topics.InvalidReplicationFactorError("Replication factor must be larger than 0.")
        start = self._placement_start
        self._placement_start += 1
        return placement.place(self.live_brokers(), 0, count, factor, start, self._racks())

    def _checked_assignments(self, assignments: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
        live = set(self.live_brokers())
        for replicas in assignments:
            unknown = set(replicas) - live
            if unknown:
                raise topics.InvalidReplicationFactorError(
                    f"Replica assignment refers to unknown broker(s) {sorted(unknown)}"
                )
            if len(set(replicas)) != len(replicas) or not replicas:
                raise topics.InvalidReplicationFactorError(
                    f"Duplicate or empty replica assignment {list(replicas)}"
                )
        if len({len(replicas) for replicas in assignments}) != 1:
            raise topics.InvalidReplicationFactorError(
                "All partitions should have the same number of replicas"
            )
        return [tuple(replicas) for replicas in assignments]

    def _partitions_hosted(self) -> int:
        return sum(1 for _ in self.image.partitions_of(self.node_id))

    def _check_capacity(self, config: broker_config.BrokerConfig, hosted: int, adding: int) -> None:
        limit = config.get_int("max.partitions.per.broker")
        if hosted + adding > limit:
            raise topics.PolicyViolationError(
                f"Cannot create {adding} partition(s): broker {self.node_id} hosts {hosted} "
                f"and may host at most {limit} (max.partitions.per.broker)."
            )

    def _add_partitions(
        self,
        batch: _Batch,
        name: str,
        topic_id: uuid.UUID,
        first: int,
        replica_lists: Sequence[tuple[int, ...]],
    ) -> None:
        live = set(self.live_brokers())
        for offset, replicas in enumerate(replica_lists):
            index = first + offset
            # As Kafka: the ISR is the replicas that can serve (nothing is written yet, so
            # they are in sync), the first of them leads.
            isr = [r for r in replicas if self.image.is_active_broker(r)]
            isr = isr or [r for r in replicas if r in live] or [replicas[0]]
            batch.entries.append(
                records.PartitionRecord(
                    partition_id=i32(index),
                    topic_id=topic_id,
                    replicas=tuple(i32(r) for r in replicas),
                    isr=tuple(i32(r) for r in isr),
                    leader=i32(isr[0]),
                    leader_epoch=i32(0),
                    partition_epoch=i32(0),
                )
            )
            if self.node_id in replicas:
                batch.local_partitions.append((name, index))

    @_not_cancelled_midway
    async def delete_topics(self, names: Sequence[str]) -> dict[str, topics.MetadataError | None]:
        async with self._lock:
            outcomes: dict[str, topics.MetadataError | None] = {}
            batch = _Batch()
            for name in names:
                existing = self.image.topics.get(name)
                if existing is None:
                    outcomes[name] = topics.UnknownTopicError(
                        "This server does not host this topic-partition."
                    )
                    continue
                batch.entries.append(records.RemoveTopicRecord(topic_id=existing.topic_id))
                outcomes[name] = None
            if batch.entries:
                try:
                    await self._commit(batch)
                except topics.MetadataError as error:
                    return {name: outcome or error for name, outcome in outcomes.items()}
        for name, outcome in outcomes.items():
            if outcome is None:
                log.info("deleted topic %s", name)
        return outcomes

    @_not_cancelled_midway
    async def create_partitions(
        self,
        name: str,
        total: int,
        assignments: Sequence[tuple[int, ...]] = (),
        *,
        validate_only: bool = False,
    ) -> None:
        async with self._lock:
            existing = self.image.topics.get(name)
            if existing is None:
                raise topics.UnknownTopicError(f"Topic '{name}' does not exist.")
            current = existing.partition_count
            if total < current:
                raise topics.InvalidPartitionsError(
                    f"Topic currently has {current} partitions, which is higher than "
                    f"the requested {total}."
                )
            if total == current:
                raise topics.InvalidPartitionsError(f"Topic already has {current} partitions.")
            adding = total - current
            if adding > MAX_PARTITIONS_PER_REQUEST:
                raise topics.PolicyViolationError(EXCESSIVE_PARTITIONS)
            if assignments:
                if len(assignments) != adding:
                    raise topics.InvalidPartitionsError(
                        f"Increasing the number of partitions by {adding} but "
                        f"{len(assignments)} assignments provided."
                    )
                replicas = self._checked_assignments(assignments)
            else:
                start = self._placement_start
                self._placement_start += 1
                replicas = placement.place(
                    self.live_brokers(),
                    current,
                    adding,
                    existing.replication_factor,
                    start,
                    self._racks(),
                )
            config = self._config()
            self._check_capacity(
                config, self._partitions_hosted(), sum(1 for r in replicas if self.node_id in r)
            )
            if validate_only:
                return
            batch = _Batch()
            self._add_partitions(batch, name, existing.topic_id, current, replicas)
            await self._commit(batch)
        log.info("topic %s now has %d partitions", name, total)

    # Configs -------------------------------------------------------------------------

    @_not_cancelled_midway
    async def set_topic_configs(self, name: str, overrides: Mapping[str, str]) -> None:
        """Replace a topic's overrides (validated by the caller) with `overrides`."""
        async with self._lock:
            existing = self.image.topics.get(name)
            if existing is None:
                raise topics.UnknownTopicError(f"The topic '{name}' does not exist.")
            await self._commit(
                _Batch(
                    config_records.changes(
                        records.TOPIC_RESOURCE, name, existing.configs, overrides
                    )
                )
            )
        log.info("altered configs of topic %s: %s", name, dict(overrides) or "none")

    @_not_cancelled_midway
    async def set_broker_configs(self, resource_name: str, layer: Mapping[str, str]) -> None:
        """Replace a dynamic broker layer ("" = cluster-wide defaults, else one broker's)."""
        async with self._lock:
            stored = self.image.broker_configs.get(resource_name, {})
            await self._commit(
                _Batch(
                    config_records.changes(records.BROKER_RESOURCE, resource_name, stored, layer)
                )
            )
        which = "cluster-wide default" if resource_name == "" else f"broker {resource_name}"
        log.info("altered dynamic %s configs: %s", which, dict(layer) or "none")

    @_not_cancelled_midway
    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace a group's configs (validated by the caller) with `configs`."""
        async with self._lock:
            stored = self.image.group_configs.get(group_id, {})
            await self._commit(
                _Batch(config_records.changes(records.GROUP_RESOURCE, group_id, stored, configs))
            )
        log.info("altered configs of group %s: %s", group_id, dict(configs) or "none")

    # Brokers -------------------------------------------------------------------------

    @_not_cancelled_midway
    async def register_broker(self, registration: broker_sessions.Registration, now_ms: int) -> int:
        """Register a broker incarnation (fenced until it catches up); its broker epoch.

        A new incarnation of a registered broker (a restarted process) leaves every
        leadership and ISR as if fenced, and catches up as a follower: it may have lost
        what it had not flushed, and without this a restart within its session (or right
        after a controller change, which starts every session afresh) kept its
        leaderships at the same leader epoch. Kafka's handleBrokerUncleanShutdown (without
        ELR); after a controlled shutdown there is nothing left to move."""
        async with self._lock:
            record = self._sessions.register(self.image, registration, now_ms)
            existing = self.image.brokers.get(registration.node_id)
            restarted = (
                existing is not None and existing.incarnation_id != registration.incarnation_id
            )
            moved = self._elections((), {registration.node_id}) if restarted else []
            await self._commit(_Batch([record, *moved]))
        if moved:
            log.info(
                "broker %d restarted: %d partition(s) moved its leadership or ISR membership",
                registration.node_id,
                len(moved),
            )
        log.info(
            "registered broker %d (epoch %d, rack %s)",
            registration.node_id,
            record.broker_epoch,
            registration.rack,
        )
        return int(record.broker_epoch)

    @_not_cancelled_midway
    async def broker_heartbeat(
        self,
        node_id: int,
        broker_epoch: int,
        metadata_offset: int,
        *,
        want_fence: bool,
        want_shut_down: bool,
        now_ms: int,
    ) -> broker_sessions.HeartbeatAnswer:
        async with self._lock:
            changes, answer = self._sessions.heartbeat(
                self.image,
                node_id,
                broker_epoch,
                metadata_offset,
                want_fence,
                want_shut_down,
                now_ms,
            )
            leaving = {node_id} if answer.in_controlled_shutdown else set()
            batch = _Batch([*changes, *self._elections(changes, leaving)])
            await self._commit(batch)
            if leaving and batch.entries:
                self._sessions.entered_controlled_shutdown(node_id, self.image.offset)
        for change in changes:
            log.info("broker %d is %s", node_id, _broker_change(change))
        return answer

    def next_session_expiry_ms(self, now_ms: int) -> int | None:
        return self._sessions.next_expiry_ms(self.image, now_ms)

    def activate_sessions(self, now_ms: int) -> None:
        """This node became the active controller: every broker's session starts now."""
        self._sessions.activate(now_ms)

    @_not_cancelled_midway
    async def fence_expired_brokers(self, now_ms: int) -> list[int]:
        """Fence the brokers whose session expired; their ids."""
        async with self._lock:
            fences = self._sessions.expired(self.image, now_ms)
            await self._commit(_Batch([*fences, *self._elections(fences)]))
        fenced = [int(f.id) for f in fences if isinstance(f, records.FenceBrokerRecord)]
        for node_id in fenced:
            log.warning("fenced broker %d: no heartbeat for broker.session.timeout.ms", node_id)
        return fenced

    def _elections(
        self, changes: Sequence[records.MetadataRecord], leaving: Set[int] = frozenset()
    ) -> list[records.PartitionChangeRecord]:
        """New partition leaders for brokers being fenced or unfenced by ``changes``, or
        ``leaving`` in a controlled shutdown (Kafka treats both alike)."""
        return leader_election.for_broker_changes(
            self.image, changes, leaving, self._allows_unclean
        )

    # Partitions: ISR changes and elections ------------------------------------------

    @_not_cancelled_midway
    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[isr_changes.IsrChange]
    ) -> list[isr_changes.IsrOutcome]:
        """A partition leader's ISR changes (AlterPartition), one outcome per change."""
        async with self._lock:
            broker = self.image.brokers.get(broker_id)
            if broker is None or broker.epoch != broker_epoch:
                stale = ErrorCode.stale_broker_epoch
                return [isr_changes.refused(change, stale) for change in changes]
            entries, outcomes = isr_changes.plan(self.image, broker_id, changes)
            await self._commit(_Batch(list(entries)))
        for entry in entries:
            log.info("broker %d changed an ISR: %s", broker_id, entry)
        return outcomes

    @_not_cancelled_midway
    async def elect_leaders(
        self,
        election: leader_election.ElectionType,
        wanted: Mapping[str, Sequence[int]] | None,
    ) -> dict[str, dict[int, ErrorCode]]:
        """ElectLeaders: per topic and partition, NONE (elected) or why not. ``wanted``
        None: every partition, leaving out those whose election is not needed."""
        async with self._lock:
            outcomes, entries = leader_election.elect_many(self.image, election, wanted)
            await self._commit(_Batch(list(entries)))
        if entries:
            log.info("elected %d leader(s) (%s election)", len(entries), election.name.lower())
        return outcomes

    @_not_cancelled_midway
    async def balance_leaders(self) -> int:
        """auto.leader.rebalance.enable's pass: preferred leaders back where a broker's
        imbalance is above leader.imbalance.per.broker.percentage; how many moved."""
        async with self._lock:
            percentage = self._config().get_int("leader.imbalance.per.broker.percentage")
            changes = leader_election.rebalance(self.image, percentage)
            await self._commit(_Batch(list(changes)))
        if changes:
            log.info("moved %d partition(s) back to their preferred leader", len(changes))
        return len(changes)

    # Partitions: reassignments -------------------------------------------------------

    @_not_cancelled_midway
    async def alter_partition_reassignments(
        self, wanted: reassignments.Wanted, *, allow_replication_factor_change: bool = True
    ) -> dict[str, dict[int, reassignments.Outcome]]:
        """AlterPartitionReassignments: per topic and partition, what became of it."""
        async with self._lock:
            outcomes, entries = reassignments.plan(
                self.image,
                wanted,
                self._allows_unclean,
                allow_replication_factor_change=allow_replication_factor_change,
            )
            await self._commit(_Batch(list(entries)))
        for entry in entries:
            log.info("partition reassignment: %s", entry)
        return outcomes

    def list_partition_reassignments(
        self, wanted: Mapping[str, Sequence[int]] | None
    ) -> dict[str, list[images.PartitionImage]]:
        return reassignments.ongoing(self.image, wanted)

    def _allows_unclean(self, topic: images.TopicImage) -> bool:
        config = topic_config.effective_topic_config(self._config(), topic.configs)
        return bool(config.value("unclean.leader.election.enable"))

    # Producer ids --------------------------------------------------------------------

    @_not_cancelled_midway
    async def allocate_producer_ids(self, broker_id: int) -> range:
        """A block of producer ids for `broker_id`, never handed out before."""
        async with self._lock:
            first = self.image.next_producer_id
            block = range(first, first + PRODUCER_ID_BLOCK_SIZE)
            await self._commit(
                _Batch(
                    [
                        records.ProducerIdsRecord(
                            broker_id=i32(broker_id),
                            broker_epoch=i64(0),
                            next_producer_id=i64(block.stop),
                        )
                    ]
                )
            )
        return block

    # Committing ----------------------------------------------------------------------

    async def _commit(self, batch: _Batch) -> None:
        """Durable, applied and published, or nothing at all (raises MetadataError)."""
        if not batch.entries:
            return
        # Staged first: a record that would not apply is a bug, and must not reach the log.
        delta = self._loader.stage((-1, entry) for entry in batch.entries)
        if batch.local_partitions:
            await self._preparer.prepare_logs(batch.local_partitions)
        try:
            last_offset = await self._log.append(batch.entries)
        except topics.CommitTimeoutError:
            raise  # the records may still commit: their logs stay
        except (metadata_log.MetadataLogError, topics.MetadataError) as error:
            log.error("%s", error)
            if batch.local_partitions:
                await self._preparer.abandon_logs(batch.local_partitions)
            if isinstance(error, topics.MetadataError):
                raise
            raise topics.StorageFailedError(str(error)) from error
        if self._loader.image.offset < last_offset:
            # a log that does not apply what it commits (the Raft one does, in order)
            delta.offset = last_offset
            self._loader.load(delta)


def _broker_change(change: records.MetadataRecord) -> str:
    if isinstance(change, records.BrokerRegistrationChangeRecord):
        return "in controlled shutdown"
    return type(change).__name__.removesuffix("BrokerRecord").lower() + "d"
