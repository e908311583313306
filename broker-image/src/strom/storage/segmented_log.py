"""A log's segment files and the offsets over them: reading, flushing, removing files.

Kafka's LocalLog: what a partition log does with its files whatever the records mean.
``partition_log.PartitionLog`` builds on it with what they mean (leader epochs, producer
state, transactions) and every operation that moves the offsets: appends, truncation,
retention, compaction. Segments taken out of the log are renamed to ``*.deleted`` at once
and unlinked once file.delete.delay.ms has passed, so ranges already handed to a fetch
stay readable meanwhile.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from strom.records import batches
from strom.storage import file_handles, log_reads, offset_checkpoints, segment, time_lookup
from strom.storage.log_config import LogConfig

# A directory being deleted: ``<topic>-<partition>.<uuid>-delete``; removed at startup.
DELETE_DIR_SUFFIX = "-delete"


class OffsetOutOfRangeError(Exception):
    """A read or DeleteRecords offset outside what the log holds (Kafka OFFSET_OUT_OF_RANGE)."""


class LogClosedError(Exception):
    """An operation on a partition log that was closed or deleted."""


class SegmentedLog:
    """The segments (oldest first, the last one active) and offsets of one log."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        now_ms: Callable[[], int],
        segments: list[segment.LogSegment],
        log_start_offset: int,
        recovery_point: int,
        checkpoints: offset_checkpoints.OffsetCheckpoints,
        handles: file_handles.HandleCache | None,
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
        # Segments renamed to *.deleted, unlinked once their deadline passes.
        self._pending_deletes: list[tuple[int, segment.LogSegment]] = []
        self._unflushed_records = 0
        self._last_flush_ms = now_ms()
        self._closed = False
        self._handles = handles
        # Our own files, or (managed by a LogManager) the log directory's.
        self._checkpoints = checkpoints

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

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for each in self._segments:
            each.config = config

    @property
    def legacy_checkpoint_files(self) -> list[str]:
        """Per-partition checkpoint files found on open that the log directory's files
        replace (a LogManager removes them once it has written those)."""
        return list(self._checkpoints.legacy_files)

    def remove_legacy_checkpoint_files(self) -> None:
        self._checkpoints.remove_legacy_files()

    # -- reading ---------------------------------------------------------------------------

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int, *, min_one_batch: bool = True
    ) -> log_reads.ReadResult:
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
        if start_offset >= max_offset or start_offset == self._log_end_offset:
            return log_reads.ReadResult([], 0)
        return log_reads.read_ranges(
            self._segments, start_offset, max_bytes, max_offset, min_one_batch
        )

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

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start whose timestamp
        is >= ``timestamp_ms`` (ListOffsets by timestamp); see ``time_lookup``."""
        return time_lookup.offset_for_timestamp(
            self._segments, self._log_start_offset, timestamp_ms
        )

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp (ListOffsets -3)."""
        return time_lookup.max_timestamp_and_offset(self._segments)

    # -- removing segment files ------------------------------------------------------------

    def _schedule_deletion(self, doomed: list[segment.LogSegment], now_ms: int) -> None:
        deadline = now_ms + self.config.file_delete_delay_ms
        for each in doomed:
            each.mark_deleted()
            self._pending_deletes.append((deadline, each))

    def delete_expired_files(self, now_ms: int) -> int:
        """Unlink ``*.deleted`` segments whose file.delete.delay.ms has passed."""
        due = [each for deadline, each in self._pending_deletes if deadline <= now_ms]
        self._pending_deletes = [
            (deadline, each) for deadline, each in self._pending_deletes if deadline > now_ms
        ]
        for each in due:
            each.delete_files()
        return len(due)

    # -- durability and lifecycle ----------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment and move the recovery point to the log end offset."""
        self._check_open()
        for each in self._segments:
            each.flush()
        self._recovery_point = self._log_end_offset
        self._checkpoints.flushed(self._recovery_point, self._high_watermark)
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
        self._checkpoints.recovery_point_rose(self._recovery_point)

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
