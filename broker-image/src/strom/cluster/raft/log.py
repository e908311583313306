"""The replicated log as the Raft core sees it: entries, snapshot ids, and the interface.

`ReplicatedLog` is what `client.RaftClient` needs of a log and nothing more, so that one
backed by ``strom.storage.partition_log`` (``__cluster_metadata-0``, one record batch per
`append` with the entry's epoch as its partition leader epoch) can serve it:

- ``append_as_leader`` / ``append_as_follower``: append in memory or the page cache,
  durable only after ``flush``; the leader-epoch cache (``end_offset_for_epoch``) learns
  each new epoch's start offset on append, as Kafka's LeaderEpochFileCache does.
- ``truncate_to``: drop the suffix (follower divergence); the epoch cache drops with it.
- ``flush``: fsync the log; ``flushed_end_offset`` is what survives a crash.
- snapshots: ``create_snapshot`` at a committed offset (then the records before it may be
  deleted: ``delete_before_snapshot`` moves ``log_start_offset`` to the snapshot's end),
  ``read_snapshot`` in chunks for FetchSnapshot, ``install_snapshot`` on a follower, which
  empties the log and starts it at the snapshot's end.

`memory_log.MemoryLog` implements it for the simulation test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class UnreadableLogError(Exception):
    """The log cannot give entries it has counted as committed: its files changed under
    it (another process writing to the same directory, a disk fault)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One record of the log: its offset, the leader epoch that appended it, its bytes.

    ``control`` entries are the Raft core's own (Kafka's LeaderChangeMessage, appended by
    each new leader): replicated and counted, never handed to the state machine."""

    offset: int
    epoch: int
    data: bytes
    control: bool = False

    @property
    def size(self) -> int:
        return len(self.data) + ENTRY_OVERHEAD


# What one entry costs against a fetch's max_bytes beyond its data (a record's header).
ENTRY_OVERHEAD = 16


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """Kafka's OffsetAndEpoch: an end offset (exclusive) and the epoch of the entry before it.

    A snapshot id is one: the snapshot holds the state of every entry before ``offset``."""

    offset: int
    epoch: int


SnapshotId = OffsetAndEpoch


class ReplicatedLog(Protocol):
    @property
    def log_start_offset(self) -> int:
        """The first offset the log holds (the latest snapshot's end, or 0)."""
        ...

    @property
    def end_offset(self) -> int:
        """The offset the next entry gets."""
        ...

    @property
    def flushed_end_offset(self) -> int:
        """The end of what ``flush`` made durable: what a crash keeps."""
        ...

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last entry (or of the latest snapshot when the log is empty; 0)."""
        ...

    def append_as_leader(self, data: Sequence[bytes], epoch: int, *, control: bool = False) -> int:
        """Append new entries at ``epoch``; the offset of the last."""
        ...

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        """Append entries fetched from the leader; the first is at ``end_offset``."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at or after ``offset`` (never below ``log_start_offset``)."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The end of ``epoch`` in this log: the largest epoch <= ``epoch`` it knows, and the
        offset where the next epoch starts (``end_offset`` for the last epoch)."""
        ...

    def read(self, start: int, max_bytes: int) -> list[Entry]:
        """Entries from ``start`` on, at least one when there is one, then up to max_bytes."""
        ...

    def entry_epoch(self, offset: int) -> int | None:
        """The epoch of the entry at ``offset``, or None when the log does not hold it."""
        ...

    def flush(self) -> None: ...

    def latest_snapshot_id(self) -> SnapshotId | None: ...

    def create_snapshot(self, snapshot_id: SnapshotId, state: bytes) -> None:
        """Store a snapshot of the state machine at ``snapshot_id`` (a committed offset)."""
        ...

    def delete_before_snapshot(self) -> None:
        """Delete the entries before the latest snapshot: ``log_start_offset`` moves there."""
        ...

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        """A chunk of a snapshot; KeyError when there is no such snapshot."""
        ...

    def snapshot_size(self, snapshot_id: SnapshotId) -> int: ...

    def install_snapshot(self, snapshot_id: SnapshotId, state: bytes) -> None:
        """Replace the whole log by a snapshot fetched from the leader: the log is then
        empty and starts at the snapshot's end; durable when this returns."""
        ...
