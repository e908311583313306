"""The transaction coordinator: transactional ids, their state in `__transaction_state`,
and the markers that end their transactions (Kafka's TransactionCoordinator,
TransactionStateManager and TransactionMarkerChannelManager).

What each request decides is a pure rule module's (`txn_init`, `txn_partitions`,
`txn_end`, `txn_expiry`, `txn_queries`); this class runs those decisions: it writes
their records to the id's `__transaction_state` partition through an
`offsets_log.OffsetsLog` and applies them once committed, sends the markers of prepared
transactions to the partitions' leaders until each has written its marker, then writes
CompleteCommit/CompleteAbort. Concurrency per id needs no queue: a write in flight sets
the id's pending state, and every other request on that id meanwhile gets
CONCURRENT_TRANSACTIONS, so an id's records land in the order memory applies them.

This broker coordinates the ids of the `__transaction_state` partitions it leads. `load`
replays a partition's log (to its end, as Kafka does) when its leadership comes here,
with the partition's leader epoch as coordinator epoch, and re-sends the markers of
every prepared transaction; `unload` drops them when it goes. A write or marker round
that finds the epoch changed stops: the next coordinator finishes the work.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from strom.coordinator import (
    offsets_log,
    txn_decisions,
    txn_end,
    txn_expiry,
    txn_init,
    txn_partitions,
    txn_queries,
    txn_records,
)
from strom.coordinator.txn_metadata import TransactionMetadata, TxnTransit
from strom.coordinator.txn_states import TransactionState, TransactionVersion

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Reply = txn_decisions.Reply
Decision = txn_decisions.Reply | txn_decisions.Write | txn_decisions.NeedProducerId

# Marker errors that mean "ask again later" (TransactionMarkerRequestCompletionHandler);
# the fatal ones stop the round: a newer coordinator or producer epoch has taken over.
_MARKER_FENCED = frozenset(
    {ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced}
)


@dataclasses.dataclass(frozen=True, slots=True)
class MarkerRequest:
    """One round of WriteTxnMarkers for a transaction: the partitions still waiting."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transaction_version: TransactionVersion
    partitions: frozenset[TopicPartition]


# Writes the markers to the partitions' leaders (this broker's own partitions directly,
# others' with WriteTxnMarkers) and says, per partition, what came of it: NONE when the
# marker is written (or the topic is gone), else the error.
SendMarkers = Callable[[MarkerRequest], Awaitable[Mapping[TopicPartition, ErrorCode]]]


@dataclasses.dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 7 * 24 * 3600 * 1000
    # between rounds of markers, and retries of a CompleteX write the log refused
    retry_backoff_ms: int = 100
    server_transaction_version: TransactionVersion = TransactionVersion.TV_0
    # AddPartitionsToTxn / AddOffsetsToTxn that meet the previous transaction still being
    # ended wait this long for it before answering CONCURRENT_TRANSACTIONS
    # (add.partitions.to.txn.retry.backoff.max.ms; Strom's default)
    add_partitions_wait_ms: int = 1000


DEFAULT_CONFIG = TxnConfig()


@dataclasses.dataclass(slots=True)
class HeldAdds:
    """How often an AddPartitionsToTxn / AddOffsetsToTxn was held for the id's last
    transaction to end, and how often the wait ran out (answered CONCURRENT_TRANSACTIONS)."""

    held: int = 0
    ran_out: int = 0
    seconds: float = 0.0


@dataclasses.dataclass(slots=True)
class _Partition:
    """The ids of one `__transaction_state` partition this broker coordinates."""

    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata]


class TransactionCoordinator:
    def __init__(
        self,
        store: offsets_log.OffsetsLog,
        *,
        send_markers: SendMarkers,
        new_producer_id: Callable[[], Awaitable[int]],
        time_ms: Callable[[], int],
        config: TxnConfig | Callable[[], TxnConfig] = DEFAULT_CONFIG,
    ) -> None:
        self._store = store
        self._send_markers = send_markers
        self._new_producer_id = new_producer_id
        self._time_ms = time_ms
        self._config = config
        self._partitions: dict[int, _Partition] = {}
        # marker rounds, and decided writes (which outlive a cancelled request)
        self._tasks: set[asyncio.Task[Any]] = set()
        # set (and dropped) at each change of an id with requests waiting for it to end
        self._end_waiters: dict[str, asyncio.Event] = {}
        self.held = HeldAdds()

    @property
    def config(self) -> TxnConfig:
        return self._config() if callable(self._config) else self._config

    # Placement -----------------------------------------------------------------------

    def partition_of(self, transactional_id: str) -> int | None:
        count = self._store.partition_count()
        return None if count is None else txn_records.partition_for(transactional_id, count)

    def load(self, partition: int, coordinator_epoch: int) -> int:
        """Coordinate the ids of a `__transaction_state` partition whose leadership came
        here: replay its log, then finish every prepared transaction. Returns how many
        ids it holds."""
        transactions: dict[str, TransactionMetadata] = {}
        for key, value in self._store.read(partition):
            try:
                transactional_id = txn_records.parse_key(key)
                stored = txn_records.parse_value(value)
            except txn_records.RecordFormatError as error:
                log.warning("%s-%d: skipping a record: %s", txn_records.TOPIC, partition, error)
                continue
            if stored is None:
                transactions.pop(transactional_id, None)
            else:
                transactions[transactional_id] = TransactionMetadata.from_log(
                    transactional_id, stored
                )
        self._partitions[partition] = _Partition(coordinator_epoch, transactions)
        now = self._time_ms()
        for metadata in transactions.values():
            if metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                self._finish(
                    partition, coordinator_epoch, txn_end.complete_after_markers(metadata, now)
                )
        return len(transactions)

    def unload(self, partition: int) -> int:
        """The partition's leadership went elsewhere: forget its ids (writes and marker
        rounds in flight see the change and stop). Returns how many were dropped."""
        dropped = self._partitions.pop(partition, None)
        for transactional_id in list(self._end_waiters):
            self._changed(transactional_id)  # a held request answers NOT_COORDINATOR now
        return 0 if dropped is None else len(dropped.transactions)

    @property
    def loaded_partitions(self) -> dict[int, int]:
        """Partition -> coordinator epoch, of the partitions coordinated here."""
        return {index: state.coordinator_epoch for index, state in self._partitions.items()}

    def transactions(self) -> list[TransactionMetadata]:
        return [
            metadata
            for state in self._partitions.values()
            for metadata in state.transactions.values()
        ]

    def _owner(self, transactional_id: str) -> tuple[int, _Partition] | ErrorCode:
        partition = self.partition_of(transactional_id)
        if partition is None:
            return ErrorCode.not_coordinator
        state = self._partitions.get(partition)
        if state is None:
            return ErrorCode.not_coordinator
        return partition, state

    def _still_owner(self, partition: int, coordinator_epoch: int) -> bool:
        state = self._partitions.get(partition)
        return state is not None and state.coordinator_epoch == coordinator_epoch

    # Requests ------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> Reply:
        config = self.config
        return await self._run(
            transactional_id,
            lambda metadata, now, new_id: txn_init.init_producer_id(
                metadata,
                transactional_id=transactional_id,
                timeout_ms=timeout_ms,
                max_timeout_ms=config.max_timeout_ms,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                server_transaction_version=config.server_transaction_version,
                now_ms=now,
                new_producer_id=new_id,
            ),
        )

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode:
        wanted = list(partitions)
        reply = await self._run(
            transactional_id,
            lambda metadata, now, _: txn_partitions.add_partitions(
                metadata,
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                partitions=wanted,
                now_ms=now,
            ),
            wait_for_end=True,
        )
        return reply.error

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, offsets_partition: int
    ) -> ErrorCode:
        reply = await self._run(
            transactional_id,
            lambda metadata, now, _: txn_partitions.add_offsets(
                metadata,
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                offsets_partition=offsets_partition,
                now_ms=now,
            ),
            wait_for_end=True,
        )
        return reply.error

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        wanted = list(partitions)
        owner = self._owner(transactional_id)
        if isinstance(owner, ErrorCode):
            return dict.fromkeys(wanted, owner)
        _, state = owner
        return txn_partitions.verify_partitions(
            state.transactions.get(transactional_id),
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partitions=wanted,
        )

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_transaction_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> Reply:
        return await self._run(
            transactional_id,
            lambda metadata, now, new_id: txn_end.end_txn(
                metadata,
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                commit=commit,
                client_transaction_version=client_transaction_version,
                now_ms=now,
                new_producer_id=new_id,
            ),
        )

    def describe(self, transactional_id: str) -> txn_queries.TransactionDescription:
        owner = self._owner(transactional_id)
        if isinstance(owner, ErrorCode):
            return txn_queries.TransactionDescription(transactional_id, owner)
        _, state = owner
        return txn_queries.describe(state.transactions.get(transactional_id), transactional_id)

    def list(
        self,
        *,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
        transactional_id_pattern: str | None = None,
    ) -> txn_queries.TransactionList:
        return txn_queries.list_transactions(
            self.transactions(),
            state_filters=state_filters,
            producer_id_filters=producer_id_filters,
            duration_filter_ms=duration_filter_ms,
            transactional_id_pattern=transactional_id_pattern,
            now_ms=self._time_ms(),
        )

    # Timers --------------------------------------------------------------------------

    async def abort_timed_out(self) -> int:
        """Fence and abort the transactions open past their timeout; how many."""
        now = self._time_ms()
        config = self.config
        aborted = 0
        for state in list(self._partitions.values()):
            for found in txn_expiry.timed_out(state.transactions, now):
                log.info(
                    "aborting transaction of %s (producer %d epoch %d): open past its timeout",
                    found.transactional_id,
                    found.producer_id,
                    found.producer_epoch,
                )

                def decide(
                    metadata: TransactionMetadata | None,
                    at: int,
                    new_id: int | None,
                    found: txn_expiry.TimedOut = found,
                ) -> Decision:
                    if metadata is None:
                        return Reply(ErrorCode.none)
                    return txn_expiry.abort_timed_out(
                        metadata,
                        found,
                        server_transaction_version=config.server_transaction_version,
                        now_ms=at,
                        new_producer_id=new_id,
                    ) or Reply(ErrorCode.none)

                reply = await self._run(found.transactional_id, decide)
                if reply.error is ErrorCode.none:
                    aborted += 1
                else:
                    log.warning(
                        "could not abort the timed-out transaction of %s: %s",
                        found.transactional_id,
                        reply.error.name,
                    )
        return aborted

    async def expire_ids(self) -> int:
        """Tombstone ids unused for transactional.id.expiration.ms; how many."""
        now = self._time_ms()
        expired = 0
        for partition, state in list(self._partitions.items()):
            epoch = state.coordinator_epoch
            for metadata, transit in txn_expiry.expire(
                state.transactions, now, self.config.id_expiration_ms
            ):
                try:
                    await self._write(partition, metadata.transactional_id, transit, now)
                except offsets_log.StoreFailed:
                    metadata.pending_state = None
                    self._changed(metadata.transactional_id)
                    continue
                if not self._still_owner(partition, epoch):
                    return expired
                current = state.transactions.get(metadata.transactional_id)
                if (
                    current is metadata
                    and metadata.pending_state is TransactionState.DEAD
                    and metadata.producer_epoch == transit.producer_epoch
                ):
                    del state.transactions[metadata.transactional_id]
                    expired += 1
                else:
                    metadata.pending_state = None
                self._changed(metadata.transactional_id)
        return expired

    # Running decisions ---------------------------------------------------------------

    async def _run(
        self,
        transactional_id: str,
        decide: Callable[[TransactionMetadata | None, int, int | None], Decision],
        *,
        wait_for_end: bool = False,
    ) -> Reply:
        owner = self._owner(transactional_id)
        if isinstance(owner, ErrorCode):
            return Reply(owner)
        partition, state = owner
        epoch = state.coordinator_epoch
        if wait_for_end:
            await self._wait_for_end(partition, epoch, transactional_id)
            if not self._still_owner(partition, epoch):
                return Reply(ErrorCode.not_coordinator)
        new_producer_id = None
        while True:
            now = self._time_ms()
            decision = decide(state.transactions.get(transactional_id), now, new_producer_id)
            if not isinstance(decision, txn_decisions.NeedProducerId):
                break
            try:
                new_producer_id = await self._new_producer_id()
            except Exception as error:  # the controller's MetadataError, a lost channel
                log.warning("cannot allocate a producer id: %s", error)
                return Reply(ErrorCode.coordinator_load_in_progress)
            if not self._still_owner(partition, epoch):
                return Reply(ErrorCode.not_coordinator)
        if isinstance(decision, txn_decisions.Reply):
            return decision
        write = decision
        if write.created:
            state.transactions[transactional_id] = write.metadata
        # The write and what follows it run to the end even when the request is cancelled
        # (its client went away): a decided write left half done would keep the id's
        # pending state set, and every later request on it CONCURRENT_TRANSACTIONS.
        applied = asyncio.get_running_loop().create_task(
            self._apply(partition, epoch, transactional_id, write, now)
        )
        self._tasks.add(applied)
        applied.add_done_callback(self._tasks.discard)
        applied.add_done_callback(lambda _: self._changed(transactional_id))
        return await asyncio.shield(applied)

    async def _wait_for_end(self, partition: int, epoch: int, transactional_id: str) -> None:
        """Hold a request that would only get CONCURRENT_TRANSACTIONS because the id's
        last transaction is still being ended, until that is done or the wait is over.

        A producer that starts its next transaction right after EndTxn answered (which is
        before the markers are written) would otherwise get CONCURRENT_TRANSACTIONS and
        retry after a backoff: Kafka's KAFKA-5482, whose clients shorten that backoff to
        20 ms. librdkafka (to 2.16 at least) takes an AddPartitionsToTxn so answered as
        possibly applied, and its abort_transaction() then sends an EndTxn(abort) for a
        transaction the coordinator never began, which fails fatally with
        INVALID_TXN_STATE once the previous transaction has completed (against Kafka too).
        """
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self.config.add_partitions_wait_ms / 1000
        held = False
        try:
            while True:
                state = self._partitions.get(partition)
                if state is None or state.coordinator_epoch != epoch:
                    return
                if not txn_partitions.still_ending(state.transactions.get(transactional_id)):
                    return
                remaining = deadline - loop.time()
                if remaining <= 0:  # the wait is over (or add_partitions_wait_ms is 0)
                    if held:
                        self.held.ran_out += 1
                    return
                if not held:
                    held = True
                    self.held.held += 1
                # left in the dict on a timeout: the id's next change drops it
                changed = self._end_waiters.setdefault(transactional_id, asyncio.Event())
                try:
                    await asyncio.wait_for(changed.wait(), remaining)
                except TimeoutError:
                    self.held.ran_out += 1
                    return
        finally:
            if held:
                self.held.seconds += loop.time() - started

    def _changed(self, transactional_id: str) -> None:
        """An id's pending write or marker round is over: its waiters look again."""
        changed = self._end_waiters.pop(transactional_id, None)
        if changed is not None:
            changed.set()

    async def _apply(
        self,
        partition: int,
        epoch: int,
        transactional_id: str,
        write: txn_decisions.Write,
        now: int,
    ) -> Reply:
        """Write a decided record, then apply it (and send the markers it calls for)."""
        try:
            await self._write(partition, transactional_id, write.transit, now)
        except offsets_log.StoreFailed as failure:
            if not self._still_owner(partition, epoch):
                return Reply(ErrorCode.not_coordinator)
            log.warning("%s: cannot write its state: %s", transactional_id, failure)
            return txn_decisions.write_failed(write, failure.error)
        if not self._still_owner(partition, epoch):
            return Reply(ErrorCode.not_coordinator)
        write.metadata.complete(write.transit)
        if isinstance(write.then, txn_decisions.Reply):
            return write.then
        reply, markers = txn_end.after_end_txn_written(write.metadata, write.then, self._time_ms())
        if markers is not None:
            self._finish(partition, epoch, markers)
        return reply

    async def _write(
        self, partition: int, transactional_id: str, transit: TxnTransit, now_ms: int
    ) -> None:
        value = transit.to_log_value()
        encoded = (
            None
            if value is None
            else txn_records.encode_value(
                value, transit.client_transaction_version.log_value_version
            )
        )
        await self._store.append(
            partition, [(txn_records.encode_key(transactional_id), encoded)], now_ms
        )

    # Markers -------------------------------------------------------------------------

    def _finish(self, partition: int, coordinator_epoch: int, markers: txn_end.Markers) -> None:
        task = asyncio.get_running_loop().create_task(
            self._send_and_complete(partition, coordinator_epoch, markers)
        )
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._task_done(done, markers.transactional_id))

    def _task_done(self, task: asyncio.Task[None], transactional_id: str) -> None:
        self._tasks.discard(task)
        self._changed(transactional_id)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction markers failed", exc_info=task.exception())

    async def _send_and_complete(
        self, partition: int, coordinator_epoch: int, markers: txn_end.Markers
    ) -> None:
        """Markers to every partition until each has one, then the CompleteX record."""
        backoff = self.config.retry_backoff_ms / 1000
        waiting = set(markers.partitions)
        while waiting:
            if not self._still_owner(partition, coordinator_epoch):
                return
            try:
                answers = await self._send_markers(
                    MarkerRequest(
                        markers.producer_id,
                        markers.producer_epoch,
                        markers.commit,
                        coordinator_epoch,
                        markers.transaction_version,
                        frozenset(waiting),
                    )
                )
            except Exception:
                # Whatever failed, the transaction must not stay prepared for good: the
                # round is tried again, as for an unreachable leader.
                log.exception("%s: sending markers failed", markers.transactional_id)
                answers = {}
            for topic_partition, error in answers.items():
                if error is ErrorCode.none:
                    waiting.discard(topic_partition)
                elif error in _MARKER_FENCED:
                    log.info(
                        "%s: markers stopped at %s-%d (%s): a newer epoch has taken over",
                        markers.transactional_id,
                        *topic_partition,
                        error.name,
                    )
                    return
            if waiting:
                await asyncio.sleep(backoff)
        while True:
            state = self._partitions.get(partition)
            if state is None or state.coordinator_epoch != coordinator_epoch:
                return
            metadata = state.transactions.get(markers.transactional_id)
            if metadata is None:
                return
            try:
                await self._write(
                    partition, markers.transactional_id, markers.complete, self._time_ms()
                )
            except offsets_log.StoreFailed as failure:
                if not self._still_owner(partition, coordinator_epoch):
                    return
                if not txn_decisions.completion_write_failed(metadata, failure.error):
                    return
                await asyncio.sleep(backoff)
                continue
            if self._still_owner(partition, coordinator_epoch):
                metadata.complete(markers.complete)
            return

    async def drain(self) -> None:
        """Wait for the marker rounds in flight (tests)."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
