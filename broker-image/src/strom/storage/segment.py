"""One log segment: ``<baseOffset>.log`` holding batches verbatim, plus its two indexes.

Only the partition's last (active) segment is appended to. Every segment keeps a read-only
handle open for the fetch path; it survives renames, so a segment scheduled for deletion
can still serve ranges already handed out.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from strom.records import batches
from strom.storage import checkpoints, indexes
from strom.storage.log_config import LogConfig

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"

_HEADER_CHUNK_BYTES = 16 * 1024
_RECOVERY_CHUNK_BYTES = 1024 * 1024


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_base_offset(name: str, suffix: str) -> int | None:
    """The base offset in a segment file name such as ``00000000000000000042.log``."""
    stem = name.removesuffix(suffix)
    if stem == name or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


@dataclasses.dataclass(frozen=True, slots=True)
class AppendedBatch:
    """A batch about to be written: where it is in the buffer and the offsets it was given."""

    buffer_position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


class _ChunkedReader:
    """Reads a file in large chunks and hands out views of byte ranges from them."""

    def __init__(self, fd: int, end: int, chunk_bytes: int) -> None:
        self._fd = fd
        self._end = end
        self._chunk_bytes = chunk_bytes
        self._chunk = memoryview(b"")
        self._chunk_start = 0

    def view(self, position: int, length: int) -> memoryview | None:
        """Bytes [position, position + length), or None if the file ends before that."""
        if position + length > self._end:
            return None
        relative = position - self._chunk_start
        if relative < 0 or relative + length > len(self._chunk):
            wanted = min(max(self._chunk_bytes, length), self._end - position)
            self._chunk = memoryview(os.pread(self._fd, wanted, position))
            self._chunk_start = position
            relative = 0
            if len(self._chunk) < length:
                return None
        return self._chunk[relative : relative + length]


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        offset_index: indexes.OffsetIndex,
        time_index: indexes.TimeIndex,
    ) -> None:
        self.base_offset = base_offset
        self.config = config
        self.log_path = directory / file_name(base_offset, LOG_SUFFIX)
        self.offset_index = offset_index
        self.time_index = time_index
        self._read_file: BinaryIO = open(self.log_path, "rb", buffering=0)  # noqa: SIM115
        self._write_file: BinaryIO | None = None
        self.size = os.fstat(self._read_file.fileno()).st_size
        # Largest batch max timestamp and the base offset of the first batch reaching it.
        self.max_timestamp = batches.NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        last_time_entry = time_index.last_entry
        if last_time_entry is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_time_entry
        # Max timestamp of the first batch: segment.ms is measured from it, as in Kafka.
        self.rolling_timestamp = batches.NO_TIMESTAMP
        self.created_ms = now_ms
        self.last_modified_ms = int(os.fstat(self._read_file.fileno()).st_mtime * 1000)
        # Known when the segment was appended to or scanned to its end (always for the last).
        self.next_offset: int | None = base_offset if self.size == 0 else None
        self.needs_fsync = False
        self._bytes_since_index_entry = 0

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int
    ) -> LogSegment:
        """A new empty segment; existing files with its name are emptied."""
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (directory / file_name(base_offset, suffix)).write_bytes(b"")
        segment = cls(
            directory,
            base_offset,
            config,
            now_ms,
            indexes.OffsetIndex(
                directory / file_name(base_offset, INDEX_SUFFIX),
                base_offset,
                config.segment_index_bytes,
            ),
            indexes.TimeIndex(
                directory / file_name(base_offset, TIME_INDEX_SUFFIX),
                base_offset,
                config.segment_index_bytes,
            ),
        )
        segment.last_modified_ms = now_ms
        return segment

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int
    ) -> tuple[LogSegment, bool]:
        """Open an existing segment; the flag says whether its indexes passed their checks.

        With a failed check the segment has empty indexes and must be recovered before use.
        """
        log_size = (directory / file_name(base_offset, LOG_SUFFIX)).stat().st_size
        index_path = directory / file_name(base_offset, INDEX_SUFFIX)
        time_index_path = directory / file_name(base_offset, TIME_INDEX_SUFFIX)
        offset_index = indexes.OffsetIndex.load(
            index_path, base_offset, config.segment_index_bytes, log_size
        )
        time_index = indexes.TimeIndex.load(
            time_index_path, base_offset, config.segment_index_bytes
        )
        if offset_index is None or time_index is None:
            offset_index = indexes.OffsetIndex(index_path, base_offset, config.segment_index_bytes)
            time_index = indexes.TimeIndex(time_index_path, base_offset, config.segment_index_bytes)
            return cls(directory, base_offset, config, now_ms, offset_index, time_index), False
        return cls(directory, base_offset, config, now_ms, offset_index, time_index), True

    @property
    def read_file(self) -> BinaryIO:
        return self._read_file

    @property
    def largest_timestamp(self) -> int:
        """What time retention compares: the max batch timestamp, else the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return self.last_modified_ms

    def is_index_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    # -- writing ---------------------------------------------------------------------------

    def append(self, buf: memoryview, appended: list[AppendedBatch], now_ms: int) -> None:
        """Write ``buf`` (whole batches, offsets already assigned) and index its batches.

        On a write error the file is cut back to its previous size, so no partial batch stays.
        """
        start = self.size
        self._write_all(buf)
        self.size += len(buf)
        for batch in appended:
            self._account_batch(
                start + batch.buffer_position,
                batch.size,
                batch.base_offset,
                batch.last_offset,
                batch.max_timestamp,
            )
        self.next_offset = appended[-1].last_offset + 1
        self.last_modified_ms = now_ms
        self.needs_fsync = True

    def _writer(self) -> BinaryIO:
        if self._write_file is None:
            self._write_file = open(self.log_path, "ab", buffering=0)  # noqa: SIM115
        return self._write_file

    def _write_all(self, data: memoryview) -> None:
        writer = self._writer()
        written = 0
        try:
            while written < len(data):
                count = writer.write(data[written:])
                if not count:
                    raise OSError(f"short write to {self.log_path}")
                written += count
        except BaseException:
            os.ftruncate(writer.fileno(), self.size)
            raise

    def _account_batch(
        self, position: int, size: int, base_offset: int, last_offset: int, max_timestamp: int
    ) -> None:
        """Update indexes and timestamps for a batch now in the file (append and recovery)."""
        if position == 0:
            self.rolling_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = base_offset
        if self._bytes_since_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(base_offset, position)
            if self.max_timestamp >= 0:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size

    def _write_final_time_index_entry(self) -> None:
        # Kafka does this when a segment stops being active, so the largest timestamp
        # (used by retention and ListOffsets) survives a reopen without a scan.
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def close_writers(self) -> None:
        """The segment stopped being active: finish its time index and release write handles."""
        self._write_final_time_index_entry()
        self.offset_index.close()
        self.time_index.close()
        if self._write_file is not None:
            self._write_file.close()
            self._write_file = None

    def flush(self) -> None:
        if not self.needs_fsync:
            return
        if self._write_file is not None:
            os.fsync(self._write_file.fileno())
        else:
            checkpoints.fsync_path(self.log_path)
        self.offset_index.flush()
        self.time_index.flush()
        self.needs_fsync = False

    # -- scanning --------------------------------------------------------------------------

    def iter_headers(self, start_position: int = 0) -> Iterator[tuple[int, batches.BatchHeader]]:
        """(file position, header) of each batch from ``start_position`` to the current end."""
        end = self.size
        reader = _ChunkedReader(self._read_file.fileno(), end, _HEADER_CHUNK_BYTES)
        position = start_position
        while position < end:
            view = reader.view(position, batches.HEADER_SIZE)
            header = None if view is None else batches.BatchHeader.parse(view)
            if (
                header is None
                or header.batch_length < batches.MIN_BATCH_LENGTH
                or position + header.size > end
            ):
                raise batches.CorruptRecordError(
                    f"{self.log_path}: unreadable batch at position {position}"
                )
            yield position, header
            position += header.size

    def find_position(self, offset: int) -> int:
        """Position of the first batch whose last offset is >= ``offset`` (else the size)."""
        for position, header in self.iter_headers(self.offset_index.lookup(offset)):
            if header.last_offset >= offset:
                return position
        return self.size

    def read_slice(
        self, start_offset: int, max_offset: int, max_bytes: int, must_return_one: bool
    ) -> tuple[int, int, bool]:
        """Whole batches for a fetch: (position, length, stopped_early).

        Starts at the batch containing ``start_offset`` and takes following batches while
        they end before ``max_offset`` and fit ``max_bytes`` (the first one regardless when
        ``must_return_one``). ``stopped_early`` means later segments must not be read.
        """
        start_position = -1
        end_position = -1
        for position, header in self.iter_headers(self.offset_index.lookup(start_offset)):
            if header.last_offset < start_offset:
                continue
            if header.last_offset >= max_offset:
                return start_position, end_position - start_position, True
            first = start_position < 0
            length = header.size if first else position + header.size - start_position
            if length > max_bytes and not (first and must_return_one):
                return start_position, end_position - start_position, True
            if first:
                start_position = position
            end_position = position + header.size
        return start_position, end_position - start_position, False

    def load_tail(self) -> bool:
        """After a clean shutdown: find the next offset by walking headers from the last index
        entry, without CRC checks. False if the tail does not parse (the caller recovers)."""
        try:
            if self.size > 0:
                first = next(self.iter_headers(0))[1]
                self.rolling_timestamp = first.max_timestamp
            next_offset = self.base_offset
            for _, header in self.iter_headers(self.offset_index.last_position):
                next_offset = header.last_offset + 1
                if header.max_timestamp > self.max_timestamp:
                    self.max_timestamp = header.max_timestamp
                    self.offset_of_max_timestamp = header.base_offset
        except batches.CorruptRecordError:
            return False
        self.next_offset = next_offset
        return True

    def recover(self) -> int:
        """Validate every batch (lengths, magic, CRC, increasing offsets), rebuild the indexes
        and cut the file at the first bad batch. Returns the number of bytes removed."""
        self.close_writers()
        self.offset_index.clear()
        self.time_index.clear()
        self.max_timestamp = batches.NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.rolling_timestamp = batches.NO_TIMESTAMP
        self._bytes_since_index_entry = 0
        file_size = os.fstat(self._read_file.fileno()).st_size
        reader = _ChunkedReader(self._read_file.fileno(), file_size, _RECOVERY_CHUNK_BYTES)
        position = 0
        next_offset = self.base_offset
        while position < file_size:
            checked = self._check_batch_at(reader, position, next_offset)
            if isinstance(checked, str):
                logger.warning(
                    "%s: %s at position %d; truncating %d bytes",
                    self.log_path,
                    checked,
                    position,
                    file_size - position,
                )
                break
            self._account_batch(
                position,
                checked.size,
                checked.base_offset,
                checked.last_offset,
                checked.max_timestamp,
            )
            next_offset = checked.last_offset + 1
            position += checked.size
        if position < file_size:
            os.truncate(self.log_path, position)
        self.size = position
        self.next_offset = next_offset
        self.offset_index.write_all()
        self.time_index.write_all()
        self.needs_fsync = True
        return file_size - position

    @staticmethod
    def _check_batch_at(
        reader: _ChunkedReader, position: int, expected_offset: int
    ) -> batches.BatchHeader | str:
        """The header of a valid batch at ``position``, or what is wrong with it."""
        view = reader.view(position, batches.HEADER_SIZE)
        if view is None:
            return "torn batch header"
        header = batches.BatchHeader.parse(view)
        if header.batch_length < batches.MIN_BATCH_LENGTH:
            return f"batch length {header.batch_length}"
        if header.magic != batches.MAGIC_V2:
            return f"magic {header.magic}"
        if header.last_offset_delta < 0 or header.records_count < 0:
            return "negative offset delta or record count"
        if header.base_offset < expected_offset:
            return f"offset {header.base_offset} below the expected {expected_offset}"
        whole = reader.view(position, header.size)
        if whole is None:
            return "torn batch"
        if not batches.has_valid_crc(whole, header):
            return "CRC mismatch"
        return header

    def truncate_to(self, offset: int) -> int:
        """Remove the batches whose last offset is >= ``offset``; returns bytes removed."""
        position = self.find_position(offset)
        if position >= self.size:
            return 0
        removed = self.size - position
        self.close_writers()
        os.truncate(self.log_path, position)
        self.recover()
        return removed

    # -- lifecycle -------------------------------------------------------------------------

    def mark_deleted(self) -> None:
        """Rename the files to ``*.deleted``; the read handle keeps working until delete_files."""
        self.close_writers()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            if path.exists():
                path.rename(path.with_name(path.name + DELETED_SUFFIX))
        self.log_path = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        for index in (self.offset_index, self.time_index):
            index.path = index.path.with_name(index.path.name + DELETED_SUFFIX)

    def delete_files(self) -> None:
        self.release_handles()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            path.unlink(missing_ok=True)

    def close(self) -> None:
        self.close_writers()
        self.release_handles()

    def release_handles(self) -> None:
        """Close every file handle without writing anything."""
        self.offset_index.close()
        self.time_index.close()
        if self._write_file is not None:
            self._write_file.close()
            self._write_file = None
        self._read_file.close()
