"""One log segment: ``<baseOffset>.log`` holding batches verbatim, plus its two indexes.

Only the partition's last (active) segment is appended to. A segment holds no descriptor of
its own: its files are opened on use through the log manager's ``file_handles.HandleCache``
and reopened by path after eviction (the path follows the rename to ``*.deleted``, so a
segment scheduled for deletion still serves ranges already handed out).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from strom.records import batches
from strom.storage import checkpoints, file_handles, indexes, txn_index
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
    """Reads a file in large chunks and hands out views of byte ranges from them.

    Holds the file object, not its descriptor number: the handle cache may evict the file
    meanwhile, and a bare number could then name another file.
    """

    def __init__(self, file: BinaryIO, end: int, chunk_bytes: int) -> None:
        self._file = file
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
            self._chunk = memoryview(os.pread(self._file.fileno(), wanted, position))
            self._chunk_start = position
            relative = 0
            if len(self._chunk) < length:
                return None
        return self._chunk[relative : relative + length]


class LogSegment:
    """Use ``create`` or ``open``. No file is held open by the segment itself: the log file
    and the index append handles come from a ``file_handles.HandleCache`` on use, and the
    indexes of a segment opened without them are read on first use (``load_indexes``)."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        *,
        size: int,
        modified_ms: int,
        handles: file_handles.HandleCache | None = None,
        loaded_indexes: tuple[indexes.OffsetIndex, indexes.TimeIndex] | None = None,
    ) -> None:
        self.base_offset = base_offset
        self.config = config
        self._directory = directory
        self._handles = handles or file_handles.default_cache()
        log_path = directory / file_name(base_offset, LOG_SUFFIX)
        self._log_file = self._handles.file(log_path, "rb")
        self._write_file = self._handles.file(log_path, "ab")
        self._deleted = False
        # Aborted transactions whose marker is in this segment; the log writes it.
        self.txn_index = txn_index.TransactionIndex(self._index_path(txn_index.SUFFIX))
        self._offset_index: indexes.OffsetIndex | None = None
        self._time_index: indexes.TimeIndex | None = None
        self.size = size
        # Largest batch max timestamp and the base offset of the first batch reaching it;
        # known once the time index is loaded.
        self._max_timestamp = batches.NO_TIMESTAMP
        self._offset_of_max_timestamp = base_offset
        # Max timestamp of the first batch: segment.ms is measured from it, as in Kafka.
        # None: not read yet (a header read on first use).
        self._rolling_timestamp: int | None = batches.NO_TIMESTAMP if size == 0 else None
        self.created_ms = now_ms
        self.last_modified_ms = modified_ms
        # Known when the segment was appended to or scanned to its end (always for the last).
        self.next_offset: int | None = base_offset if self.size == 0 else None
        self.needs_fsync = False
        self._bytes_since_index_entry = 0
        if loaded_indexes is not None:
            self._set_indexes(*loaded_indexes)

    def _set_indexes(
        self, offset_index: indexes.OffsetIndex, time_index: indexes.TimeIndex
    ) -> None:
        self._offset_index = offset_index
        self._time_index = time_index
        last_time_entry = time_index.last_entry
        if last_time_entry is not None and last_time_entry[0] > self._max_timestamp:
            self._max_timestamp, self._offset_of_max_timestamp = last_time_entry

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        handles: file_handles.HandleCache | None = None,
    ) -> LogSegment:
        """A new empty segment; existing files with its name are emptied (index files are
        removed: they are created with their first entry)."""
        (directory / file_name(base_offset, LOG_SUFFIX)).write_bytes(b"")
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, txn_index.SUFFIX):
            (directory / file_name(base_offset, suffix)).unlink(missing_ok=True)
        handles = handles or file_handles.default_cache()
        return cls(
            directory,
            base_offset,
            config,
            now_ms,
            size=0,
            modified_ms=now_ms,
            handles=handles,
            loaded_indexes=cls._empty_indexes(directory, base_offset, config, handles),
        )

    @staticmethod
    def _empty_indexes(
        directory: Path, base_offset: int, config: LogConfig, handles: file_handles.HandleCache
    ) -> tuple[indexes.OffsetIndex, indexes.TimeIndex]:
        return (
            indexes.OffsetIndex(
                directory / file_name(base_offset, INDEX_SUFFIX),
                base_offset,
                config.segment_index_bytes,
                handles,
            ),
            indexes.TimeIndex(
                directory / file_name(base_offset, TIME_INDEX_SUFFIX),
                base_offset,
                config.segment_index_bytes,
                handles,
            ),
        )

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        handles: file_handles.HandleCache | None = None,
        *,
        lazy: bool = False,
    ) -> tuple[LogSegment, bool]:
        """Open an existing segment; the flag says whether its indexes passed their checks.

        With a failed check the segment has empty indexes and must be recovered before use.
        With ``lazy`` the indexes are not read now (the flag is then True): the first use
        reads them, and rebuilds them from the log if they fail their checks.
        """
        stat = (directory / file_name(base_offset, LOG_SUFFIX)).stat()
        opened = cls(
            directory,
            base_offset,
            config,
            now_ms,
            size=stat.st_size,
            modified_ms=stat.st_mtime_ns // 1_000_000,
            handles=handles,
        )
        if lazy:
            return opened, True
        return opened, opened._read_indexes()

    def _read_indexes(self) -> bool:
        """Load the index files; False (and empty indexes set) if they fail their checks."""
        offset_index = indexes.OffsetIndex.load(
            self._index_path(INDEX_SUFFIX),
            self.base_offset,
            self.config.segment_index_bytes,
            self.size,
            self._handles,
        )
        time_index = indexes.TimeIndex.load(
            self._index_path(TIME_INDEX_SUFFIX),
            self.base_offset,
            self.config.segment_index_bytes,
            self._handles,
        )
        if offset_index is None or time_index is None:
            self._set_empty_indexes()
            return False
        self._set_indexes(offset_index, time_index)
        return True

    def _set_empty_indexes(self) -> None:
        offset_index = indexes.OffsetIndex(
            self._index_path(INDEX_SUFFIX),
            self.base_offset,
            self.config.segment_index_bytes,
            self._handles,
        )
        time_index = indexes.TimeIndex(
            self._index_path(TIME_INDEX_SUFFIX),
            self.base_offset,
            self.config.segment_index_bytes,
            self._handles,
        )
        self._set_indexes(offset_index, time_index)

    def load_indexes(self) -> None:
        """Read the indexes now if they were left for first use (rebuilt if they fail)."""
        if self._offset_index is not None:
            return
        if not self._read_indexes():
            logger.warning("%s: indexes failed their checks; rebuilding them", self.log_path)
            self._rebuild_indexes()

    def _rebuild_indexes(self) -> None:
        """Index the batches from their headers, changing nothing in the log itself (the
        segment was checked when its log was opened; here only its indexes are bad)."""
        self._set_empty_indexes()
        assert self._offset_index is not None and self._time_index is not None
        self._max_timestamp = batches.NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset
        self._bytes_since_index_entry = 0
        for position, header in self.iter_headers(0):
            self._account_batch(
                position, header.size, header.base_offset, header.last_offset, header.max_timestamp
            )
        self._write_final_time_index_entry()
        self._offset_index.write_all()
        self._time_index.write_all()

    def assume_next_offset(self, next_offset: int) -> None:
        """The offset after the last batch, known from elsewhere (a clean shutdown's recovery
        point), so opening the active segment need not read its index or its tail."""
        if self.size == 0 and next_offset != self.base_offset:
            raise ValueError(f"{self.log_path} is empty but should end at {next_offset}")
        self.next_offset = next_offset

    @property
    def indexes_loaded(self) -> bool:
        return self._offset_index is not None

    @property
    def offset_index(self) -> indexes.OffsetIndex:
        if self._offset_index is None:
            self.load_indexes()
        assert self._offset_index is not None
        return self._offset_index

    @property
    def time_index(self) -> indexes.TimeIndex:
        if self._time_index is None:
            self.load_indexes()
        assert self._time_index is not None
        return self._time_index

    @property
    def max_timestamp(self) -> int:
        if self._offset_index is None:
            self.load_indexes()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        if self._offset_index is None:
            self.load_indexes()
        return self._offset_of_max_timestamp

    @property
    def rolling_timestamp(self) -> int:
        if self._rolling_timestamp is None:
            try:
                first = next(self.iter_headers(0))[1]
                self._rolling_timestamp = first.max_timestamp
            except (StopIteration, batches.CorruptRecordError):
                self._rolling_timestamp = batches.NO_TIMESTAMP
        return self._rolling_timestamp

    @property
    def log_path(self) -> Path:
        return self._log_file.path

    @property
    def log_file(self) -> file_handles.CachedFile:
        """The log file as the handle cache keeps it (what read ranges refer to)."""
        return self._log_file

    @property
    def read_file(self) -> BinaryIO:
        """The log file for reading (open until the last holder drops it, see file_handles)."""
        return self._log_file.get()

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

    def _write_all(self, data: memoryview) -> None:
        writer = self._write_file.get()
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
            self._rolling_timestamp = max_timestamp
        offset_index, time_index = self.offset_index, self.time_index
        if max_timestamp > self._max_timestamp:
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = base_offset
        if self._bytes_since_index_entry > self.config.index_interval_bytes:
            offset_index.append(base_offset, position)
            if self._max_timestamp >= 0:
                time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size

    def _write_final_time_index_entry(self) -> None:
        # Kafka does this when a segment stops being active, so the largest timestamp
        # (used by retention and ListOffsets) survives a reopen without a scan.
        # Indexes never loaded have nothing to add.
        if self._time_index is not None and self._max_timestamp >= 0:
            self._time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)

    def close_writers(self) -> None:
        """The segment stopped being active: finish its time index and release write handles."""
        self._write_final_time_index_entry()
        self._close_index_writers()
        self._write_file.close()

    def _close_index_writers(self) -> None:
        if self._offset_index is not None:
            self._offset_index.close()
        if self._time_index is not None:
            self._time_index.close()

    def flush(self) -> None:
        self.txn_index.flush()
        if not self.needs_fsync:
            return
        if self._write_file.is_open:
            os.fsync(self._write_file.get().fileno())
        else:
            checkpoints.fsync_path(self.log_path)
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()
        self.needs_fsync = False

    # -- scanning --------------------------------------------------------------------------

    def iter_headers(self, start_position: int = 0) -> Iterator[tuple[int, batches.BatchHeader]]:
        """(file position, header) of each batch from ``start_position`` to the current end."""
        end = self.size
        reader = _ChunkedReader(self._log_file.get(), end, _HEADER_CHUNK_BYTES)
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
            next_offset = self.base_offset
            for _, header in self.iter_headers(self.offset_index.last_position):
                next_offset = header.last_offset + 1
                if header.max_timestamp > self._max_timestamp:
                    self._max_timestamp = header.max_timestamp
                    self._offset_of_max_timestamp = header.base_offset
        except batches.CorruptRecordError:
            return False
        self.next_offset = next_offset
        return True

    def recover(self) -> int:
        """Validate every batch (lengths, magic, CRC, increasing offsets), rebuild the indexes
        and cut the file at the first bad batch. Returns the number of bytes removed."""
        if self._offset_index is None or self._time_index is None:
            self._set_empty_indexes()
        self.close_writers()
        self.offset_index.clear()
        self.time_index.clear()
        self._max_timestamp = batches.NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset
        self._rolling_timestamp = batches.NO_TIMESTAMP
        self._bytes_since_index_entry = 0
        log_file = self._log_file.get()
        file_size = os.fstat(log_file.fileno()).st_size
        reader = _ChunkedReader(log_file, file_size, _RECOVERY_CHUNK_BYTES)
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
        self.txn_index.truncate_to(offset)
        self.close_writers()
        os.truncate(self.log_path, position)
        self.recover()
        return removed

    # -- lifecycle -------------------------------------------------------------------------

    def mark_deleted(self) -> None:
        """Rename the files to ``*.deleted``; the read handle keeps working until delete_files."""
        self.close_writers()
        for path in self._paths():
            if path.exists():
                path.rename(path.with_name(path.name + DELETED_SUFFIX))
        self._deleted = True
        for cached in (self._log_file, self._write_file):
            cached.path = self._directory / (
                file_name(self.base_offset, LOG_SUFFIX) + DELETED_SUFFIX
            )
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.path = index.path.with_name(index.path.name + DELETED_SUFFIX)
        self.txn_index.rename(self._index_path(txn_index.SUFFIX))

    def _paths(self) -> tuple[Path, Path, Path]:
        return (
            self.log_path,
            self._index_path(INDEX_SUFFIX),
            self._index_path(TIME_INDEX_SUFFIX),
        )

    def _index_path(self, suffix: str) -> Path:
        name = file_name(self.base_offset, suffix)
        return self._directory / (name + DELETED_SUFFIX if self._deleted else name)

    def delete_files(self) -> None:
        self.release_handles()
        self.txn_index.delete()
        for path in self._paths():
            path.unlink(missing_ok=True)

    def close(self) -> None:
        self.close_writers()
        self.release_handles()

    def release_handles(self) -> None:
        """Give back every file handle without writing anything. The read handle is dropped,
        not closed: a fetch response still sending from it keeps it until it is done."""
        self._close_index_writers()
        self._write_file.close()
        self._log_file.release()
