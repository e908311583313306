"""The log of one partition: segments, offsets, reads, retention, truncation.

Modelled on Kafka's UnifiedLog; opening and recovery are ``log_loader`` (Kafka's
LogLoader), finding records by time ``time_lookup``. Single-threaded: called from the event
loop, with synchronous writes that go to the page cache; fsync happens only on flush (by
flush.messages, flush.ms, rolled segments in maintenance, and close).

Files in the partition directory, besides the segments:

- ``log-start-offset``, ``recovery-point``, ``high-watermark``: one offset each, replaced
  atomically. The recovery point is the offset below which everything was fsynced.
- ``leader-epoch-checkpoint``: see ``leader_epochs``.
- ``<offset>.snapshot``: producer state, see ``producer_state``.
- ``clean-shutdown``: written by close(); when present on open, no batch needs checking.

A log opened by a ``LogManager`` (``dir_offsets`` given) keeps the first three and the clean
shutdown mark in its log directory's checkpoint files instead, as Kafka does: the manager
reads them once at startup, collects every log's offsets and writes one file per log
directory (see ``log_manager``). Such a log reads its own per-partition files only when the
directory's files do not know it yet (data made before; they are removed once migrated).
A clean log opens lazily: only the active segment's index is read; older segments read
theirs on first use.

Read bound: a fetch is served the batches whose last offset is below ``max_offset`` (the
high watermark), as Kafka does, so a batch straddling the bound waits until all of it is
committed. Replication only ever moves the high watermark to batch boundaries.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from strom.records import batches, control
from strom.storage import (
    checkpoints,
    cleaner,
    file_handles,
    leader_epochs,
    log_loader,
    log_transactions,
    producer_state,
    retention,
    segment,
    time_lookup,
    txn_index,
)
from strom.storage.log_config import LogConfig

logger = logging.getLogger(__name__)

CompletedTxn = producer_state.CompletedTxn
VerificationGuard = producer_state.VerificationGuard

LOG_START_OFFSET_FILE = log_loader.LOG_START_OFFSET_FILE
RECOVERY_POINT_FILE = log_loader.RECOVERY_POINT_FILE
HIGH_WATERMARK_FILE = log_loader.HIGH_WATERMARK_FILE
CLEAN_SHUTDOWN_FILE = log_loader.CLEAN_SHUTDOWN_FILE
# A directory being deleted: ``<topic>-<partition>.<uuid>-delete``; removed at startup.
DELETE_DIR_SUFFIX = "-delete"

_INT32_MAX = 2**31 - 1


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class OffsetOutOfRangeError(Exception):
    """A read or DeleteRecords offset outside what the log holds (Kafka OFFSET_OUT_OF_RANGE)."""


class LogClosedError(Exception):
    """An operation on a partition log that was closed or deleted."""


@dataclasses.dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool  # a retry of a batch already written: offsets are the original ones
    size: int = 0  # bytes written
    records: int = 0  # records in the batches (written or, for a retry, already there)


@dataclasses.dataclass(frozen=True, slots=True)
class FileRange:
    """Bytes of one segment file to send.

    A range holds no descriptor: ``file`` is the segment file's handle from the handle
    cache, reopened by path if it was evicted (the path follows a rename to ``.deleted``).
    So a fetch response with ranges of 3,000 partitions does not need 3,000 descriptors
    until it is sent. Whoever takes ``file`` and keeps the object (``loop.sendfile`` holds
    it as an argument until done) keeps that descriptor valid even if the cache evicts it
    meanwhile: eviction only drops the cache's reference. Take it right before use.
    """

    source: file_handles.CachedFile
    position: int
    length: int

    @property
    def file(self) -> BinaryIO:
        return self.source.get()


@dataclasses.dataclass(frozen=True, slots=True)
class ReadResult:
    ranges: list[FileRange]
    total_bytes: int

    def read_into_bytes(self) -> bytes:
        """The ranges' bytes, for when sendfile cannot be used."""
        chunks = []
        for file_range in self.ranges:
            file = file_range.file  # held while reading: eviction cannot close it
            fd = file.fileno()
            position = file_range.position
            remaining = file_range.length
            while remaining > 0:
                chunk = os.pread(fd, remaining, position)
                if not chunk:
                    break
                chunks.append(chunk)
                position += len(chunk)
                remaining -= len(chunk)
        return b"".join(chunks)


DirOffsets = log_loader.DirOffsets
LEGACY_CHECKPOINT_FILES = log_loader.LEGACY_CHECKPOINT_FILES


class PartitionLog:
    """Use ``PartitionLog.open``."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        now_ms: Callable[[], int],
        segments: list[segment.LogSegment],
        log_start_offset: int,
        recovery_point: int,
    ) -> None:
        self.directory = directory
        self.config = config
        self._now_ms = now_ms
        self._segments = segments
        last = segments[-1]
        assert last.next_offset is not None, "the last segment is scanned on open"
        self._log_end_offset = last.next_offset
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._high_watermark = log_start_offset
        self._leader_epochs = leader_epochs.LeaderEpochCache(
            directory / leader_epochs.FILE_NAME, []
        )
        self._producers = producer_state.ProducerStateManager(directory)
        # Segments renamed to *.deleted, unlinked once their deadline passes.
        self._pending_deletes: list[tuple[int, segment.LogSegment]] = []
        self._unflushed_records = 0
        self._last_flush_ms = now_ms()
        self._closed = False
        self._handles: file_handles.HandleCache | None = None
        # Managed by a LogManager: offsets go to the log dir's checkpoint files, not ours.
        self._managed = False
        self._changed: Callable[[bool], None] | None = None
        self._legacy_files: list[str] = []
        self._snapshot_covers = -1  # the offset the newest producer snapshot covers

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        now_ms: Callable[[], int] = wall_clock_ms,
        *,
        handles: file_handles.HandleCache | None = None,
        dir_offsets: DirOffsets | None = None,
    ) -> PartitionLog:
        """Load (or create) the log in ``directory``, recovering after an unclean shutdown.

        ``handles``: the cache its files are opened through (default: the process-wide one).
        ``dir_offsets``: given by a LogManager, see the module docstring.
        """
        loaded = log_loader.load(directory, config, now_ms(), handles, dir_offsets)
        names = loaded.names
        log_start_offset = loaded.log_start_offset
        recovery_point = loaded.recovery_point
        log = cls(directory, config, now_ms, loaded.segments, log_start_offset, recovery_point)
        log._handles = handles
        if dir_offsets is None:
            checkpoints.write_offset(directory / RECOVERY_POINT_FILE, recovery_point)
            if loaded.checkpointed_start != log_start_offset:
                checkpoints.write_offset(directory / LOG_START_OFFSET_FILE, log_start_offset)
        else:
            log._managed = True
            log._changed = dir_offsets.changed
            log._legacy_files = [name for name in LEGACY_CHECKPOINT_FILES if name in names]
        log._load_leader_epochs()
        log._rebuild_producer_state(names, loaded.rebuild_txn_indexes_from)
        log.update_high_watermark(loaded.high_watermark)
        # From here on a crash must lead to recovery. (A managed log's clean mark is the log
        # directory's, which the LogManager removes once every log is open.)
        if loaded.legacy_clean:
            (directory / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        return log

    @property
    def legacy_checkpoint_files(self) -> list[str]:
        """Per-partition checkpoint files found on open that the log directory's files
        replace (a LogManager removes them once it has written those)."""
        return list(self._legacy_files)

    def remove_legacy_checkpoint_files(self) -> None:
        for name in self._legacy_files:
            (self.directory / name).unlink(missing_ok=True)
        self._legacy_files = []

    def _offsets_changed(self, urgent: bool) -> None:
        if self._changed is not None:
            self._changed(urgent)

    def _load_leader_epochs(self) -> None:
        path = self.directory / leader_epochs.FILE_NAME
        cache = leader_epochs.LeaderEpochCache.load(path)
        if cache is None:
            logger.warning("%s is unreadable; rebuilding it from the log", path)
            cache = leader_epochs.LeaderEpochCache.rebuild(
                path,
                (
                    (header.partition_leader_epoch, header.base_offset)
                    for header in self._iter_headers_from(self._segments[0].base_offset)
                ),
            )
        cache.truncate_from_end(self._log_end_offset)
        cache.truncate_from_start(self._log_start_offset)
        self._leader_epochs = cache

    def _rebuild_producer_state(
        self, names: set[str] | None = None, rebuild_txn_indexes_from: int | None = None
    ) -> None:
        self._snapshot_covers = log_transactions.rebuild_producer_state(
            self._producers, self._segments, self._log_end_offset, rebuild_txn_indexes_from, names
        )
        self._producers.on_high_watermark_updated(self._high_watermark)

    # -- properties ------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> tuple[segment.LogSegment, ...]:
        """The segments, oldest first; the last one is active."""
        return tuple(self._segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        return [s.base_offset for s in self._segments]

    @property
    def leader_epoch_cache(self) -> leader_epochs.LeaderEpochCache:
        return self._leader_epochs

    @property
    def producer_state(self) -> producer_state.ProducerStateManager:
        return self._producers

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start, log end] as Kafka does.

        A single node sets it to the log end offset after each append (and after open).
        """
        self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)
        self._producers.on_high_watermark_updated(self._high_watermark)
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The offset below which every transaction is decided and replicated: where
        read_committed consumers stop (Kafka's LSO; the high watermark with no open or
        unreplicated transaction, never below the log start)."""
        first_unstable = self._producers.first_unstable_offset()
        if first_unstable is None:
            return self._high_watermark
        return min(max(first_unstable, self._log_start_offset), self._high_watermark)

    def aborted_transactions(
        self, fetch_offset: int, upper_bound: int
    ) -> list[txn_index.AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound), for a
        read_committed fetch."""
        return log_transactions.aborted_transactions(self._segments, fetch_offset, upper_bound)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for each in self._segments:
            each.config = config

    # -- appending -------------------------------------------------------------------------

    def append(
        self,
        batch_bytes: bytearray | memoryview,
        headers: Sequence[batches.BatchHeader],
        leader_epoch: int,
        now_ms: int,
        verification: VerificationGuard | None = None,
        *,
        verify: bool = False,
    ) -> AppendResult:
        """Append validated batches (from ``batches.validate_produce_batches``) as a leader.

        Offsets and the leader epoch are patched into ``batch_bytes`` in place (it must be
        writable), then the bytes are written verbatim. A retried idempotent batch writes
        nothing and returns its original offsets. With ``verify`` (a client's produce), a
        transactional batch opening a transaction needs ``verification``, the producer's
        current guard (KIP-890).
        """
        self._check_open()
        if not headers:
            raise ValueError("append needs at least one batch")
        view = memoryview(batch_bytes)
        if headers[0].position != 0 or headers[-1].position + headers[-1].size != len(view):
            raise ValueError("headers must describe the whole buffer")
        duplicate = self._producers.check_append(headers, verification, verify=verify)
        if duplicate is not None:
            return AppendResult(
                duplicate.first_offset,
                duplicate.last_offset,
                batches.NO_TIMESTAMP,
                self._log_start_offset,
                duplicate=True,
                records=sum(header.records_count for header in headers),
            )

        return self._write(view, headers, leader_epoch, now_ms)

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: control.EndTxnMarker,
        leader_epoch: int,
        now_ms: int,
    ) -> AppendResult:
        """Write a commit or abort marker for a producer as leader (WriteTxnMarkers).

        Raises ``InvalidProducerEpochError`` or ``CoordinatorFencedError`` for a marker
        from an older producer epoch or coordinator; a marker for a producer with no open
        transaction is written and changes nothing else (a retry is harmless)."""
        self._check_open()
        self._producers.check_marker(producer_id, producer_epoch, marker.coordinator_epoch)
        data = bytearray(
            control.build_end_txn_marker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                commit=marker.commit,
                coordinator_epoch=marker.coordinator_epoch,
                timestamp_ms=now_ms,
            )
        )
        view = memoryview(data)
        headers = [batches.BatchHeader.parse(view)]
        return self._write(view, headers, leader_epoch, now_ms)

    def _write(
        self,
        view: memoryview,
        headers: Sequence[batches.BatchHeader],
        leader_epoch: int,
        now_ms: int,
    ) -> AppendResult:
        """Assign offsets, write, and update the producer state."""
        log_append_time = now_ms if self.config.uses_log_append_time else batches.NO_TIMESTAMP
        offset_span = sum(header.last_offset_delta + 1 for header in headers)
        if log_append_time >= 0:
            append_max_timestamp = log_append_time
        else:
            append_max_timestamp = max(header.max_timestamp for header in headers)
        self._maybe_roll(
            len(view), append_max_timestamp, self._log_end_offset + offset_span - 1, now_ms
        )

        appended = []
        next_offset = self._log_end_offset
        for header in headers:
            batches.patch_base_offset(view, header.position, next_offset)
            batches.patch_partition_leader_epoch(view, header.position, leader_epoch)
            max_timestamp = header.max_timestamp
            if log_append_time >= 0:
                batches.patch_log_append_time(view, header, log_append_time)
                max_timestamp = log_append_time
            last_offset = next_offset + header.last_offset_delta
            appended.append(
                segment.AppendedBatch(
                    header.position, header.size, next_offset, last_offset, max_timestamp
                )
            )
            next_offset = last_offset + 1
        self._segments[-1].append(view, appended, now_ms)
        first_offset = appended[0].base_offset
        self._log_end_offset = next_offset

        if leader_epoch >= 0:
            self._leader_epochs.assign(leader_epoch, first_offset)
        for header, batch in zip(headers, appended, strict=True):
            # Control batches other than markers (Raft's) change no producer.
            marker = log_transactions.marker_in(view, header)
            if marker is not None:
                completed = self._producers.record_marker(
                    header.producer_id,
                    header.producer_epoch,
                    marker,
                    batch.base_offset,
                    batch.max_timestamp,
                )
                if completed is not None:
                    last_stable = self._producers.last_stable_offset_for(completed)
                    self._producers.complete_txn(completed)
                    self._index_aborted(completed, last_stable)
            elif not header.is_control:
                self._producers.record_data(
                    header, batch.base_offset, batch.last_offset, batch.max_timestamp
                )
        self._unflushed_records += sum(header.records_count for header in headers)
        if self._unflushed_records >= self.config.flush_messages:
            self.flush()
        return AppendResult(
            first_offset,
            next_offset - 1,
            log_append_time,
            self._log_start_offset,
            duplicate=False,
            size=len(view),
            records=sum(header.records_count for header in headers),
        )

    def _index_aborted(self, completed: CompletedTxn, last_stable: int) -> None:
        """A marker just written ended a transaction: an aborted one goes into the active
        segment's index (the segment of its marker) with the LSO it left, as Kafka's
        UnifiedLog.append does."""
        if completed.is_aborted:
            self._segments[-1].txn_index.append(
                txn_index.AbortedTxn(
                    completed.producer_id,
                    completed.first_offset,
                    completed.last_offset,
                    last_stable,
                )
            )

    def append_as_follower(self, batch_bytes: bytes | bytearray | memoryview) -> int:
        """Append batches copied from the leader as they are: offsets, epochs and
        timestamps are the leader's. Each batch's leader epoch goes to the epoch cache and
        its producer to the producer state (so a follower that becomes leader knows every
        idempotent producer's last sequences). Returns the new log end offset.

        Raises CorruptRecordError for a batch that fails its CRC or does not continue the
        log (a leader's bug or a damaged transfer): nothing of the call is written then.
        """
        self._check_open()
        view = memoryview(batch_bytes)
        headers = list(batches.iter_batches(view))
        # Batches wholly below our end are ones we have (a repeated fetch): skipped. One
        # straddling it means our end is inside a leader's batch (after a truncation by
        # epoch): ours is cut back to that batch's start and the batch taken whole.
        while headers and headers[0].last_offset < self._log_end_offset:
            headers.pop(0)
        if not headers:
            return self._log_end_offset
        if headers[0].position:
            view = view[headers[0].position :]
            headers = list(batches.iter_batches(view))
        expected = self._log_end_offset
        if headers[0].base_offset < expected:
            expected = headers[0].base_offset
        for header in headers:
            if header.base_offset < expected or header.last_offset < header.base_offset:
                raise batches.CorruptRecordError(
                    f"batch at offset {header.base_offset} does not follow offset "
                    f"{expected - 1} in {self.directory.name}"
                )
            if not batches.has_valid_crc(view, header):
                raise batches.CorruptRecordError(
                    f"batch at offset {header.base_offset} fails its CRC in {self.directory.name}"
                )
            expected = header.last_offset + 1
        if headers[0].base_offset < self._log_end_offset:
            self.truncate_to(headers[0].base_offset)
        now_ms = self._now_ms()
        self._maybe_roll(
            len(view), max(h.max_timestamp for h in headers), headers[-1].last_offset, now_ms
        )
        appended = [
            segment.AppendedBatch(
                header.position,
                header.size,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
            for header in headers
        ]
        self._segments[-1].append(view, appended, now_ms)
        self._log_end_offset = headers[-1].last_offset + 1
        for header in headers:
            if header.partition_leader_epoch >= 0:
                self._leader_epochs.assign(header.partition_leader_epoch, header.base_offset)
            done = self._producers.replay_batch(header, log_transactions.marker_in(view, header))
            if done is not None:
                self._index_aborted(*done)
        self._unflushed_records += sum(header.records_count for header in headers)
        if self._unflushed_records >= self.config.flush_messages:
            self.flush()
        return self._log_end_offset

    def _maybe_roll(
        self, append_bytes: int, append_max_timestamp: int, append_last_offset: int, now_ms: int
    ) -> None:
        """Kafka's shouldRoll, checked before an append."""
        active = self._segments[-1]
        if active.size == 0:
            return
        if active.rolling_timestamp >= 0:
            waited = append_max_timestamp - active.rolling_timestamp
        else:
            waited = now_ms - active.created_ms
        if (
            active.size + append_bytes > self.config.segment_bytes
            or waited > self.config.segment_ms
            or active.is_index_full()
            or append_last_offset - active.base_offset > _INT32_MAX
        ):
            self.roll()

    def roll(self) -> None:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        self._check_open()
        active = self._segments[-1]
        if active.size == 0:
            return
        active.close_writers()
        self._segments.append(
            segment.LogSegment.create(
                self.directory, self._log_end_offset, self.config, self._now_ms(), self._handles
            )
        )
        self._producers.write_snapshot(self._log_end_offset)
        self._snapshot_covers = self._log_end_offset

    def roll_if_expired(self, now_ms: int) -> bool:
        """Roll an active segment older than segment.ms even without appends, so a quiet
        partition's data becomes eligible for retention."""
        active = self._segments[-1]
        if active.size > 0 and now_ms - active.created_ms > self.config.segment_ms:
            self.roll()
            return True
        return False

    # -- reading ---------------------------------------------------------------------------

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int, *, min_one_batch: bool = True
    ) -> ReadResult:
        """Whole batches from the one containing ``start_offset``, for a fetch.

        Stops before ``max_bytes`` would be exceeded, except that with ``min_one_batch`` the
        first batch is returned whatever its size (KIP-74), and before the first batch whose
        last offset is >= ``max_offset`` (exclusive bound, the high watermark). Raises
        ``OffsetOutOfRangeError`` outside [log start offset, log end offset].
        """
        self._check_open()
        if start_offset < self._log_start_offset or start_offset > self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside the log range "
                f"[{self._log_start_offset}, {self._log_end_offset}] of {self.directory.name}"
            )
        ranges: list[FileRange] = []
        total = 0
        if start_offset >= max_offset or start_offset == self._log_end_offset:
            return ReadResult(ranges, total)
        for each in self._segments[self._segment_index(start_offset) :]:
            position, length, stopped = each.read_slice(
                start_offset, max_offset, max_bytes - total, min_one_batch and total == 0
            )
            if length > 0:
                ranges.append(FileRange(each.log_file, position, length))
                total += length
            if stopped:
                break
        return ReadResult(ranges, total)

    def committed_chunks(
        self, chunk_bytes: int = 8 * 1024 * 1024, *, to_log_end: bool = False
    ) -> Iterator[bytes]:
        """Every whole batch from the log start up to the high watermark (or the log end),
        as buffers of about `chunk_bytes` (a batch larger than that comes alone): for
        replaying a log into memory, such as coordinator state or the cluster metadata."""
        offset = self._log_start_offset
        end = self._log_end_offset if to_log_end else self._high_watermark
        while offset < end:
            read = self.read(offset, chunk_bytes, max_offset=end)
            if read.total_bytes == 0:
                break
            data = read.read_into_bytes()
            for header in batches.iter_batches(data):
                offset = header.last_offset + 1
            yield data

    def _segment_index(self, offset: int) -> int:
        """Index of the segment that would hold ``offset``."""
        return max(0, bisect_right(self._segments, offset, key=_base_offset_of) - 1)

    def _iter_headers_from(self, offset: int) -> Iterator[batches.BatchHeader]:
        """Stored batch headers whose last offset is >= ``offset``, across segments."""
        for each in self._segments[self._segment_index(offset) :]:
            for _, header in each.iter_headers(each.offset_index.lookup(offset)):
                if header.last_offset >= offset:
                    yield header

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start whose timestamp
        is >= ``timestamp_ms`` (ListOffsets by timestamp); see ``time_lookup``."""
        return time_lookup.offset_for_timestamp(
            self._segments, self._log_start_offset, timestamp_ms
        )

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp (ListOffsets -3)."""
        return time_lookup.max_timestamp_and_offset(self._segments)

    # -- compaction ------------------------------------------------------------------------

    def plan_cleaning(self, now_ms: int) -> cleaner.CleaningPlan | None:
        """The compaction pass due on this log now, if any (see ``cleaner.plan``)."""
        if self._closed or not self.config.compacts:
            return None
        first_dirty = min(
            max(cleaner.read_checkpoint(self.directory), self._log_start_offset),
            self._log_end_offset,
        )
        return cleaner.plan(
            self.directory,
            self._segments,
            self.config,
            self._high_watermark,
            first_dirty,
            now_ms,
            cleaner.read_tombstones_due(self.directory),
            {
                producer_id: entry.batches[-1].last_offset
                for producer_id, entry in self._producers.producers.items()
                if entry.batches
            },
        )

    def replace_segments(
        self, cleaned: cleaner.CleanedGroup, fault: Callable[[str], None] | None = None
    ) -> bool:
        """Swap a cleaned file in for the segments it was made from; False (and the file
        removed) if those segments are no longer the log's, e.g. retention deleted them.

        ``fault(step)`` is called between the steps, for tests that crash there.
        """
        replaced = cleaned.replaced
        start = next((i for i, s in enumerate(self._segments) if s is replaced[0]), None)
        if (
            self._closed
            or start is None
            or start + len(replaced) >= len(self._segments)  # never the active segment
            or any(a is not b for a, b in zip(self._segments[start:], replaced, strict=False))
        ):
            cleaned.path.unlink(missing_ok=True)
            return False
        base = replaced[0].base_offset
        swap = cleaned.path.with_name(
            segment.file_name(base, segment.LOG_SUFFIX) + cleaner.SWAP_SUFFIX
        )
        cleaned.path.rename(swap)
        checkpoints.fsync_path(self.directory)  # the commit point
        if fault is not None:
            fault("swap-renamed")
        now = self._now_ms()
        # The cleaner keeps every marker, so the replaced segments' aborted transactions
        # all stay indexed, now in the one segment.
        aborted = [entry for old in replaced for entry in old.txn_index.entries]
        for old in replaced:
            old.mark_deleted()
            if fault is not None:
                fault("old-segment-retired")
        swap.rename(self.directory / segment.file_name(base, segment.LOG_SUFFIX))
        checkpoints.fsync_path(self.directory)
        if fault is not None:
            fault("swap-installed")
        fresh, _ = segment.LogSegment.open(self.directory, base, self.config, now, self._handles)
        fresh.recover()  # builds its indexes and checks every batch
        fresh.txn_index.replace(aborted)
        fresh.close_writers()
        fresh.flush()
        self._segments[start : start + len(replaced)] = [fresh]
        deadline = now + self.config.file_delete_delay_ms
        self._pending_deletes.extend((deadline, old) for old in replaced)
        return True

    # -- deleting old data -----------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` the log start offset (if it is higher) and delete the
        segments entirely below it. Returns the new log start offset (the low watermark)."""
        self._check_open()
        if offset < 0 or offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: the high watermark is "
                f"{self._high_watermark}"
            )
        if offset > self._log_start_offset:
            self._set_log_start_offset(offset)
        below = retention.below(self._log_start_offset)
        self._delete_segments(self._deletable(below), self._now_ms())
        return self._log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete segments past retention.ms / retention.bytes (when cleanup.policy includes
        delete) and those below the log start offset. Returns how many were deleted."""
        self._check_open()
        deleted = 0
        config = self.config
        if config.deletes_old_segments and config.retention_ms >= 0:
            rule = retention.older_than(now_ms, config.retention_ms)
            deleted += self._delete_segments(self._deletable(rule), now_ms)
        size = self.size_bytes
        if config.deletes_old_segments and 0 <= config.retention_bytes <= size:
            rule = retention.beyond_size(size, config.retention_bytes)
            deleted += self._delete_segments(self._deletable(rule), now_ms)
        below = retention.below(self._log_start_offset)
        deleted += self._delete_segments(self._deletable(below), now_ms)
        return deleted

    def _deletable(self, rule: retention.Rule) -> list[segment.LogSegment]:
        return retention.deletable(self._segments, self._high_watermark, self._log_end_offset, rule)

    def _delete_segments(self, doomed: list[segment.LogSegment], now_ms: int) -> int:
        if not doomed:
            return 0
        if len(doomed) == len(self._segments):
            self.roll()  # a log always keeps an active segment
        del self._segments[: len(doomed)]
        self._schedule_deletion(doomed, now_ms)
        if self._segments[0].base_offset > self._log_start_offset:
            self._set_log_start_offset(self._segments[0].base_offset)
        return len(doomed)

    def _schedule_deletion(self, doomed: list[segment.LogSegment], now_ms: int) -> None:
        deadline = now_ms + self.config.file_delete_delay_ms
        for each in doomed:
            each.mark_deleted()
            self._pending_deletes.append((deadline, each))

    def _set_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        self._high_watermark = max(self._high_watermark, offset)
        if self._managed:
            self._offsets_changed(False)
        else:
            checkpoints.write_offset(self.directory / LOG_START_OFFSET_FILE, offset)
        self._leader_epochs.truncate_from_start(offset)

    def delete_expired_files(self, now_ms: int) -> int:
        """Unlink ``*.deleted`` segments whose file.delete.delay.ms has passed."""
        due = [each for deadline, each in self._pending_deletes if deadline <= now_ms]
        self._pending_deletes = [
            (deadline, each) for deadline, each in self._pending_deletes if deadline > now_ms
        ]
        for each in due:
            each.delete_files()
        return len(due)

    def truncate_to(self, offset: int) -> None:
        """Remove every record at ``offset`` and above (a follower diverging from its leader).

        As in Kafka, truncating at or below the first segment's base empties the log and
        restarts it at ``offset``.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._log_end_offset:
            return
        now = self._now_ms()
        if offset <= self._segments[0].base_offset:
            self._restart_at(offset, now)
        else:
            doomed = [each for each in self._segments if each.base_offset >= offset]
            del self._segments[len(self._segments) - len(doomed) :]
            self._schedule_deletion(doomed, now)
            self._segments[-1].truncate_to(offset)
            self._log_start_offset = min(self._log_start_offset, offset)
        self._log_end_offset = offset
        self._high_watermark = min(self._high_watermark, offset)
        if self._recovery_point > offset:
            self._recovery_point = offset
            if self._managed:
                # Data above the new point is not fsynced: the checkpoint must say so first.
                self._offsets_changed(True)
            else:
                checkpoints.write_offset(self.directory / RECOVERY_POINT_FILE, offset)
        self._leader_epochs.truncate_from_end(offset)
        self._rebuild_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every record and start the log empty at ``offset``, which may lie past the
        end (Kafka's truncateFullyAndStartAt: a Raft follower installing a snapshot)."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot start a log at negative offset {offset}")
        self._restart_at(offset, self._now_ms())
        self._log_end_offset = offset
        self._high_watermark = offset
        self._recovery_point = offset
        if self._managed:
            self._offsets_changed(True)
        else:
            checkpoints.write_offset(self.directory / RECOVERY_POINT_FILE, offset)
        self._leader_epochs.truncate_from_end(0)
        self._rebuild_producer_state()

    def _restart_at(self, offset: int, now: int) -> None:
        doomed = list(self._segments)
        # Renamed away first: the new segment may have the same base offset (file name).
        self._schedule_deletion(doomed, now)
        self._segments = [
            segment.LogSegment.create(self.directory, offset, self.config, now, self._handles)
        ]
        self._set_log_start_offset(offset)

    # -- durability and lifecycle ----------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment and move the recovery point to the log end offset."""
        self._check_open()
        for each in self._segments:
            each.flush()
        self._recovery_point = self._log_end_offset
        if self._managed:
            self._offsets_changed(False)
        else:
            checkpoints.write_offset(self.directory / RECOVERY_POINT_FILE, self._recovery_point)
            checkpoints.write_offset(self.directory / HIGH_WATERMARK_FILE, self._high_watermark)
        self._unflushed_records = 0
        self._last_flush_ms = self._now_ms()

    def flush_rolled_segments(self) -> None:
        """fsync segments that are no longer active, so recovery after a crash only has to
        check the active one (Kafka flushes on roll)."""
        active = self._segments[-1]
        if self._recovery_point >= active.base_offset:
            return
        for each in self._segments[:-1]:
            each.flush()
        self._recovery_point = active.base_offset
        if self._managed:
            self._offsets_changed(False)
        else:
            checkpoints.write_offset(self.directory / RECOVERY_POINT_FILE, self._recovery_point)

    def run_maintenance(self, now_ms: int) -> None:
        """Periodic work: time roll, retention, delayed file deletion, producer expiry and
        the flushes due. Blocking fsyncs happen here, not on the append path."""
        if self._closed:
            return
        self.roll_if_expired(now_ms)
        self.apply_retention(now_ms)
        self.delete_expired_files(now_ms)
        self._producers.remove_expired(now_ms, self.config.producer_id_expiration_ms)
        if now_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
        else:
            self.flush_rolled_segments()

    def close(self) -> None:
        """Flush everything and mark the shutdown clean, so the next open checks nothing.

        Only segments written since their last fsync are fsynced. A managed log writes no
        offsets or clean mark of its own: the LogManager writes its directory's afterwards.
        The producer snapshot is written only if appends came after the newest one, and
        without fsync when managed: a snapshot lost to a machine crash is only a slower open
        (the state is rebuilt from an older one and the log)."""
        if self._closed:
            return
        for each in self._segments:
            each.close_writers()
        self.flush()
        if self._snapshot_covers != self._log_end_offset:
            self._producers.write_snapshot(self._log_end_offset, durable=not self._managed)
            self._snapshot_covers = self._log_end_offset
        if not self._managed:
            checkpoints.write_atomically(self.directory / CLEAN_SHUTDOWN_FILE, b"")
        self._release_files()

    def delete(self) -> None:
        """Close without flushing and remove the partition directory.

        The directory is first renamed to a ``-delete`` name, so a crash half-way leaves
        something startup removes rather than a partial log it would load.
        """
        if not self._closed:
            self._release_files()
        doomed = self.directory.with_name(
            f"{self.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        )
        self.directory.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)

    def close_handles(self) -> None:
        """Drop every file handle without writing anything, as Kafka does when a log dir
        fails. The next open sees an unclean shutdown and recovers."""
        if self._closed:
            return
        for each in self._segments:
            each.release_handles()
        for _, each in self._pending_deletes:
            each.release_handles()
        self._closed = True

    def _release_files(self) -> None:
        for each in self._segments:
            each.release_handles()
        for _, each in self._pending_deletes:
            each.delete_files()
        self._pending_deletes = []
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"the log in {self.directory} is closed")


def _base_offset_of(each: segment.LogSegment) -> int:
    return each.base_offset
