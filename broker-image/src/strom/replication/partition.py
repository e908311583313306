"""A partition replica on this broker: the only door to its log.

Appends as leader (`append_as_leader`: validation, min.insync.replicas, acks, an
awaitable on the high watermark), reads (`read`: bounded by the high watermark for
consumers, leader epochs fenced), offsets by time (`list_offset`) and DeleteRecords all
go through here, so the rules replication adds (ISR, followers, truncation) live in one
place. Results carry typed errors that the request handlers map to Kafka's codes.

As leader it tracks its followers' fetches (`follower_states`): the high watermark is
the smallest log end offset over the ISR, followers that stop catching up for
`replica.lag.time.max.ms` are proposed out of the ISR and those that catch up back in
(`propose_isr`, which the replica manager sends to the controller as AlterPartition). As
follower it takes the leader's batches verbatim (`append_as_follower`) and truncates a
tail that diverges from the leader's log by leader epoch (`truncate_diverging`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable

from strom.cluster import image as images
from strom.protocol import regions
from strom.records import batches, control
from strom.replication import follower_states
from strom.replication.outcomes import (
    EARLIEST,
    EARLIEST_LOCAL,
    EARLIEST_PENDING_UPLOAD,
    LATEST,
    LATEST_TIERED,
    MAX_TIMESTAMP,
    AppendError,
    AppendOutcome,
    FollowerFetch,
    Isolation,
    ListedOffset,
    ReadError,
    ReadOutcome,
)
from strom.storage import leader_epochs, log_config, partition_log, producer_state, validator

log = logging.getLogger(__name__)


_VALIDATION_ERRORS = {
    validator.Reason.CORRUPT: AppendError.CORRUPT_MESSAGE,
    validator.Reason.TOO_LARGE: AppendError.MESSAGE_TOO_LARGE,
    validator.Reason.INVALID_RECORD: AppendError.INVALID_RECORD,
    validator.Reason.TRANSACTIONAL_ID_REQUIRED: AppendError.TRANSACTIONAL_ID_REQUIRED,
}


# KIP-890's proof of a verified transaction, as the produce path holds it
VerificationGuard = producer_state.VerificationGuard

# Sends a leader's proposed ISR on to the controller (the replica manager's IsrUpdates)
IsrProposer = Callable[["Partition", tuple[int, ...]], None]


def _no_proposals(partition: Partition, isr: tuple[int, ...]) -> None:
    pass


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        log: partition_log.PartitionLog,
        node_id: int,
        state: images.PartitionImage | None = None,
        on_storage_error: Callable[[OSError], None] = lambda error: None,
        *,
        now_ms: Callable[[], int] = partition_log.wall_clock_ms,
        propose_isr: IsrProposer = _no_proposals,
    ) -> None:
        self.topic = topic
        self._on_storage_error = on_storage_error
        self._now_ms = now_ms
        self._propose_isr = propose_isr
        self.index = index
        self.log = log
        self.node_id = node_id
        self.topic_id: uuid.UUID | None = None
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.leader = images.NO_LEADER
        self.replicas: tuple[int, ...] = (node_id,)
        self.isr: tuple[int, ...] = (node_id,)
        self.followers = follower_states.Followers()
        # the ISR proposed to the controller and not answered yet
        self.proposed_isr: tuple[int, ...] | None = None
        self._epoch_start_offset = 0  # where this leadership's epoch starts in the log
        self._fetch_waiters: set[asyncio.Future[None]] = set()  # consumers: HW moved
        self._replica_waiters: set[asyncio.Future[None]] = set()  # followers: LEO moved
        # (offset the high watermark must pass, min.insync.replicas, future) of acks=all
        self._hw_waiters: list[tuple[int, int, asyncio.Future[AppendError | None]]] = []
        self.become(state or _alone(index, node_id))

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, epoch {self.leader_epoch})"

    # State from metadata ---------------------------------------------------------------

    def become(self, state: images.PartitionImage) -> None:
        """Take the replicas, ISR, leader and epoch the metadata now says."""
        new_leadership = state.leader != self.leader or state.leader_epoch != self.leader_epoch
        was_leader = self.is_leader
        self.leader_epoch = state.leader_epoch
        self.leader = state.leader
        if state.replicas != self.replicas:
            self.followers.keep_only(state.replicas, self.node_id)
        self.replicas = state.replicas
        if state.partition_epoch >= self.partition_epoch or new_leadership:
            self.isr = state.isr
            self.partition_epoch = state.partition_epoch
            if self.proposed_isr is not None and (new_leadership or self.proposed_isr == state.isr):
                self.proposed_isr = None
        if not self.is_leader:
            if was_leader:
                self._fail_waiters(AppendError.NOT_LEADER)
            self._wake_fetchers()
            return
        if new_leadership:
            now = self._now_ms()
            self.followers.reset(self.replicas, self.isr, self.node_id, now)
            self.proposed_isr = None
            self._epoch_start_offset = self.log.log_end_offset
            # Kafka marks where the new epoch starts at once; an empty log needs no mark
            # (its first append makes it), which spares new topics a file write each.
            if self.log.log_end_offset > self.log.log_start_offset:
                try:
                    self.log.leader_epoch_cache.assign(self.leader_epoch, self.log.log_end_offset)
                except OSError as error:
                    self._on_storage_error(error)
        self._maybe_advance_high_watermark()

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    def update_config(self, config: log_config.LogConfig) -> None:
        if self.log.config != config:
            self.log.update_config(config)

    # Offsets ---------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def _maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark waits for: a proposed expansion counts already
        (Kafka's maximal ISR), a proposed shrink not yet."""
        if self.proposed_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.proposed_isr if r not in self.isr)

    def _maybe_advance_high_watermark(self) -> None:
        """The high watermark is the smallest log end offset over the ISR; it only grows."""
        end = self.followers.min_end_offset(self._maximal_isr(), self.log.log_end_offset)
        if end <= self.log.high_watermark:
            return
        self.log.update_high_watermark(end)
        high_watermark = self.log.high_watermark
        if self._hw_waiters:
            still: list[tuple[int, int, asyncio.Future[AppendError | None]]] = []
            for offset, min_isr, waiter in self._hw_waiters:
                if high_watermark > offset:
                    if not waiter.done():
                        waiter.set_result(
                            None
                            if len(self.isr) >= min_isr
                            else AppendError.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                        )
                else:
                    still.append((offset, min_isr, waiter))
            self._hw_waiters = still
        self._wake_fetchers()

    # The ISR (leader) ------------------------------------------------------------------

    def follower_fetched(self, replica_id: int, fetch_offset: int) -> None:
        """A follower fetched from `fetch_offset`: its log ends there."""
        state = self.followers.get(replica_id)
        if state is None:
            return
        state.fetched(fetch_offset, self.log.log_end_offset, self._now_ms())
        if (
            replica_id not in self.isr
            and self.proposed_isr is None
            and fetch_offset >= self.high_watermark
            and fetch_offset >= self._epoch_start_offset
        ):
            self._propose(tuple(sorted({*self.isr, replica_id}, key=self.replicas.index)))
        self._maybe_advance_high_watermark()

    def shrink_isr_if_lagging(self, max_lag_ms: int) -> list[int]:
        """Propose the ISR without the followers that have not caught up within
        `max_lag_ms`; the ids proposed out."""
        if not self.is_leader or self.proposed_isr is not None:
            return []
        lagging = self.followers.out_of_sync(
            self.isr, self.log.log_end_offset, self._now_ms(), max_lag_ms
        )
        if lagging:
            self._propose(tuple(r for r in self.isr if r not in lagging))
        return lagging

    def _propose(self, isr: tuple[int, ...]) -> None:
        self.proposed_isr = isr
        self._propose_isr(self, isr)

    def isr_answered(
        self, isr: tuple[int, ...] | None, leader_epoch: int, partition_epoch: int
    ) -> None:
        """The controller's answer to the proposal: the committed ISR (None: refused,
        the metadata will tell what holds)."""
        self.proposed_isr = None
        if (
            isr is not None
            and leader_epoch == self.leader_epoch
            and partition_epoch > self.partition_epoch
        ):
            self.isr = isr
            self.partition_epoch = partition_epoch
        self._maybe_advance_high_watermark()

    # Appending -------------------------------------------------------------------------

    def append_as_leader(
        self,
        data: bytearray,
        *,
        acks: int,
        rules: validator.Rules,
        min_insync_replicas: int,
        transactional: bool,
        now_ms: int,
        verification: producer_state.VerificationGuard | None = None,
    ) -> AppendOutcome:
        """Validate and append a client's record set. With acks=-1 the producer is answered
        once `wait_committed(outcome)` completes (the high watermark covers the batch).
        `transactional` (the request names a transactional id): a batch opening a
        transaction needs `verification`, the guard of its verification (KIP-890)."""
        if not self.is_leader:
            return AppendOutcome(AppendError.NOT_LEADER)
        if acks == -1 and len(self.isr) < min_insync_replicas:
            members = ",".join(str(r) for r in self.isr)
            return AppendOutcome(
                AppendError.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {{{members}}} is insufficient to satisfy "
                f"the min.isr requirement of {min_insync_replicas}",
            )
        try:
            data, headers = validator.validate(
                data, rules, transactional=transactional, where=f"{self.topic}-{self.index}"
            )
        except validator.InvalidBatch as error:
            return AppendOutcome(_VALIDATION_ERRORS[error.reason], str(error))
        return self._appended(
            lambda: self.log.append(
                data,
                headers,
                leader_epoch=self.leader_epoch,
                now_ms=now_ms,
                verification=verification,
                verify=transactional,
            )
        )

    def transaction_verification(self, producer_id: int) -> producer_state.VerificationGuard | None:
        """KIP-890: a guard to take before asking the coordinator, when a transactional
        batch of this producer would open a transaction here (None: one is open)."""
        producers = self.log.producer_state
        if not producers.needs_verification(producer_id):
            return None
        return producers.start_verification(producer_id)

    async def append_records(
        self,
        data: bytearray,
        headers: list[batches.BatchHeader],
        now_ms: int,
        min_insync_replicas: int = 1,
    ) -> AppendOutcome:
        """Append a batch the broker built itself (coordinator records), as leader, and
        return once it is committed: as an acks=all produce, refused while the ISR is
        smaller than the topic's `min_insync_replicas` (Kafka's coordinators append with
        required acks -1)."""
        if not self.is_leader:
            return AppendOutcome(AppendError.NOT_LEADER)
        return await self._append_committed(
            lambda: self._append(data, headers, now_ms), min_insync_replicas
        )

    async def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: control.EndTxnMarker,
        now_ms: int,
        min_insync_replicas: int = 1,
    ) -> AppendOutcome:
        """WriteTxnMarkers for one partition: the commit or abort marker appended as
        leader and committed as an acks=all produce (Kafka's markers are written with
        required acks -1). A marker from an older producer epoch or coordinator is
        refused (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED)."""
        if not self.is_leader:
            return AppendOutcome(AppendError.NOT_LEADER)

        def write() -> AppendOutcome:
            try:
                return self._appended(
                    lambda: self.log.append_marker(
                        producer_id, producer_epoch, marker, self.leader_epoch, now_ms
                    )
                )
            except producer_state.CoordinatorFencedError as error:
                return AppendOutcome(AppendError.TRANSACTION_COORDINATOR_FENCED, str(error))

        return await self._append_committed(write, min_insync_replicas)

    async def _append_committed(
        self, append: Callable[[], AppendOutcome], min_insync_replicas: int
    ) -> AppendOutcome:
        if len(self.isr) < min_insync_replicas:
            return AppendOutcome(
                AppendError.NOT_ENOUGH_REPLICAS,
                f"the ISR {sorted(self.isr)} is smaller than min.insync.replicas "
                f"{min_insync_replicas}",
            )
        outcome = append()
        error = await self.wait_committed(outcome, min_insync_replicas)
        if error is not None:
            return AppendOutcome(error)
        return outcome

    async def wait_committed(
        self, outcome: AppendOutcome, min_insync_replicas: int = 1
    ) -> AppendError | None:
        """None once the high watermark covers an append (at once for a failed one) with
        at least `min_insync_replicas` in the ISR, else NOT_ENOUGH_REPLICAS_AFTER_APPEND;
        NOT_LEADER if the partition went away or is led elsewhere first. A duplicate
        (an idempotent retry) waits for its original's offsets."""
        if outcome.error is not None or outcome.last_offset < 0:
            return None
        last_offset = outcome.last_offset
        if self.high_watermark > last_offset:
            return None
        if not self.is_leader:
            return AppendError.NOT_LEADER
        waiter: asyncio.Future[AppendError | None] = asyncio.get_running_loop().create_future()
        entry = (last_offset, min_insync_replicas, waiter)
        self._hw_waiters.append(entry)
        try:
            return await waiter  # answered by the high watermark or a leadership loss
        finally:
            if waiter.cancelled():  # the request was cancelled, or timed out
                with contextlib.suppress(ValueError):
                    self._hw_waiters.remove(entry)

    def _append(
        self, data: bytearray, headers: list[batches.BatchHeader], now_ms: int
    ) -> AppendOutcome:
        return self._appended(
            lambda: self.log.append(data, headers, leader_epoch=self.leader_epoch, now_ms=now_ms)
        )

    def _appended(self, append: Callable[[], partition_log.AppendResult]) -> AppendOutcome:
        """Run a log append as leader and say what came of it."""
        try:
            result = append()
        except producer_state.OutOfOrderSequenceError as error:
            return AppendOutcome(AppendError.OUT_OF_ORDER_SEQUENCE, str(error))
        except producer_state.InvalidProducerEpochError as error:
            return AppendOutcome(AppendError.INVALID_PRODUCER_EPOCH, str(error))
        except producer_state.InvalidTxnStateError as error:
            return AppendOutcome(AppendError.INVALID_TXN_STATE, str(error))
        except OSError as error:
            self._on_storage_error(error)
            # A full disk or a failing one: the segment cut the partial write back off,
            # so the log is as it was; the producer may retry once space is back.
            return AppendOutcome(
                AppendError.STORAGE_ERROR,
                f"Disk error when trying to append to {self.topic}-{self.index}: "
                f"{error.strerror or error}",
            )
        if not result.duplicate:
            self._wake_replicas()
            self._maybe_advance_high_watermark()
        return AppendOutcome(
            base_offset=result.base_offset,
            log_append_time=result.log_append_time_ms,
            log_start_offset=result.log_start_offset,
            duplicate=result.duplicate,
            last_offset=result.last_offset,
            size=0 if result.duplicate else result.size,
            records=result.records,
        )

    # Following -------------------------------------------------------------------------

    def append_as_follower(self, data: bytes | memoryview, leader_high_watermark: int) -> None:
        """The leader's batches, as they are; the high watermark follows the leader's.
        Raises CorruptRecordError or OSError (nothing written then)."""
        if data:
            try:
                self.log.append_as_follower(data)
            except OSError as error:
                self._on_storage_error(error)
                raise
        self.log.update_high_watermark(min(leader_high_watermark, self.log.log_end_offset))

    @property
    def last_fetched_epoch(self) -> int:
        return self.log.leader_epoch_cache.latest_epoch

    def truncate_diverging(self, leader_epoch: int, leader_end_offset: int) -> None:
        """The leader says our log diverges after (its epoch, end offset): cut ours back
        where they agree (Kafka's truncation by leader epoch)."""
        ours = self.log
        if leader_end_offset < 0:
            target = ours.high_watermark  # the leader knows no epoch this old
        else:
            epoch, end = ours.leader_epoch_cache.end_offset_for(leader_epoch, ours.log_end_offset)
            if epoch < 0:
                target = leader_end_offset
            elif epoch != leader_epoch:
                target = end  # ours ends before their epoch: go on from there
            else:
                target = min(end, leader_end_offset)
        self.truncate_to(target)

    def restart_at(self, offset: int) -> None:
        """Our log ends below the leader's start: drop it and start empty at `offset`."""
        self.log.truncate_fully_and_start_at(offset)

    def truncate_to(self, offset: int) -> None:
        self._truncate(max(min(offset, self.log.log_end_offset), self.log.log_start_offset))

    def _truncate(self, target: int) -> None:
        if target < self.log.log_end_offset:
            log.info(
                "%s-%d: truncating from %d to %d (diverged from leader %d)",
                self.topic,
                self.index,
                self.log.log_end_offset,
                target,
                self.leader,
            )
            self.log.truncate_to(target)
            return
        # Nothing to cut from the log, but the epoch marks from the target on go all the
        # same (Kafka's UnifiedLog.truncateTo): a replica that led an epoch without
        # appending anything keeps that epoch's mark at its log end, and until it is gone
        # the follower's last fetched epoch is one the leader never had, every fetch
        # answered with the same divergence and the ISR never regained (found by the
        # transactional chaos run: a partition at ISR [2] for good, its markers refused).
        try:
            self.log.leader_epoch_cache.truncate_from_end(target)
        except OSError as error:
            self._on_storage_error(error)

    # Reading ---------------------------------------------------------------------------

    def epoch_error(self, current_leader_epoch: int) -> ReadError | None:
        """Kafka's fencing: a client that names an older epoch is behind (FENCED), a newer
        one is ahead of this replica (UNKNOWN); -1 names none."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return None
        if current_leader_epoch < self.leader_epoch:
            return ReadError.FENCED_LEADER_EPOCH
        return ReadError.UNKNOWN_LEADER_EPOCH

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
        current_leader_epoch: int = -1,
        follower: FollowerFetch | None = None,
        min_one_batch: bool = True,
    ) -> ReadOutcome:
        """Whole batches from `fetch_offset`; a consumer reads up to the high watermark, a
        follower to the log end (its fetch offset tells the leader where its log ends).
        KIP-74: with `min_one_batch` the first batch comes whatever its size."""
        if not self.is_leader:  # the leader epoch is judged first, as Kafka does
            return ReadOutcome(self.epoch_error(current_leader_epoch) or ReadError.NOT_LEADER)
        high_watermark = self.high_watermark
        last_stable = self.log.last_stable_offset
        log_start = self.log.log_start_offset
        error = self.epoch_error(current_leader_epoch)
        if error is not None:
            return ReadOutcome(error, high_watermark, last_stable, log_start)
        limit = high_watermark
        if follower is not None:
            limit = self.log.log_end_offset
            diverging = self._diverging(fetch_offset, follower.last_fetched_epoch)
            if diverging is not None:
                return ReadOutcome(
                    None, high_watermark, last_stable, log_start, diverging_epoch=diverging
                )
            if log_start <= fetch_offset <= limit:
                self.follower_fetched(follower.replica_id, fetch_offset)
                high_watermark = self.high_watermark
                last_stable = self.log.last_stable_offset
        committed_only = isolation is Isolation.READ_COMMITTED
        if committed_only:
            limit = min(limit, last_stable)
        aborted: tuple[tuple[int, int], ...] | None = () if committed_only else None
        if fetch_offset == limit:
            return ReadOutcome(
                None, high_watermark, last_stable, log_start, aborted_transactions=aborted
            )
        try:
            read = self.log.read(
                fetch_offset, max(max_bytes, 0), max_offset=limit, min_one_batch=min_one_batch
            )
        except partition_log.OffsetOutOfRangeError:
            return ReadOutcome(
                ReadError.OFFSET_OUT_OF_RANGE, high_watermark, last_stable, log_start
            )
        records = regions.RecordRegions(self.topic, read.ranges) if read.total_bytes else None
        if committed_only and records is not None:
            # Bounded by the LSO rather than the last offset read: extra entries past the
            # records are harmless to a consumer, and this needs no scan of the batches.
            aborted = tuple(
                (entry.producer_id, entry.first_offset)
                for entry in self.log.aborted_transactions(fetch_offset, limit)
            )
        return ReadOutcome(
            None, high_watermark, last_stable, log_start, records, aborted_transactions=aborted
        )

    def epoch_end_offset(self, requested_epoch: int) -> tuple[int, int]:
        """Where `requested_epoch` ends in our log, as Kafka's leader answers it (the
        largest known epoch <= it, and the start of the next; (-1, -1) if unknown). A
        leader's empty log has no epoch mark yet (its first append writes it) where Kafka
        marks the new epoch at the log end at once: answered as Kafka would, every epoch
        up to the current one ends at the log end."""
        log = self.log
        cache = log.leader_epoch_cache
        if (
            cache.latest_epoch == leader_epochs.UNDEFINED_EPOCH
            and self.is_leader
            and 0 <= requested_epoch <= self.leader_epoch
        ):
            return requested_epoch, log.log_end_offset
        return cache.end_offset_for(requested_epoch, log.log_end_offset)

    def _diverging(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """Kafka's check of a follower's fetch: where its last epoch ends in our log; the
        (epoch, end offset) to truncate to if its log runs past that. None when that is
        unknown, as Kafka: the read then answers OFFSET_OUT_OF_RANGE to a follower past
        our end (which truncates to our high watermark); a (-1, -1) divergence would be
        ignored by the follower, which would fetch past our end for good."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.epoch_end_offset(last_fetched_epoch)
        if epoch == leader_epochs.UNDEFINED_EPOCH or end == leader_epochs.UNDEFINED_EPOCH_OFFSET:
            return None
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def list_offset(
        self,
        timestamp: int,
        current_leader_epoch: int = -1,
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
    ) -> ListedOffset:
        """ListOffsets: earliest (-2, -4), latest (-1), max timestamp (-3), by time (>= 0);
        tiered-storage specs (-5, -6) answer -1 as Kafka does without tiered storage.
        Under read_committed the last stable offset stands for the high watermark."""
        if not self.is_leader:
            return ListedOffset(self.epoch_error(current_leader_epoch) or ReadError.NOT_LEADER)
        error = self.epoch_error(current_leader_epoch)
        if error is not None:
            return ListedOffset(error)
        if self.high_watermark < self._epoch_start_offset:
            # Kafka's rule: until the followers have told this new leader where their logs
            # end, its high watermark may be below what the last leader acknowledged.
            return ListedOffset(ReadError.OFFSET_NOT_AVAILABLE)
        log = self.log
        visible_end = (
            log.last_stable_offset if isolation is Isolation.READ_COMMITTED else self.high_watermark
        )
        found: tuple[int, int] | None  # (timestamp, offset)
        if timestamp == LATEST:
            found = (-1, visible_end)
        elif timestamp in (EARLIEST, EARLIEST_LOCAL):
            found = (-1, log.log_start_offset)
        elif timestamp == MAX_TIMESTAMP:
            found = log.max_timestamp_and_offset()
        elif timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
            found = None
        else:
            hit = log.offset_for_timestamp(timestamp)
            found = None if hit is None else (hit[1], hit[0])
        searched = timestamp >= 0 or timestamp == MAX_TIMESTAMP
        if searched and found is not None and found[1] >= visible_end:
            found = None  # not yet committed (or decided): invisible to consumers
        if found is None:
            return ListedOffset()
        return ListedOffset(None, found[0], found[1], self.leader_epoch)

    def delete_records(self, offset: int) -> tuple[ReadError | None, int]:
        """DeleteRecords: (error, the new log start offset); -1 deletes to the high
        watermark."""
        if not self.is_leader:
            return ReadError.NOT_LEADER, -1
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            return ReadError.OFFSET_OUT_OF_RANGE, -1
        try:
            return None, self.log.delete_records_before(offset)
        except partition_log.OffsetOutOfRangeError:
            return ReadError.OFFSET_OUT_OF_RANGE, -1

    # Fetch long polls ------------------------------------------------------------------

    def watch(self, waiter: asyncio.Future[None], *, follower: bool = False) -> None:
        """Wake `waiter` when the high watermark moves (a consumer), or when the log
        grows (a follower)."""
        (self._replica_waiters if follower else self._fetch_waiters).add(waiter)

    def unwatch(self, waiter: asyncio.Future[None]) -> None:
        self._fetch_waiters.discard(waiter)
        self._replica_waiters.discard(waiter)

    def _wake_fetchers(self) -> None:
        waiters, self._fetch_waiters = self._fetch_waiters, set()
        _wake(waiters)

    def _wake_replicas(self) -> None:
        waiters, self._replica_waiters = self._replica_waiters, set()
        _wake(waiters)

    def _fail_waiters(self, error: AppendError) -> None:
        waiters, self._hw_waiters = self._hw_waiters, []
        for _, _, waiter in waiters:
            if not waiter.done():
                waiter.set_result(error)

    def close_waiters(self) -> None:
        """The partition is going away (deleted, or no longer hosted here)."""
        self._fail_waiters(AppendError.NOT_LEADER)
        self._wake_fetchers()
        self._wake_replicas()


def _wake(waiters: Iterable[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)


def _alone(index: int, node_id: int) -> images.PartitionImage:
    """A partition this node alone replicates and leads (tests, a single node)."""
    return images.PartitionImage(index, (node_id,), (node_id,), node_id, 0, 0)


def wait_for_any(
    partitions: Iterable[Partition], *, follower: bool = False
) -> asyncio.Future[None]:
    """A future resolved by the next change to any of `partitions` that a consumer (the
    high watermark) or a follower (the log end) waits for.

    The caller must call `release` with the same partitions when done waiting.
    """
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for partition in partitions:
        partition.watch(waiter, follower=follower)
    return waiter


def release(partitions: Iterable[Partition], waiter: asyncio.Future[None]) -> None:
    for partition in partitions:
        partition.unwatch(waiter)
