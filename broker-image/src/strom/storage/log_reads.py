"""Reading a partition log for a fetch: whole batches, as byte ranges of segment files.

A fetch is served the batches whose last offset is below ``max_offset`` (the high
watermark), as Kafka does, so a batch straddling the bound waits until all of it is
committed. Replication only ever moves the high watermark to batch boundaries. The ranges
are sent with sendfile; ``ReadResult.read_into_bytes`` copies them where it cannot be used.
"""

from __future__ import annotations

import dataclasses
import os
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from strom.records import batches
from strom.storage import file_handles, segment


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


def read_ranges(
    segments: Sequence[segment.LogSegment],
    start_offset: int,
    max_bytes: int,
    max_offset: int,
    min_one_batch: bool,
) -> ReadResult:
    """The ranges of the batches from the one containing ``start_offset``, within
    ``max_bytes`` (but the first whatever its size with ``min_one_batch``, KIP-74) and
    before the first batch whose last offset is >= ``max_offset``. The caller checks
    ``start_offset`` against the log's range."""
    ranges: list[FileRange] = []
    total = 0
    for each in segments[segment_index(segments, start_offset) :]:
        position, length, stopped = each.read_slice(
            start_offset, max_offset, max_bytes - total, min_one_batch and total == 0
        )
        if length > 0:
            ranges.append(FileRange(each.log_file, position, length))
            total += length
        if stopped:
            break
    return ReadResult(ranges, total)


def segment_index(segments: Sequence[segment.LogSegment], offset: int) -> int:
    """Index of the segment that would hold ``offset``."""
    return max(0, bisect_right(segments, offset, key=_base_offset_of) - 1)


def headers_from(
    segments: Sequence[segment.LogSegment], offset: int
) -> Iterator[batches.BatchHeader]:
    """Stored batch headers whose last offset is >= ``offset``, across segments."""
    for each in segments[segment_index(segments, offset) :]:
        for _, header in each.iter_headers(each.offset_index.lookup(offset)):
            if header.last_offset >= offset:
                yield header


def _base_offset_of(each: segment.LogSegment) -> int:
    return each.base_offset
