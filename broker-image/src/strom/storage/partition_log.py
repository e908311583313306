"""The log of one partition: appends, truncation, retention and compaction.

Modelled on Kafka's UnifiedLog, over ``segmented_log`` (Kafka's LocalLog: the segment files
and the offsets over them, reads, flushes, file deletion, closing). This class adds what
the records mean, leader epochs and producer state, and runs every operation that moves
the offsets, keeping those in step. Its parts live by role: opening and recovery in
``log_loader`` (Kafka's LogLoader; a clean log opens lazily, older segments reading their
indexes on first use), the batch-by-batch work of appends in ``log_appends``, which
segments retention deletes in ``retention``, transactions in ``log_transactions``, the
compaction swap in ``log_compaction``, the offsets' checkpoint files in
``offset_checkpoints``.

Single-threaded: called from the event loop, with synchronous writes that go to the page
cache; fsync happens only on flush (by flush.messages, flush.ms, rolled segments in
maintenance, and close).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from strom.records import batches, control
from strom.storage import (
    cleaner,
    file_handles,
    leader_epochs,
    log_appends,
    log_compaction,
    log_loader,
    log_reads,
    log_transactions,
    offset_checkpoints,
    producer_state,
    retention,
    segment,
    segmented_log,
    txn_index,
)
from strom.storage.log_config import LogConfig

logger = logging.getLogger(__name__)

# Callers name these as the log's own.
AppendResult = log_appends.AppendResult
ReadResult = log_reads.ReadResult
DirOffsets = log_loader.DirOffsets
OffsetOutOfRangeError = segmented_log.OffsetOutOfRangeError
LogClosedError = segmented_log.LogClosedError
DELETE_DIR_SUFFIX = segmented_log.DELETE_DIR_SUFFIX
# The class's ``producer_state`` property hides the module in its annotations.
VerificationGuard = producer_state.VerificationGuard


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionLog(segmented_log.SegmentedLog):
    """Use ``PartitionLog.open``."""

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
        super().__init__(
            directory,
            config,
            now_ms,
            segments,
            log_start_offset,
            recovery_point,
            checkpoints,
            handles,
        )
        self._leader_epochs = leader_epochs.LeaderEpochCache(
            directory / leader_epochs.FILE_NAME, []
        )
        self._producers = producer_state.ProducerStateManager(directory)
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
        ``dir_offsets``: given by a LogManager, see ``offset_checkpoints``.
        """
        loaded = log_loader.load(directory, config, now_ms(), handles, dir_offsets)
        names = loaded.names
        log_start_offset = loaded.log_start_offset
        recovery_point = loaded.recovery_point
        checkpoints = offset_checkpoints.OffsetCheckpoints(directory, dir_offsets, names)
        log = cls(
            directory,
            config,
            now_ms,
            loaded.segments,
            log_start_offset,
            recovery_point,
            checkpoints,
            handles,
        )
        checkpoints.opened(recovery_point, log_start_offset, loaded.checkpointed_start)
        log._load_leader_epochs()
        log._rebuild_producer_state(names, loaded.rebuild_txn_indexes_from)
        log.update_high_watermark(loaded.high_watermark)
        # From here on a crash must lead to recovery. (A managed log's clean mark is the log
        # directory's, which the LogManager removes once every log is open.)
        if loaded.legacy_clean:
            (directory / log_loader.CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        return log

    def _load_leader_epochs(self) -> None:
        path = self.directory / leader_epochs.FILE_NAME
        cache = leader_epochs.LeaderEpochCache.load(path)
        if cache is None:
            logger.warning("%s is unreadable; rebuilding it from the log", path)
            cache = leader_epochs.LeaderEpochCache.rebuild(
                path,
                (
                    (header.partition_leader_epoch, header.base_offset)
                    for header in log_reads.headers_from(
                        self._segments, self._segments[0].base_offset
                    )
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

    # -- state beside the segments ---------------------------------------------------------

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
        view, headers = log_appends.marker_batch(producer_id, producer_epoch, marker, now_ms)
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
        appended = log_appends.stamp(
            view, headers, self._log_end_offset, leader_epoch, log_append_time
        )
        active = self._segments[-1]
        active.append(view, appended, now_ms)
        first_offset = appended[0].base_offset
        self._log_end_offset = appended[-1].last_offset + 1
        if leader_epoch >= 0:
            self._leader_epochs.assign(leader_epoch, first_offset)
        log_appends.record_written(self._producers, active, view, headers, appended)
        self._unflushed_records += sum(header.records_count for header in headers)
        if self._unflushed_records >= self.config.flush_messages:
            self.flush()
        return AppendResult(
            first_offset,
            self._log_end_offset - 1,
            log_append_time,
            self._log_start_offset,
            duplicate=False,
            size=len(view),
            records=sum(header.records_count for header in headers),
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
        view, headers = log_appends.follower_batches(
            batch_bytes, self._log_end_offset, self.directory.name
        )
        if not headers:
            return self._log_end_offset
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
        active = self._segments[-1]
        active.append(view, appended, now_ms)
        self._log_end_offset = headers[-1].last_offset + 1
        log_appends.replay_written(self._producers, self._leader_epochs, active, view, headers)
        self._unflushed_records += sum(header.records_count for header in headers)
        if self._unflushed_records >= self.config.flush_messages:
            self.flush()
        return self._log_end_offset

    def _maybe_roll(
        self, append_bytes: int, append_max_timestamp: int, append_last_offset: int, now_ms: int
    ) -> None:
        if log_appends.should_roll(
            self._segments[-1],
            self.config,
            append_bytes,
            append_max_timestamp,
            append_last_offset,
            now_ms,
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

    # -- compaction ------------------------------------------------------------------------

    def plan_cleaning(self, now_ms: int) -> cleaner.CleaningPlan | None:
        """The compaction pass due on this log now, if any (see ``cleaner.plan``)."""
        if self._closed or not self.config.compacts:
            return None
        return log_compaction.plan(
            self.directory,
            self._segments,
            self.config,
            self._producers,
            self._log_start_offset,
            self._log_end_offset,
            self.last_stable_offset,
            now_ms,
        )

    def replace_segments(
        self, cleaned: cleaner.CleanedGroup, fault: Callable[[str], None] | None = None
    ) -> bool:
        """Swap a cleaned file in for the segments it was made from; False (and the file
        removed) if those segments are no longer the log's, e.g. retention deleted them.

        ``fault(step)`` is called between the steps, for tests that crash there.
        """
        if self._closed:
            cleaned.path.unlink(missing_ok=True)
            return False
        swapped_at = log_compaction.swap_in(
            self.directory,
            self._segments,
            cleaned,
            self.config,
            self._handles,
            self._now_ms,
            fault,
        )
        if swapped_at is None:
            return False
        deadline = swapped_at + self.config.file_delete_delay_ms
        self._pending_deletes.extend((deadline, old) for old in cleaned.replaced)
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

    def _set_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        self._high_watermark = max(self._high_watermark, offset)
        self._checkpoints.log_start_moved(offset)
        self._leader_epochs.truncate_from_start(offset)

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
            self._checkpoints.recovery_point_fell(offset)
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
        self._checkpoints.recovery_point_fell(offset)
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

    # -- maintenance and closing ------------------------------------------------------------

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
            self._producers.write_snapshot(
                self._log_end_offset, durable=not self._checkpoints.managed
            )
            self._snapshot_covers = self._log_end_offset
        self._checkpoints.closed_cleanly()
        self._release_files()
