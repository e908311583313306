"""A partition replica on this broker: the only door to its log.

Appends as leader (`append_as_leader`: validation, min.insync.replicas, acks, an
awaitable on the high watermark), reads (`read`: bounded by the high watermark for
consumers, leader epochs fenced), offsets by time (`list_offset`) and DeleteRecords all
go through here, so the rules replication adds (ISR, followers, truncation) live in one
place. Results carry typed errors that the request handlers map to Kafka's codes.

With no followers yet the in-sync replica set is the leader alone, so the high
watermark moves to the log end offset on every append.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from strom.cluster import image as images
from strom.protocol import regions
from strom.records import batches
from strom.storage import log_config, partition_log, producer_state, validator


class AppendError(enum.Enum):
    NOT_LEADER = "not_leader"
    NOT_ENOUGH_REPLICAS = "not_enough_replicas"
    MESSAGE_TOO_LARGE = "message_too_large"
    INVALID_RECORD = "invalid_record"
    CORRUPT_MESSAGE = "corrupt_message"
    TRANSACTIONS_UNSUPPORTED = "transactions_unsupported"
    OUT_OF_ORDER_SEQUENCE = "out_of_order_sequence"
    INVALID_PRODUCER_EPOCH = "invalid_producer_epoch"
    STORAGE_ERROR = "storage_error"


_VALIDATION_ERRORS = {
    validator.Reason.CORRUPT: AppendError.CORRUPT_MESSAGE,
    validator.Reason.TOO_LARGE: AppendError.MESSAGE_TOO_LARGE,
    validator.Reason.INVALID_RECORD: AppendError.INVALID_RECORD,
    validator.Reason.TRANSACTIONS_UNSUPPORTED: AppendError.TRANSACTIONS_UNSUPPORTED,
}


class ReadError(enum.Enum):
    NOT_LEADER = "not_leader"
    FENCED_LEADER_EPOCH = "fenced_leader_epoch"
    UNKNOWN_LEADER_EPOCH = "unknown_leader_epoch"
    OFFSET_OUT_OF_RANGE = "offset_out_of_range"


class Isolation(enum.IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


# ListOffsets' special timestamps.
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    error: AppendError | None = None
    message: str | None = None
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    duplicate: bool = False
    last_offset: int = -1
    size: int = 0  # bytes appended
    records: int = 0  # records appended


@dataclass(frozen=True, slots=True)
class ReadOutcome:
    error: ReadError | None = None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: regions.RecordRegions | None = None

    @property
    def size(self) -> int:
        return 0 if self.records is None else self.records.size


@dataclass(frozen=True, slots=True)
class ListedOffset:
    error: ReadError | None = None
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        log: partition_log.PartitionLog,
        node_id: int,
        state: images.PartitionImage | None = None,
        on_storage_error: Callable[[OSError], None] = lambda error: None,
    ) -> None:
        self.topic = topic
        self._on_storage_error = on_storage_error
        self.index = index
        self.log = log
        self.node_id = node_id
        self.leader_epoch = 0
        self.leader = node_id
        self.replicas: tuple[int, ...] = (node_id,)
        self.isr: tuple[int, ...] = (node_id,)
        self._fetch_waiters: set[asyncio.Future[None]] = set()
        # (offset the high watermark must pass, future) of acks=all producers
        self._hw_waiters: list[tuple[int, asyncio.Future[None]]] = []
        if state is not None:
            self.become(state)
        log.update_high_watermark(log.log_end_offset)

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, epoch {self.leader_epoch})"

    # State from metadata ---------------------------------------------------------------

    def become(self, state: images.PartitionImage) -> None:
        """Take the replicas, ISR, leader and epoch the metadata now says."""
        self.leader_epoch = state.leader_epoch
        self.leader = state.leader
        self.replicas = state.replicas
        self.isr = state.isr

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

    def _advance_high_watermark(self) -> None:
        """The ISR is the leader alone: everything appended is committed."""
        self.log.update_high_watermark(self.log.log_end_offset)
        high_watermark = self.log.high_watermark
        if self._hw_waiters:
            still: list[tuple[int, asyncio.Future[None]]] = []
            for offset, waiter in self._hw_waiters:
                if high_watermark > offset:
                    if not waiter.done():
                        waiter.set_result(None)
                else:
                    still.append((offset, waiter))
            self._hw_waiters = still
        self._wake_fetchers()

    async def _committed(self, last_offset: int) -> bool:
        """True once the high watermark is past `last_offset`; False if the partition
        went away (deleted, or no longer led here) first."""
        if self.high_watermark > last_offset:
            return True
        waiter = asyncio.get_running_loop().create_future()
        self._hw_waiters.append((last_offset, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the request itself was cancelled
            return False
        return True

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
    ) -> AppendOutcome:
        """Validate and append a client's record set. With acks=-1 the producer is answered
        once `committed(outcome)` completes (the high watermark covers the batch)."""
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
        return self._append(data, headers, now_ms)

    async def append_records(
        self, data: bytearray, headers: list[batches.BatchHeader], now_ms: int
    ) -> AppendOutcome:
        """Append a batch the broker built itself (coordinator records), as leader, and
        return once it is committed."""
        if not self.is_leader:
            return AppendOutcome(AppendError.NOT_LEADER)
        outcome = self._append(data, headers, now_ms)
        if not await self.committed(outcome):
            return AppendOutcome(AppendError.NOT_LEADER)
        return outcome

    async def committed(self, outcome: AppendOutcome) -> bool:
        """True once the high watermark covers an append (at once for a failed or
        duplicate one); False if the partition went away first (deleted, or no longer
        led here)."""
        if outcome.error is not None or outcome.duplicate or outcome.last_offset < 0:
            return True
        return await self._committed(outcome.last_offset)

    def _append(
        self, data: bytearray, headers: list[batches.BatchHeader], now_ms: int
    ) -> AppendOutcome:
        try:
            result = self.log.append(data, headers, leader_epoch=self.leader_epoch, now_ms=now_ms)
        except producer_state.OutOfOrderSequenceError as error:
            return AppendOutcome(AppendError.OUT_OF_ORDER_SEQUENCE, str(error))
        except producer_state.InvalidProducerEpochError as error:
            return AppendOutcome(AppendError.INVALID_PRODUCER_EPOCH, str(error))
        except OSError as error:
            self._on_storage_error(error)
            # A full disk or a failing one: the segment cut the partial write back off,
            # so the log is as it was; the producer may retry once space is back.
            return AppendOutcome(
                AppendError.STORAGE_ERROR,
                f"Disk error when trying to append to {self.topic}-{self.index}: "
                f"{error.strerror or error}",
            )
        records = sum(h.records_count for h in headers)
        if not result.duplicate:
            self._advance_high_watermark()
        return AppendOutcome(
            base_offset=result.base_offset,
            log_append_time=result.log_append_time_ms,
            log_start_offset=result.log_start_offset,
            duplicate=result.duplicate,
            last_offset=result.last_offset,
            size=0 if result.duplicate else len(data),
            records=records,
        )

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
        replica_id: int = -1,
        min_one_batch: bool = True,
    ) -> ReadOutcome:
        """Whole batches from `fetch_offset`; a consumer (replica_id < 0) reads up to the
        high watermark. KIP-74: with `min_one_batch` the first batch comes whatever its
        size."""
        if not self.is_leader:
            return ReadOutcome(ReadError.NOT_LEADER)
        high_watermark = self.high_watermark
        # No transactions yet: the last stable offset is the high watermark.
        last_stable = high_watermark
        log_start = self.log.log_start_offset
        error = self.epoch_error(current_leader_epoch)
        if error is not None:
            return ReadOutcome(error, high_watermark, last_stable, log_start)
        limit = high_watermark if replica_id < 0 else self.log.log_end_offset
        if isolation is Isolation.READ_COMMITTED:
            limit = min(limit, last_stable)
        if fetch_offset == limit:
            return ReadOutcome(None, high_watermark, last_stable, log_start)
        try:
            read = self.log.read(
                fetch_offset, max(max_bytes, 0), max_offset=limit, min_one_batch=min_one_batch
            )
        except partition_log.OffsetOutOfRangeError:
            return ReadOutcome(
                ReadError.OFFSET_OUT_OF_RANGE, high_watermark, last_stable, log_start
            )
        records = regions.RecordRegions(self.topic, read.ranges) if read.total_bytes else None
        return ReadOutcome(None, high_watermark, last_stable, log_start, records)

    def list_offset(self, timestamp: int, current_leader_epoch: int = -1) -> ListedOffset:
        """ListOffsets: earliest (-2, -4), latest (-1), max timestamp (-3), by time (>= 0);
        tiered-storage specs (-5, -6) answer -1 as Kafka does without tiered storage."""
        if not self.is_leader:
            return ListedOffset(ReadError.NOT_LEADER)
        error = self.epoch_error(current_leader_epoch)
        if error is not None:
            return ListedOffset(error)
        log = self.log
        found: tuple[int, int] | None  # (timestamp, offset)
        if timestamp == LATEST:
            found = (-1, self.high_watermark)
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
        if searched and found is not None and found[1] >= self.high_watermark:
            found = None  # not yet committed: invisible to consumers
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

    def watch(self, waiter: asyncio.Future[None]) -> None:
        self._fetch_waiters.add(waiter)

    def unwatch(self, waiter: asyncio.Future[None]) -> None:
        self._fetch_waiters.discard(waiter)

    def _wake_fetchers(self) -> None:
        waiters, self._fetch_waiters = self._fetch_waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def close_waiters(self) -> None:
        """The partition is going away (deleted, or no longer hosted here)."""
        for _, waiter in self._hw_waiters:
            if not waiter.done():
                waiter.cancel()
        self._hw_waiters.clear()
        self._wake_fetchers()


def wait_for_any(partitions: Iterable[Partition]) -> asyncio.Future[None]:
    """A future resolved by the next append to any of `partitions`.

    The caller must call `release` with the same partitions when done waiting.
    """
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for partition in partitions:
        partition.watch(waiter)
    return waiter


def release(partitions: Iterable[Partition], waiter: asyncio.Future[None]) -> None:
    for partition in partitions:
        partition.unwatch(waiter)
