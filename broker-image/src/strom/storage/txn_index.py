"""The aborted-transaction index of a segment: ``<base offset>.txnindex``, Kafka's format.

One 34-byte big-endian entry per transaction aborted by a marker in the segment: version
int16 (0), producer id int64, first offset int64, last offset (the marker's) int64 and
the last stable offset when the marker was written int64, in increasing last offset order
(Kafka's TransactionIndex and AbortedTxn). A read_committed fetch returns the entries
that overlap the range it reads, so the consumer can skip the aborted batches.

The file exists only once the segment has an entry. Entries are few (one per aborted
transaction), so an index is read whole on first use and kept in memory; appends go to
the file at once and reach the disk with the segment's flush.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Iterable
from pathlib import Path

SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


class CorruptIndexError(Exception):
    """A transaction index that does not parse (the segment must be recovered)."""


@dataclasses.dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            _VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


def decode(data: bytes) -> list[AbortedTxn]:
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(f"{len(data)} bytes is not a whole number of entries")
    entries = []
    for position in range(0, len(data), ENTRY_SIZE):
        version, producer_id, first, last, last_stable = _ENTRY.unpack_from(data, position)
        if version != _VERSION:
            raise CorruptIndexError(f"entry at {position} has version {version}")
        entries.append(AbortedTxn(producer_id, first, last, last_stable))
    return entries


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None
        self._unsynced = False

    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry, oldest first (read from the file on first use)."""
        if self._entries is None:
            try:
                self._entries = decode(self.path.read_bytes())
            except FileNotFoundError:
                self._entries = []
        return self._entries

    def append(self, entry: AbortedTxn) -> None:
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: entry ending at {entry.last_offset} does not follow the last "
                f"one, ending at {entries[-1].last_offset}"
            )
        with open(self.path, "ab") as file:
            file.write(entry.encode())
        entries.append(entry)
        self._unsynced = True

    def replace(self, entries: Iterable[AbortedTxn]) -> None:
        """Rewrite the index with ``entries`` (recovery rebuilt them from the log)."""
        kept = list(entries)
        if kept:
            self.path.write_bytes(b"".join(entry.encode() for entry in kept))
            self._unsynced = True
        else:
            self.path.unlink(missing_ok=True)
        self._entries = kept

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or past ``offset``."""
        kept = [entry for entry in self.entries if entry.last_offset < offset]
        if len(kept) != len(self.entries):
            self.replace(kept)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound), and whether the search is done
        (Kafka's collectAbortedTxns): once an entry's last stable offset reaches the
        bound, every transaction open below the bound had ended when its marker was
        written, so no later entry can overlap. (An entry whose marker lies past the bound
        says nothing of that: another transaction may have begun before it and ended
        after.)"""
        found = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def flush(self) -> None:
        if not self._unsynced:
            return
        try:
            descriptor = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._unsynced = False
            return
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        self._unsynced = False

    def rename(self, path: Path) -> None:
        if self.path.exists():
            self.path.rename(path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = []
