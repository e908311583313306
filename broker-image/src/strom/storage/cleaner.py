"""Log compaction: keep the latest record of each key, as Kafka's LogCleaner does.

For a log whose cleanup.policy includes "compact", the segments below the active one (and
below the last stable offset, and older than min.compaction.lag.ms) are cleanable. The part
of them after the last cleaning is "dirty". A pass:

1. maps every key of the dirty part to its latest offset (``build_offset_map``);
2. rewrites the cleanable segments, in groups that fit one segment, into
   ``<base>.log.cleaned`` files holding only the records that are the latest for their key
   (records without a key are kept), with tombstones (null values) dropped once their batch
   is older than delete.retention.ms (``write_cleaned``). Batches that lose no record are
   copied verbatim; the others are rebuilt with the same base offset, offset span,
   producer fields and codec, so kept records keep their offsets and compressed batches
   stay compressed;
3. swaps each cleaned file in (``PartitionLog.replace_segments``): fsync, rename to
   ``.swap`` (the commit point), retire the old segments, rename to ``.log``. A crash
   before the commit point leaves the old segments (the ``.cleaned`` file is deleted on
   open); after it, opening the log completes the swap. Either way the log is valid.

Steps 1 and 2 only read segment files that are no longer appended to and write new files,
so the broker runs them in a worker thread; step 3 runs on the event loop, and is skipped
if retention or truncation changed the segments meanwhile.

The tombstone rule is simpler than Kafka's delete horizon: a tombstone goes when its
batch's max timestamp is older than delete.retention.ms.

Transactions, as Kafka's cleaner treats them: nothing past the last stable offset is
cleaned (an open transaction may still abort); the records of an aborted transaction
(the plan's ``aborted``, from the transaction indexes) never count as a key's latest
value, so they cannot shadow a committed one, and they are removed (a producer's last
batch stays, emptied, for its sequence numbers). Commit and abort markers are kept, so
the transaction indexes stay as they are (Kafka removes a marker once its transaction's
records are gone and delete.retention.ms has passed).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from strom.records import batches
from strom.storage import checkpoints, segment, txn_index
from strom.storage.log_config import LogConfig

logger = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
# When the earliest tombstone a pass kept may go: the log is due again then.
TOMBSTONES_DUE_FILE = "cleaner-tombstones-due"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_INT32_MAX = 2**31 - 1
_READ_CHUNK_BYTES = 1024 * 1024


class CleaningAborted(Exception):
    """The log changed under a cleaning pass (deleted, truncated, closed)."""


@dataclasses.dataclass(frozen=True, slots=True)
class CleaningPlan:
    """What one pass over one log cleans: ``segments`` (oldest first, none active) cover
    [their first base offset, ``end_offset``); keys are mapped from ``first_dirty_offset``."""

    directory: Path
    segments: tuple[segment.LogSegment, ...]
    first_dirty_offset: int
    end_offset: int
    tombstone_horizon_ms: int
    segment_bytes: int
    dirty_ratio: float  # what the broker ranks logs by: the dirtiest is cleaned first
    # producer id -> last offset it wrote: that batch stays, even emptied, so the
    # producer's sequence numbers survive (Kafka's RETAIN_EMPTY).
    producer_last_offsets: Mapping[int, int] = dataclasses.field(default_factory=dict)
    # The aborted transactions with records in the segments: their batches are removed.
    aborted: tuple[txn_index.AbortedTxn, ...] = ()

    def aborted_ranges(self) -> dict[int, list[tuple[int, int]]]:
        """producer id -> the (first, last) offsets of each of its aborted transactions."""
        ranges: dict[int, list[tuple[int, int]]] = {}
        for entry in self.aborted:
            ranges.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))
        return ranges


@dataclasses.dataclass(frozen=True, slots=True)
class CleanedGroup:
    """A cleaned file ready to replace ``replaced`` (consecutive segments)."""

    replaced: tuple[segment.LogSegment, ...]
    path: Path
    records_kept: int
    records_removed: int
    oldest_tombstone_ms: int | None  # max timestamp of the oldest batch with a kept tombstone


@dataclasses.dataclass(frozen=True, slots=True)
class CleaningStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0


class Throttle:
    """log.cleaner.io.max.bytes.per.second: sleeps the cleaning thread to keep its reads
    and writes under the rate, so it does not starve producers of disk bandwidth."""

    def __init__(
        self,
        bytes_per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._rate = bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._started = clock()
        self._bytes = 0

    def account(self, count: int) -> None:
        self._bytes += count
        if self._rate <= 0 or self._rate >= 1e300:
            return
        due = self._started + self._bytes / self._rate
        ahead = due - self._clock()
        if ahead > 0:
            self._sleep(ahead)


def read_checkpoint(directory: Path) -> int:
    return checkpoints.read_offset(directory / CHECKPOINT_FILE) or 0


def read_tombstones_due(directory: Path) -> int | None:
    return checkpoints.read_offset(directory / TOMBSTONES_DUE_FILE)


def finish(
    cleaning: CleaningPlan, groups: Sequence[CleanedGroup], delete_retention_ms: int
) -> None:
    """Record where the next pass starts and when kept tombstones become removable."""
    checkpoints.write_offset(cleaning.directory / CHECKPOINT_FILE, cleaning.end_offset)
    kept = [g.oldest_tombstone_ms for g in groups if g.oldest_tombstone_ms is not None]
    due = cleaning.directory / TOMBSTONES_DUE_FILE
    if kept:
        checkpoints.write_offset(due, max(min(kept), 0) + delete_retention_ms + 1)
    else:
        due.unlink(missing_ok=True)


def dirty_ratio(segments: Sequence[segment.LogSegment], first_dirty_offset: int) -> float:
    """Bytes after the last cleaning over all bytes of the cleanable segments."""
    total = sum(s.size for s in segments)
    if total == 0:
        return 0.0
    dirty = sum(s.size for s in segments if s.base_offset >= first_dirty_offset)
    return dirty / total


def plan(
    directory: Path,
    segments: Sequence[segment.LogSegment],
    config: LogConfig,
    stable_offset: int,
    first_dirty_offset: int,
    now_ms: int,
    tombstones_due_ms: int | None = None,
    producer_last_offsets: Mapping[int, int] | None = None,
) -> CleaningPlan | None:
    """The pass to run on a log now, or None if it is not due.

    ``segments`` is the log's segment list, the active one last. Due when the dirty ratio
    reaches min.cleanable.dirty.ratio, when a dirty record is older than
    max.compaction.lag.ms, or when tombstones a pass kept may now be removed."""
    if "compact" not in config.cleanup_policy:
        return None
    cleanable: list[segment.LogSegment] = []
    for index, candidate in enumerate(segments[:-1]):
        following = segments[index + 1]
        if following.base_offset > stable_offset:  # the last stable offset: see above
            break
        recent = now_ms - candidate.largest_timestamp < config.min_compaction_lag_ms
        if candidate.size > 0 and recent:
            break
        cleanable.append(candidate)
    if not cleanable:
        return None
    end_offset = segments[len(cleanable)].base_offset
    tombstones_due = tombstones_due_ms is not None and now_ms >= tombstones_due_ms
    if first_dirty_offset >= end_offset and not tombstones_due:
        return None
    first_dirty_offset = min(first_dirty_offset, end_offset)
    ratio = dirty_ratio(cleanable, first_dirty_offset)
    dirty = [s for s in cleanable if s.base_offset >= first_dirty_offset]
    overdue = any(
        s.max_timestamp >= 0 and now_ms - s.max_timestamp > config.max_compaction_lag_ms
        for s in dirty
    )
    if ratio < config.min_cleanable_dirty_ratio and not overdue and not tombstones_due:
        return None
    return CleaningPlan(
        directory,
        tuple(cleanable),
        first_dirty_offset,
        end_offset,
        now_ms - config.delete_retention_ms,
        config.segment_bytes,
        ratio,
        dict(producer_last_offsets or {}),
    )


def _iter_batches(
    owner: segment.LogSegment, throttle: Throttle, start_position: int = 0
) -> Iterator[tuple[batches.BatchHeader, bytes]]:
    """Every batch of a (no longer appended) segment with its bytes, read in large chunks."""
    try:
        # Held for the whole pass (this runs in a worker thread): the handle cache may evict
        # the file meanwhile, and only a reference keeps the descriptor valid.
        file = owner.read_file
        fd = file.fileno()
    except (ValueError, OSError) as error:  # the log was deleted or closed meanwhile
        raise CleaningAborted(f"{owner.log_path} was closed") from error
    end = owner.size
    position = start_position
    while position < end:
        chunk = os.pread(fd, min(_READ_CHUNK_BYTES, end - position), position)
        if not chunk:
            raise CleaningAborted(f"{owner.log_path} ended early at {position}")
        throttle.account(len(chunk))
        offset_in_chunk = 0
        while offset_in_chunk + batches.HEADER_SIZE <= len(chunk):
            header = batches.BatchHeader.parse(chunk, offset_in_chunk)
            if header.batch_length < batches.MIN_BATCH_LENGTH:
                raise CleaningAborted(f"{owner.log_path}: unreadable batch at {position}")
            if offset_in_chunk + header.size > len(chunk):
                break
            yield header, chunk[offset_in_chunk : offset_in_chunk + header.size]
            offset_in_chunk += header.size
        if offset_in_chunk == 0:
            # One batch larger than the chunk: read it whole.
            header = batches.BatchHeader.parse(chunk, 0)
            whole = os.pread(fd, header.size, position)
            if len(whole) < header.size:
                raise CleaningAborted(f"{owner.log_path} ended inside a batch at {position}")
            throttle.account(len(whole))
            yield batches.BatchHeader.parse(whole, 0), whole
            offset_in_chunk = header.size
        position += offset_in_chunk


def build_offset_map(cleaning: CleaningPlan, throttle: Throttle) -> dict[bytes, int]:
    """key -> latest offset among the dirty records of the plan's segments."""
    latest: dict[bytes, int] = {}
    aborted = cleaning.aborted_ranges()
    for owner in cleaning.segments:
        following_base = _following_base(cleaning, owner)
        if following_base <= cleaning.first_dirty_offset:
            continue
        for header, data in _iter_batches(owner, throttle):
            if header.last_offset < cleaning.first_dirty_offset or header.is_control:
                continue
            if _is_aborted(header, aborted):
                continue  # never a key's latest value: it would hide the committed one
            for record in batches.iter_raw_records(data):
                if record.key is not None and record.offset >= cleaning.first_dirty_offset:
                    latest[record.key] = record.offset
    return latest


def _following_base(cleaning: CleaningPlan, owner: segment.LogSegment) -> int:
    index = cleaning.segments.index(owner)
    if index + 1 < len(cleaning.segments):
        return cleaning.segments[index + 1].base_offset
    return cleaning.end_offset


def group_segments(cleaning: CleaningPlan) -> list[tuple[segment.LogSegment, ...]]:
    """Consecutive segments whose cleaned output fits one segment (Kafka groups by their
    current sizes, which can only shrink) and one segment's 32-bit offset range."""
    groups: list[tuple[segment.LogSegment, ...]] = []
    current: list[segment.LogSegment] = []
    size = 0
    for owner in cleaning.segments:
        span_end = _following_base(cleaning, owner) - 1
        fits = (
            current
            and size + owner.size <= cleaning.segment_bytes
            and span_end - current[0].base_offset <= _INT32_MAX
        )
        if current and not fits:
            groups.append(tuple(current))
            current, size = [], 0
        current.append(owner)
        size += owner.size
    if current:
        groups.append(tuple(current))
    return groups


def write_cleaned(
    cleaning: CleaningPlan,
    group: tuple[segment.LogSegment, ...],
    latest: dict[bytes, int],
    throttle: Throttle,
    fault: Callable[[str], None] | None = None,
) -> CleanedGroup:
    """Write ``<base>.log.cleaned`` with the records of ``group`` that survive, fsynced."""
    path = cleaning.directory / (
        segment.file_name(group[0].base_offset, segment.LOG_SUFFIX) + CLEANED_SUFFIX
    )
    kept_total = removed_total = 0
    oldest_tombstone: int | None = None
    aborted = cleaning.aborted_ranges()
    with open(path, "wb") as out:
        for owner in group:
            for header, data in _iter_batches(owner, throttle):
                if header.is_control:
                    out.write(data)
                    continue
                if header.records_count == 0:  # emptied by an earlier pass
                    if _retain_empty(header, cleaning):
                        out.write(data)
                    continue
                records = list(batches.iter_raw_records(data))
                if _is_aborted(header, aborted):
                    kept = []
                else:
                    kept = [r for r in records if _survives(r, header, latest, cleaning)]
                removed_total += len(records) - len(kept)
                kept_total += len(kept)
                if any(r.value is None for r in kept) and (
                    oldest_tombstone is None or header.max_timestamp < oldest_tombstone
                ):
                    oldest_tombstone = header.max_timestamp
                if len(kept) == len(records):
                    out.write(data)
                    throttle.account(len(data))
                elif kept or _retain_empty(header, cleaning):
                    rebuilt = batches.rebuild_batch(header, kept)
                    out.write(rebuilt)
                    throttle.account(len(rebuilt))
                if fault is not None:
                    fault("writing")
        out.flush()
        os.fsync(out.fileno())
    return CleanedGroup(group, path, kept_total, removed_total, oldest_tombstone)


def _is_aborted(header: batches.BatchHeader, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    """A transactional data batch inside one of its producer's aborted transactions."""
    if not header.is_transactional:
        return False
    return any(
        first <= header.base_offset <= last for first, last in aborted.get(header.producer_id, ())
    )


def _retain_empty(header: batches.BatchHeader, cleaning: CleaningPlan) -> bool:
    """Batches kept even with no record left, as Kafka keeps them: the round's last
    batch (a consumer reading to the end must learn the offsets up to it were removed,
    or it would fetch the gap forever) and a producer's last batch."""
    if header.last_offset + 1 == cleaning.end_offset:
        return True
    return (
        header.has_producer_id
        and cleaning.producer_last_offsets.get(header.producer_id) == header.last_offset
    )


def _survives(
    record: batches.RawRecord,
    header: batches.BatchHeader,
    latest: dict[bytes, int],
    cleaning: CleaningPlan,
) -> bool:
    if record.key is None:
        return True  # only possible in logs that were not always compacted
    if record.offset < latest.get(record.key, -1):
        return False  # a later record has this key
    is_tombstone = record.value is None
    return not (is_tombstone and header.max_timestamp < cleaning.tombstone_horizon_ms)


def discard_cleaned(directory: Path) -> None:
    """Remove the cleaned files of a pass that stopped before swapping them in."""
    for path in directory.glob(f"*{segment.LOG_SUFFIX}{CLEANED_SUFFIX}"):
        path.unlink(missing_ok=True)


def remove_unfinished(directory: Path) -> None:
    """On open: cleaned files never swapped in are garbage; swaps past their commit point
    are completed (the old segments they replace are deleted, the file renamed to .log)."""
    discard_cleaned(directory)
    for swap in sorted(directory.glob(f"*{segment.LOG_SUFFIX}{SWAP_SUFFIX}")):
        base = segment.parse_base_offset(swap.name.removesuffix(SWAP_SUFFIX), segment.LOG_SUFFIX)
        if base is None:
            continue
        covered_end = _end_of(swap, base)
        for path in directory.glob(f"*{segment.LOG_SUFFIX}"):
            old_base = segment.parse_base_offset(path.name, segment.LOG_SUFFIX)
            if old_base is not None and base <= old_base < covered_end:
                for suffix in (segment.LOG_SUFFIX, segment.INDEX_SUFFIX, segment.TIME_INDEX_SUFFIX):
                    (directory / segment.file_name(old_base, suffix)).unlink(missing_ok=True)
        # The cleaned segment's indexes are rebuilt when it is loaded without them.
        for suffix in (segment.INDEX_SUFFIX, segment.TIME_INDEX_SUFFIX):
            (directory / segment.file_name(base, suffix)).unlink(missing_ok=True)
        swap.rename(directory / segment.file_name(base, segment.LOG_SUFFIX))
        checkpoints.fsync_path(directory)
        logger.info("%s: completed the swap of a cleaned segment at %d", directory.name, base)


def _end_of(swap: Path, base: int) -> int:
    """One past the last offset a swap file holds (its base if it holds nothing)."""
    end = base
    data = swap.read_bytes()
    for header in batches.iter_batches(data):
        end = header.last_offset + 1
    return max(end, base + 1)


# A lock per process so two cleaning passes never write the same directory at once.
_running = threading.Lock()


def run_pass(
    cleaning: CleaningPlan, throttle: Throttle, fault: Callable[[str], None] | None = None
) -> list[CleanedGroup]:
    """Steps 1 and 2 (thread-safe with respect to the event loop): the cleaned files."""
    with _running:
        latest = build_offset_map(cleaning, throttle)
        return [
            write_cleaned(cleaning, group, latest, throttle, fault)
            for group in group_segments(cleaning)
        ]
