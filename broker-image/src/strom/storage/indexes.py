"""Sparse per-segment indexes: ``.index`` (offset -> file position) and ``.timeindex``.

Entries are kept in memory (``array``) and appended to the file as they are made, so a crash
of the process loses nothing the kernel has. A file is created with its first entry: a
missing file is an empty index (new segments get no index files until they need them), and
the append handle comes from the log manager's ``file_handles.HandleCache``. Files are
big-endian like Kafka's:

- ``.index``: relative offset int32 + file position int32. The offset is the base offset of
  the batch starting at that position. An entry is made at most every index.interval.bytes.
- ``.timeindex``: timestamp int64 + relative offset int32. The timestamp is the largest seen
  so far in the segment and the offset is the base offset of the first batch that reached it,
  so timestamps strictly increase.

An index that fails its sanity check on load is rebuilt from the log by the caller.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path
from typing import ClassVar

from strom.storage import checkpoints, file_handles

logger = logging.getLogger(__name__)


class _SparseIndex:
    """Sorted (key, value) entries mirrored to an append-only file."""

    ENTRY: ClassVar[struct.Struct]
    KEY_TYPECODE: ClassVar[str]

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_bytes: int,
        handles: file_handles.HandleCache | None = None,
    ) -> None:
        self._file = (handles or file_handles.default_cache()).file(path, "ab")
        self.base_offset = base_offset
        self.max_entries = max_index_bytes // self.ENTRY.size
        self._keys = array(self.KEY_TYPECODE)
        self._values = array("i")
        self._unsynced = False  # entries written since the last fsync
        # After a failed write the file stops being updated; it holds a valid prefix or a
        # torn entry, either of which the next load copes with.
        self._file_failed = False

    @property
    def path(self) -> Path:
        return self._file.path

    @path.setter
    def path(self, path: Path) -> None:
        self._file.path = path

    @property
    def entry_count(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries

    def _load_entries(self) -> bool:
        """Read the file (missing: no entries); False if not a whole number of entries."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return True
        if len(data) % self.ENTRY.size:
            return False
        for key, value in self.ENTRY.iter_unpack(data):
            self._keys.append(key)
            self._values.append(value)
        return True

    def _floor(self, key: int) -> int:
        """Index of the last entry whose key is <= ``key``, or -1."""
        return bisect_right(self._keys, key) - 1

    def _append_entry(self, key: int, value: int) -> None:
        self._keys.append(key)
        self._values.append(value)
        if self._file_failed:
            return
        try:
            self._file.get().write(self.ENTRY.pack(key, value))
            self._unsynced = True
        except OSError:
            logger.exception("cannot write index %s; it will be rebuilt on next load", self.path)
            self._file_failed = True

    def _keep_first(self, count: int) -> None:
        del self._keys[count:]
        del self._values[count:]
        self.write_all()

    def clear(self) -> None:
        self._keep_first(0)

    def write_all(self) -> None:
        """Replace the file with the entries in memory (after a rebuild or truncation); with
        no entries the file is removed, which reads back as an empty index."""
        self.close()
        self._file_failed = False
        if not self._keys:
            self.path.unlink(missing_ok=True)
            return
        data = b"".join(
            self.ENTRY.pack(key, value) for key, value in zip(self._keys, self._values, strict=True)
        )
        self.path.write_bytes(data)
        self._unsynced = True

    def flush(self) -> None:
        if not self._unsynced:
            return
        self._unsynced = False
        if self._file.is_open:
            os.fsync(self._file.get().fileno())
        elif self._keys:
            with contextlib.suppress(FileNotFoundError):
                checkpoints.fsync_path(self.path)

    def close(self) -> None:
        """Stop appending to the file; the entries stay usable in memory."""
        self._file.close()


class OffsetIndex(_SparseIndex):
    ENTRY = struct.Struct(">ii")
    KEY_TYPECODE = "i"

    @classmethod
    def load(
        cls,
        path: Path,
        base_offset: int,
        max_index_bytes: int,
        log_size: int,
        handles: file_handles.HandleCache | None = None,
    ) -> OffsetIndex | None:
        """The index in ``path`` (empty when missing), or None when it fails its sanity check."""
        index = cls(path, base_offset, max_index_bytes, handles)
        if not index._load_entries():
            return None
        previous_offset = previous_position = -1
        for relative_offset, position in zip(index._keys, index._values, strict=True):
            if relative_offset <= previous_offset or position <= previous_position:
                return None
            previous_offset, previous_position = relative_offset, position
        if previous_position >= log_size:
            return None
        return index

    def append(self, offset: int, position: int) -> None:
        self._append_entry(offset - self.base_offset, position)

    def lookup(self, offset: int) -> int:
        """File position of the last indexed batch starting at or before ``offset`` (else 0)."""
        found = self._floor(offset - self.base_offset)
        return self._values[found] if found >= 0 else 0

    @property
    def last_position(self) -> int:
        return self._values[-1] if self._values else 0


class TimeIndex(_SparseIndex):
    ENTRY = struct.Struct(">qi")
    KEY_TYPECODE = "q"

    @classmethod
    def load(
        cls,
        path: Path,
        base_offset: int,
        max_index_bytes: int,
        handles: file_handles.HandleCache | None = None,
    ) -> TimeIndex | None:
        """The index in ``path`` (empty when missing), or None when it fails its sanity check."""
        index = cls(path, base_offset, max_index_bytes, handles)
        if not index._load_entries():
            return None
        previous_timestamp = -(2**63)
        previous_offset = -1
        for timestamp, relative_offset in zip(index._keys, index._values, strict=True):
            if timestamp <= previous_timestamp or relative_offset < previous_offset:
                return None
            previous_timestamp, previous_offset = timestamp, relative_offset
        return index

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the newest entry."""
        if not self._keys:
            return None
        return self._keys[-1], self.base_offset + self._values[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Record a new largest timestamp; ignored unless it exceeds the last one."""
        if self._keys and timestamp <= self._keys[-1]:
            return
        self._append_entry(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """Offset of the last entry whose timestamp is <= ``timestamp`` (else the base offset).

        Every batch before that offset has a max timestamp below ``timestamp``'s entry, so a
        search for the first batch reaching ``timestamp`` can start there.
        """
        found = self._floor(timestamp)
        return self.base_offset + self._values[found] if found >= 0 else self.base_offset
