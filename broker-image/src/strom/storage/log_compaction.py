"""A partition log's side of compaction: what the cleaner is given, and installing what
it made.

The cleaner (``cleaner``) works on a copy of the segments it plans; the swap that puts its
output in their place is crash-safe as Kafka's replaceSegments: the cleaned file is
renamed to ``.swap`` (the commit point, recovery finishes the swap from there), the old
segments to ``.deleted``, then the swap file to the first old segment's name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from strom.storage import (
    checkpoints,
    cleaner,
    file_handles,
    log_transactions,
    producer_state,
    segment,
)
from strom.storage.log_config import LogConfig


def plan(
    directory: Path,
    segments: list[segment.LogSegment],
    config: LogConfig,
    producers: producer_state.ProducerStateManager,
    log_start_offset: int,
    log_end_offset: int,
    last_stable_offset: int,
    now_ms: int,
) -> cleaner.CleaningPlan | None:
    """The compaction pass due on a compacted log now, if any (see ``cleaner.plan``):
    nothing past ``last_stable_offset`` is cleanable, and the plan carries the aborted
    transactions with records in its segments."""
    first_dirty = min(
        max(cleaner.read_checkpoint(directory), log_start_offset),
        log_end_offset,
    )
    made = cleaner.plan(
        directory,
        segments,
        config,
        last_stable_offset,
        first_dirty,
        now_ms,
        cleaner.read_tombstones_due(directory),
        {
            producer_id: entry.batches[-1].last_offset
            for producer_id, entry in producers.producers.items()
            if entry.batches
        },
    )
    if made is None:
        return None
    aborted = log_transactions.aborted_transactions(
        segments, made.segments[0].base_offset, made.end_offset
    )
    return dataclasses.replace(made, aborted=tuple(aborted))


def swap_in(
    directory: Path,
    segments: list[segment.LogSegment],
    cleaned: cleaner.CleanedGroup,
    config: LogConfig,
    handles: file_handles.HandleCache | None,
    now_ms: Callable[[], int],
    fault: Callable[[str], None] | None,
) -> int | None:
    """Put a cleaned file in place of the segments it was made from, in ``segments``.
    Returns the time of the swap, from which the old segments' file.delete.delay.ms
    counts; None (and the file removed) if those segments are no longer the log's, e.g.
    retention deleted them.

    ``fault(step)`` is called between the steps, for tests that crash there.
    """
    replaced = cleaned.replaced
    start = next((i for i, s in enumerate(segments) if s is replaced[0]), None)
    if (
        start is None
        or start + len(replaced) >= len(segments)  # never the active segment
        or any(a is not b for a, b in zip(segments[start:], replaced, strict=False))
    ):
        cleaned.path.unlink(missing_ok=True)
        return None
    base = replaced[0].base_offset
    swap = cleaned.path.with_name(segment.file_name(base, segment.LOG_SUFFIX) + cleaner.SWAP_SUFFIX)
    cleaned.path.rename(swap)
    checkpoints.fsync_path(directory)  # the commit point
    if fault is not None:
        fault("swap-renamed")
    now = now_ms()
    # The cleaner keeps every marker, so the replaced segments' aborted transactions
    # all stay indexed, now in the one segment.
    aborted = [entry for old in replaced for entry in old.txn_index.entries]
    for old in replaced:
        old.mark_deleted()
        if fault is not None:
            fault("old-segment-retired")
    swap.rename(directory / segment.file_name(base, segment.LOG_SUFFIX))
    checkpoints.fsync_path(directory)
    if fault is not None:
        fault("swap-installed")
    fresh, _ = segment.LogSegment.open(directory, base, config, now, handles)
    fresh.recover()  # builds its indexes and checks every batch
    fresh.txn_index.replace(aborted)
    fresh.close_writers()
    fresh.flush()
    segments[start : start + len(replaced)] = [fresh]
    return now
