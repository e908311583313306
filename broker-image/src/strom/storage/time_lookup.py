"""Finding records by time in a log's segments (ListOffsets by timestamp and -3).

The time index narrows the search to a position; batch headers say which batch holds
the answer; only an uncompressed batch is decoded to find the exact record. For a
compressed batch the answer is its first offset and max timestamp: a consumer seeking
there reads a few earlier records again but misses none. Callers filter by the high
watermark.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from strom.records import batches
from strom.storage import segment


def offset_for_timestamp(
    segments: Sequence[segment.LogSegment], log_start_offset: int, timestamp_ms: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after `log_start_offset` whose
    timestamp is >= `timestamp_ms`, or None if there is none."""
    for each in segments:
        if each.max_timestamp < timestamp_ms:
            continue
        start = max(each.time_index.lookup(timestamp_ms), log_start_offset)
        for position, header in each.iter_headers(each.offset_index.lookup(start)):
            if header.last_offset < log_start_offset:
                continue
            if header.max_timestamp >= timestamp_ms:
                return _first_record_at_or_after(
                    each, position, header, timestamp_ms, log_start_offset
                )
    return None


def _first_record_at_or_after(
    owner: segment.LogSegment,
    position: int,
    header: batches.BatchHeader,
    timestamp_ms: int,
    log_start_offset: int,
) -> tuple[int, int]:
    first_offset = max(header.base_offset, log_start_offset)
    if header.compression != batches.COMPRESSION_NONE:
        return first_offset, header.max_timestamp
    batch = os.pread(owner.read_file.fileno(), header.size, position)
    for record in batches.iter_records(batch):
        if record.offset >= first_offset and record.timestamp >= timestamp_ms:
            return record.offset, record.timestamp
    return first_offset, header.max_timestamp


def max_timestamp_and_offset(
    segments: Sequence[segment.LogSegment],
) -> tuple[int, int] | None:
    """(timestamp, offset) of the record with the largest timestamp, the first such record
    if several; None if no batch has a timestamp. For a compressed CreateTime batch the
    offset is the batch's first offset."""
    best: segment.LogSegment | None = None
    for each in segments:
        if each.max_timestamp >= 0 and (best is None or each.max_timestamp > best.max_timestamp):
            best = each
    if best is None:
        return None
    position = best.find_position(best.offset_of_max_timestamp)
    if position >= best.size:
        return None
    header = next(best.iter_headers(position))[1]
    if header.compression == batches.COMPRESSION_NONE:
        batch = os.pread(best.read_file.fileno(), header.size, position)
        for record in batches.iter_records(batch):
            if record.timestamp == header.max_timestamp:
                return record.timestamp, record.offset
    return header.max_timestamp, header.base_offset
