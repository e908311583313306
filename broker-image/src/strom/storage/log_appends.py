"""The batch-by-batch work of appending to a partition log.

A leader's batches get their offsets, leader epoch and (LogAppendTime) timestamps
patched in before being written verbatim; a follower's are checked to continue the log
and written as the leader made them. Either way a segment is rolled first when Kafka
would, and each written batch then updates the producer state, a marker ending an aborted
transaction going into the active segment's transaction index (Kafka's
UnifiedLog.append). ``partition_log`` keeps the offsets and calls these once per append,
so the loops over batches stay here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from strom.records import batches, control
from strom.storage import leader_epochs, log_transactions, producer_state, segment, txn_index
from strom.storage.log_config import LogConfig

_INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool  # a retry of a batch already written: offsets are the original ones
    size: int = 0  # bytes written
    records: int = 0  # records in the batches (written or, for a retry, already there)


def should_roll(
    active: segment.LogSegment,
    config: LogConfig,
    append_bytes: int,
    append_max_timestamp: int,
    append_last_offset: int,
    now_ms: int,
) -> bool:
    """Kafka's shouldRoll, checked before an append."""
    if active.size == 0:
        return False
    if active.rolling_timestamp >= 0:
        waited = append_max_timestamp - active.rolling_timestamp
    else:
        waited = now_ms - active.created_ms
    return (
        active.size + append_bytes > config.segment_bytes
        or waited > config.segment_ms
        or active.is_index_full()
        or append_last_offset - active.base_offset > _INT32_MAX
    )


def stamp(
    view: memoryview,
    headers: Sequence[batches.BatchHeader],
    first_offset: int,
    leader_epoch: int,
    log_append_time: int,
) -> list[segment.AppendedBatch]:
    """Patch a leader's offsets (from ``first_offset`` on), leader epoch and, unless
    ``log_append_time`` is -1, that timestamp into the batches in ``view``: the batches
    as the segment is to write them."""
    appended = []
    next_offset = first_offset
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
    return appended


def marker_batch(
    producer_id: int, producer_epoch: int, marker: control.EndTxnMarker, now_ms: int
) -> tuple[memoryview, list[batches.BatchHeader]]:
    """A commit or abort marker's control batch, writable so that it can be stamped."""
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
    return view, [batches.BatchHeader.parse(view)]


def follower_batches(
    batch_bytes: bytes | bytearray | memoryview, log_end_offset: int, log_name: str
) -> tuple[memoryview, list[batches.BatchHeader]]:
    """The batches copied from the leader that the log does not have yet (none if it has
    them all), and the view they start at.

    Batches wholly below ``log_end_offset`` are ones we have (a repeated fetch): skipped.
    One straddling it means our end is inside a leader's batch (after a truncation by
    epoch): the caller cuts the log back to that batch's start and takes it whole. Raises
    CorruptRecordError for a batch that fails its CRC or does not continue the ones
    before it.
    """
    view = memoryview(batch_bytes)
    headers = list(batches.iter_batches(view))
    while headers and headers[0].last_offset < log_end_offset:
        headers.pop(0)
    if not headers:
        return view, headers
    if headers[0].position:
        view = view[headers[0].position :]
        headers = list(batches.iter_batches(view))
    expected = log_end_offset
    if headers[0].base_offset < expected:
        expected = headers[0].base_offset
    for header in headers:
        if header.base_offset < expected or header.last_offset < header.base_offset:
            raise batches.CorruptRecordError(
                f"batch at offset {header.base_offset} does not follow offset "
                f"{expected - 1} in {log_name}"
            )
        if not batches.has_valid_crc(view, header):
            raise batches.CorruptRecordError(
                f"batch at offset {header.base_offset} fails its CRC in {log_name}"
            )
        expected = header.last_offset + 1
    return view, headers


def record_written(
    producers: producer_state.ProducerStateManager,
    active: segment.LogSegment,
    view: memoryview,
    headers: Sequence[batches.BatchHeader],
    appended: Sequence[segment.AppendedBatch],
) -> None:
    """Update the producer state for a leader's batches just written to ``active``."""
    for header, batch in zip(headers, appended, strict=True):
        # Control batches other than markers (Raft's) change no producer.
        marker = log_transactions.marker_in(view, header)
        if marker is not None:
            completed = producers.record_marker(
                header.producer_id,
                header.producer_epoch,
                marker,
                batch.base_offset,
                batch.max_timestamp,
            )
            if completed is not None:
                last_stable = producers.last_stable_offset_for(completed)
                producers.complete_txn(completed)
                index_aborted(active, completed, last_stable)
        elif not header.is_control:
            producers.record_data(header, batch.base_offset, batch.last_offset, batch.max_timestamp)


def replay_written(
    producers: producer_state.ProducerStateManager,
    epochs: leader_epochs.LeaderEpochCache,
    active: segment.LogSegment,
    view: memoryview,
    headers: Sequence[batches.BatchHeader],
) -> None:
    """Update the leader epochs and producer state for a follower's batches just written
    to ``active`` (so a follower that becomes leader knows every idempotent producer's
    last sequences)."""
    for header in headers:
        if header.partition_leader_epoch >= 0:
            epochs.assign(header.partition_leader_epoch, header.base_offset)
        done = producers.replay_batch(header, log_transactions.marker_in(view, header))
        if done is not None:
            index_aborted(active, *done)


def index_aborted(
    active: segment.LogSegment, completed: producer_state.CompletedTxn, last_stable: int
) -> None:
    """A marker just written ended a transaction: an aborted one goes into the active
    segment's index (the segment of its marker) with the LSO it left, as Kafka's
    UnifiedLog.append does."""
    if completed.is_aborted:
        active.txn_index.append(
            txn_index.AbortedTxn(
                completed.producer_id,
                completed.first_offset,
                completed.last_offset,
                last_stable,
            )
        )
