"""Opening a partition log: what is on disk, what the checkpoints say, and recovery.

Kafka's LogLoader. A clean log (shut down cleanly, or its directory's checkpoints say
so) opens lazily: only its active segment's index is read, older segments read theirs on
first use, and when the clean shutdown recorded the end offset nothing is scanned at
all. After a crash, the segments past the recovery point are scanned, their CRCs
checked, and a torn or corrupt tail is truncated; the segments after a torn one are
deleted (their offsets no longer follow on). Leftovers of interrupted writes, deletions
and cleaner swaps are removed first.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from strom.storage import checkpoints, cleaner, file_handles, segment, txn_index
from strom.storage.log_config import LogConfig

logger = logging.getLogger(__name__)

LOG_START_OFFSET_FILE = "log-start-offset"
RECOVERY_POINT_FILE = "recovery-point"
HIGH_WATERMARK_FILE = "high-watermark"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
LEGACY_CHECKPOINT_FILES = (LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE, HIGH_WATERMARK_FILE)


@dataclasses.dataclass(frozen=True, slots=True)
class DirOffsets:
    """What a log directory's checkpoint files say about one partition, given by the
    ``LogManager`` to ``PartitionLog.open``; None where they do not know the partition."""

    clean_shutdown: bool
    recovery_point: int | None = None
    log_start_offset: int | None = None
    high_watermark: int | None = None
    # Told when the log's recovery point or log start offset changed; ``urgent`` when the
    # directory's checkpoint must be rewritten before going on (the recovery point fell).
    changed: Callable[[bool], None] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class LoadedLog:
    """What a partition log opens with."""

    segments: list[segment.LogSegment]
    log_start_offset: int
    recovery_point: int  # everything below it is on disk (the log end after recovery)
    checkpointed_start: int | None
    high_watermark: int
    names: set[str]  # the directory's files, leftovers removed
    legacy_clean: bool  # a per-partition clean-shutdown mark was found
    # The base offset of the first segment scanned after a crash: the transaction indexes
    # from there on are rebuilt with the producer state (None: they are all trusted).
    rebuild_txn_indexes_from: int | None = None


def load(
    directory: Path,
    config: LogConfig,
    now: int,
    handles: file_handles.HandleCache | None,
    dir_offsets: DirOffsets | None,
) -> LoadedLog:
    """The segments of the log in ``directory`` (made if missing), recovered if needed."""
    try:
        names = set(os.listdir(directory))
    except FileNotFoundError:
        directory.mkdir(parents=True)
        names = set()
    if any(name.endswith((cleaner.CLEANED_SUFFIX, cleaner.SWAP_SUFFIX)) for name in names):
        cleaner.remove_unfinished(directory)
        names = set(os.listdir(directory))
    names = _remove_leftovers(directory, names)
    legacy_clean = CLEAN_SHUTDOWN_FILE in names

    def legacy_offset(file: str) -> int | None:
        return checkpoints.read_offset(directory / file) if file in names else None

    known_end: int | None = None  # the log end offset, when a clean shutdown recorded it
    if dir_offsets is None:
        clean_shutdown = legacy_clean
        checkpointed_start = legacy_offset(LOG_START_OFFSET_FILE)
        recovery_point = legacy_offset(RECOVERY_POINT_FILE) or 0
        checkpointed_high_watermark = legacy_offset(HIGH_WATERMARK_FILE)
    else:
        clean_shutdown = dir_offsets.clean_shutdown or legacy_clean
        checkpointed_start = dir_offsets.log_start_offset
        if checkpointed_start is None:
            checkpointed_start = legacy_offset(LOG_START_OFFSET_FILE)
        if dir_offsets.recovery_point is not None:
            recovery_point = dir_offsets.recovery_point
            if dir_offsets.clean_shutdown:
                # A clean close flushes everything before writing the checkpoint.
                known_end = recovery_point
        else:
            recovery_point = legacy_offset(RECOVERY_POINT_FILE) or 0
        checkpointed_high_watermark = dir_offsets.high_watermark
        if checkpointed_high_watermark is None:
            checkpointed_high_watermark = legacy_offset(HIGH_WATERMARK_FILE)

    segments: list[segment.LogSegment] = []
    indexes_ok: list[bool] = []
    bases = _segment_base_offsets(directory, names)
    if known_end is not None and bases and known_end < bases[-1]:
        known_end = None  # does not fit the files: find the end from them
    for position, base_offset in enumerate(bases):
        # A clean log reads only the active segment's indexes now (none of them when its
        # end offset is known), the others on first use.
        lazy = clean_shutdown and (position < len(bases) - 1 or known_end is not None)
        loaded, ok = segment.LogSegment.open(
            directory, base_offset, config, now, handles, lazy=lazy
        )
        segments.append(loaded)
        indexes_ok.append(ok)
    if not segments:
        start = checkpointed_start or 0
        segments.append(segment.LogSegment.create(directory, start, config, now, handles))
        indexes_ok.append(True)
        clean_shutdown = True

    rebuild_txn_indexes_from = None
    if clean_shutdown:
        _recover_segments(segments, [not ok for ok in indexes_ok])
        if known_end is not None and bases:
            try:
                segments[-1].assume_next_offset(known_end)
            except ValueError:
                logger.warning("%s: checkpointed end does not fit; reading it", directory)
        if segments[-1].next_offset is None and not segments[-1].load_tail():
            _recover_segments(segments, [s is segments[-1] for s in segments])
    else:
        bases = [s.base_offset for s in segments]
        first_unflushed = max(0, bisect_right(bases, recovery_point) - 1)
        logger.info(
            "%s: unclean shutdown, recovering segments from offset %d",
            directory.name,
            bases[first_unflushed],
        )
        _recover_segments(
            segments,
            [i >= first_unflushed or not ok for i, ok in enumerate(indexes_ok)],
        )
        for recovered in segments:
            recovered.flush()
        rebuild_txn_indexes_from = segments[min(first_unflushed, len(segments) - 1)].base_offset
    log_end_offset = segments[-1].next_offset
    assert log_end_offset is not None
    recovery_point = log_end_offset

    log_start_offset = max(checkpointed_start or 0, segments[0].base_offset)
    log_start_offset = min(log_start_offset, log_end_offset)
    return LoadedLog(
        segments,
        log_start_offset,
        recovery_point,
        checkpointed_start,
        checkpointed_high_watermark or 0,
        names,
        legacy_clean,
        rebuild_txn_indexes_from,
    )


def _segment_base_offsets(directory: Path, names: set[str]) -> list[int]:
    offsets = []
    for name in names:
        base_offset = segment.parse_base_offset(name, segment.LOG_SUFFIX)
        if base_offset is not None:
            offsets.append(base_offset)
    known = set(offsets)
    # Index files whose log is gone would otherwise be picked up by a later segment.
    for name in names:
        for suffix in (segment.INDEX_SUFFIX, segment.TIME_INDEX_SUFFIX, txn_index.SUFFIX):
            orphan = segment.parse_base_offset(name, suffix)
            if orphan is not None and orphan not in known:
                (directory / name).unlink()
    return sorted(offsets)


def _remove_leftovers(directory: Path, names: set[str]) -> set[str]:
    """Files of deletions and atomic writes that a crash interrupted; the names left."""
    kept = set()
    for name in names:
        if name.endswith((segment.DELETED_SUFFIX, checkpoints.TEMPORARY_SUFFIX)):
            (directory / name).unlink()
        else:
            kept.add(name)
    return kept


def _recover_segments(segments: list[segment.LogSegment], selected: list[bool]) -> None:
    """Recover the selected segments in order. A segment cut short invalidates the ones
    after it (their offsets would no longer follow on), so those are deleted."""
    for index, each in enumerate(list(segments)):
        if not selected[index]:
            continue
        removed = each.recover()
        if removed:
            logger.warning(
                "%s: truncated %d bytes of a torn or corrupt tail", each.log_path, removed
            )
        if removed and index < len(segments) - 1:
            for later in segments[index + 1 :]:
                logger.warning("deleting %s after a torn segment before it", later.log_path)
                later.delete_files()
            del segments[index + 1 :]
            return
