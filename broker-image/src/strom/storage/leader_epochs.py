"""The leader-epoch cache of a partition: which offset each leader epoch started at.

Stored in ``leader-epoch-checkpoint`` in Kafka's text format (version line, entry count,
then ``epoch start_offset`` lines). Replication uses it to answer OffsetForLeaderEpoch and
to find where a follower's log diverges from the leader's.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from pathlib import Path

from strom.storage import checkpoints

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_FORMAT_VERSION = 0


@dataclasses.dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    def __init__(self, path: Path, entries: list[EpochEntry]) -> None:
        self.path = path
        self._entries = entries

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache | None:
        """The cache in ``path``: empty when missing, None when unreadable (rebuild it)."""
        try:
            lines = path.read_text().split()
        except FileNotFoundError:
            return cls(path, [])
        except (OSError, UnicodeDecodeError):
            return None
        try:
            numbers = [int(word) for word in lines]
        except ValueError:
            return None
        if len(numbers) < 2 or numbers[0] != _FORMAT_VERSION or len(numbers) != 2 + 2 * numbers[1]:
            return None
        entries = [EpochEntry(numbers[i], numbers[i + 1]) for i in range(2, len(numbers), 2)]
        for previous, entry in itertools.pairwise(entries):
            if entry.epoch <= previous.epoch or entry.start_offset < previous.start_offset:
                return None
        return cls(path, entries)

    @classmethod
    def rebuild(cls, path: Path, batch_epochs: Iterable[tuple[int, int]]) -> LeaderEpochCache:
        """Rebuild from (partitionLeaderEpoch, base offset) of the log's batches, in order."""
        cache = cls(path, [])
        for epoch, base_offset in batch_epochs:
            if epoch >= 0:
                cache._assign(epoch, base_offset)
        cache._write()
        return cache

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; a no-op for the current epoch."""
        if self._assign(epoch, start_offset):
            self._write()

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {epoch} at {start_offset}")
        if self._entries:
            latest = self._entries[-1]
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return False
        # As Kafka: entries that the new one contradicts are dropped.
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetForLeaderEpoch, with Kafka's semantics: the
        start offset of the first epoch after ``requested_epoch``, paired with the largest
        known epoch <= it; the log end offset for the latest epoch; (-1, -1) if unknown."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in self._entries if e.epoch > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = None
        for entry in self._entries:
            if entry.epoch <= requested_epoch:
                floor = entry
        if floor is None:
            return requested_epoch, higher.start_offset
        return floor.epoch, higher.start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after ``end_offset`` (the log was truncated there)."""
        keep = [entry for entry in self._entries if entry.start_offset < end_offset]
        if len(keep) != len(self._entries):
            self._entries = keep
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch covering it starts there."""
        before = [entry for entry in self._entries if entry.start_offset <= start_offset]
        if not before or (len(before) == 1 and before[0].start_offset == start_offset):
            return
        covering = EpochEntry(before[-1].epoch, start_offset)
        self._entries = [covering, *self._entries[len(before) :]]
        self._write()

    def _write(self) -> None:
        lines = [str(_FORMAT_VERSION), str(len(self._entries))]
        lines += [f"{entry.epoch} {entry.start_offset}" for entry in self._entries]
        checkpoints.write_atomically(self.path, ("\n".join(lines) + "\n").encode())
