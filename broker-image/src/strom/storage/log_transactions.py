"""The transaction side of a partition log: batches read back with their markers, the
aborted transactions of a fetched range, and the indexes rebuilt after a crash.

Kafka's UnifiedLog/LocalLog pieces for transactions (``collectAbortedTransactions``,
``LogSegment.recover(producerStateManager)``), as functions over a log's segments so
that ``partition_log`` stays about appending and reading.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Iterator, Sequence

from strom.records import batches, control
from strom.storage import producer_state, segment, txn_index

StoredBatch = tuple[batches.BatchHeader, control.EndTxnMarker | None]


def _segment_index(segments: Sequence[segment.LogSegment], offset: int) -> int:
    return max(0, bisect_right(segments, offset, key=lambda each: each.base_offset) - 1)


def marker_in(
    view: bytes | bytearray | memoryview, header: batches.BatchHeader
) -> control.EndTxnMarker | None:
    """The commit or abort marker of a control batch held in ``view`` (None for another
    batch, or a control record that is not a marker). An unreadable one is treated as no
    marker, as it cannot end a transaction."""
    if not header.is_control:
        return None
    try:
        return control.parse_end_txn_marker(view[header.position : header.position + header.size])
    except batches.CorruptRecordError:
        return None


def stored_batches(
    segments: Sequence[segment.LogSegment], offset: int
) -> Iterator[tuple[segment.LogSegment, StoredBatch]]:
    """Batches whose last offset is >= ``offset``, with the marker of each control batch
    (read from the file: control batches are a few dozen bytes)."""
    for each in segments[_segment_index(segments, offset) :]:
        file = None
        for position, header in each.iter_headers(each.offset_index.lookup(offset)):
            if header.last_offset < offset:
                continue
            marker = None
            if header.is_control:
                file = file or each.read_file
                data = os.pread(file.fileno(), header.size, position)
                marker = marker_in(data, batches.BatchHeader.parse(data))
            yield each, (header, marker)


def aborted_transactions(
    segments: Sequence[segment.LogSegment], fetch_offset: int, upper_bound: int
) -> list[txn_index.AbortedTxn]:
    """Aborted transactions overlapping [fetch_offset, upper_bound): the list a
    read_committed fetch returns (Kafka's LocalLog.collectAbortedTransactions)."""
    found: list[txn_index.AbortedTxn] = []
    for each in segments[_segment_index(segments, fetch_offset) :]:
        entries, complete = each.txn_index.collect(fetch_offset, upper_bound)
        found.extend(entries)
        if complete:
            break
    return found


def rebuild_producer_state(
    producers: producer_state.ProducerStateManager,
    segments: Sequence[segment.LogSegment],
    log_end_offset: int,
    rebuild_indexes_from: int | None,
    names: set[str] | None = None,
) -> int:
    """Load the newest snapshot and replay the log after it. With ``rebuild_indexes_from``
    (after a crash), the replay starts at or below that offset and rewrites the
    transaction indexes of the segments from there on. Returns the offset the loaded
    snapshot covered."""
    limit = log_end_offset if rebuild_indexes_from is None else rebuild_indexes_from
    covered = producers.load_latest_snapshot(min(limit, log_end_offset), names)
    if covered >= log_end_offset:
        return covered
    rebuilt: dict[int, list[txn_index.AbortedTxn]] = {}
    if rebuild_indexes_from is not None:
        rebuilt = {
            each.base_offset: [] for each in segments if each.base_offset >= rebuild_indexes_from
        }
    for each, (header, marker) in stored_batches(segments, covered):
        done = producers.replay_batch(header, marker)
        if done is None or each.base_offset not in rebuilt:
            continue
        completed, last_stable = done
        if completed.is_aborted:
            rebuilt[each.base_offset].append(
                txn_index.AbortedTxn(
                    completed.producer_id,
                    completed.first_offset,
                    completed.last_offset,
                    last_stable,
                )
            )
    for each in segments:
        if each.base_offset in rebuilt:
            each.txn_index.replace(rebuilt[each.base_offset])
    return covered
