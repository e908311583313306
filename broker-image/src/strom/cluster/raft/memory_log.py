"""`ReplicatedLog` in memory, for the simulation test: a crash keeps the flushed prefix.

``crash()`` returns the log a restarted node finds: the entries up to the last ``flush``
and the snapshots (which are durable when created or installed), nothing else.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from strom.cluster.raft import log as raft_log

Entry = raft_log.Entry
OffsetAndEpoch = raft_log.OffsetAndEpoch
SnapshotId = raft_log.SnapshotId


class LogError(Exception):
    """A caller broke the log's contract (a bug in the Raft core)."""


class MemoryLog:
    def __init__(self) -> None:
        self._entries: list[Entry] = []
        self._start = 0
        self._flushed = 0
        # the leader-epoch cache: (epoch, start offset), epochs increasing
        self._epochs: list[tuple[int, int]] = []
        self._snapshots: dict[SnapshotId, bytes] = {}
        self._latest_snapshot: SnapshotId | None = None

    def crash(self) -> MemoryLog:
        """The log after a crash and restart: unflushed entries are gone."""
        restarted = MemoryLog()
        restarted._start = self._start
        restarted._snapshots = dict(self._snapshots)
        restarted._latest_snapshot = self._latest_snapshot
        restarted._epochs = list(self._epochs)
        restarted._entries = list(self._entries)
        restarted.truncate_to(max(self._flushed, self._start))
        restarted._flushed = restarted.end_offset
        return restarted

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed

    @property
    def last_fetched_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        return self._latest_snapshot.epoch if self._latest_snapshot else 0

    def entries(self) -> list[Entry]:
        """All entries the log holds (for tests)."""
        return list(self._entries)

    def append_as_leader(self, data: Sequence[bytes], epoch: int, *, control: bool = False) -> int:
        if epoch < self.last_fetched_epoch:
            raise LogError(f"append at epoch {epoch} after epoch {self.last_fetched_epoch}")
        offset = self.end_offset
        self._note_epoch(epoch, offset)
        for item in data:
            self._entries.append(Entry(offset, epoch, item, control))
            offset += 1
        return offset - 1

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.offset != self.end_offset:
                raise LogError(f"append at {entry.offset}, the log ends at {self.end_offset}")
            if entry.epoch < self.last_fetched_epoch:
                raise LogError(f"epoch {entry.epoch} after epoch {self.last_fetched_epoch}")
            self._note_epoch(entry.epoch, entry.offset)
            self._entries.append(entry)

    def _note_epoch(self, epoch: int, offset: int) -> None:
        if not self._epochs or self._epochs[-1][0] < epoch:
            self._epochs.append((epoch, offset))

    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise LogError(f"truncate to {offset} below the log start {self._start}")
        if offset >= self.end_offset:
            return
        del self._entries[offset - self._start :]
        self._flushed = min(self._flushed, offset)
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        epochs = self._epochs
        if not epochs or epochs[0][1] > self._start:
            # the log starts inside the snapshot's epoch
            base = self._latest_snapshot.epoch if self._latest_snapshot else 0
            if not epochs or epochs[0][0] > base:
                epochs = [(base, self._start), *epochs]
        if epoch >= epochs[-1][0]:
            return OffsetAndEpoch(self.end_offset, epochs[-1][0])
        index = bisect.bisect_right(epochs, epoch, key=_epoch_of)  # the first epoch > requested
        if index > 0:
            return OffsetAndEpoch(epochs[index][1], epochs[index - 1][0])
        snapshot = self._latest_snapshot
        if snapshot is not None and epochs[0][1] == snapshot.offset and epoch > snapshot.epoch:
            # Older than the log's first epoch: the snapshot at the log start answers, as
            # Kafka's KafkaMetadataLog.endOffsetForEpoch does (and replicated_log).
            return snapshot
        return OffsetAndEpoch(epochs[0][1], epoch)

    def read(self, start: int, max_bytes: int) -> list[Entry]:
        if start < self._start or start > self.end_offset:
            raise LogError(f"read at {start} outside [{self._start}, {self.end_offset}]")
        result: list[Entry] = []
        size = 0
        for entry in self._entries[start - self._start :]:
            size += entry.size
            if result and size > max_bytes:
                break
            result.append(entry)
        return result

    def entry_epoch(self, offset: int) -> int | None:
        if self._start <= offset < self.end_offset:
            return self._entries[offset - self._start].epoch
        return None

    def flush(self) -> None:
        self._flushed = self.end_offset

    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._latest_snapshot

    def create_snapshot(self, snapshot_id: SnapshotId, state: bytes) -> None:
        if not self._start <= snapshot_id.offset <= self.end_offset:
            raise LogError(f"snapshot at {snapshot_id.offset} outside the log")
        if self._latest_snapshot is not None and snapshot_id <= self._latest_snapshot:
            return
        self._snapshots[snapshot_id] = bytes(state)
        self._latest_snapshot = snapshot_id

    def delete_before_snapshot(self) -> None:
        snapshot = self._latest_snapshot
        if snapshot is None or snapshot.offset <= self._start:
            return
        del self._entries[: snapshot.offset - self._start]
        self._start = snapshot.offset
        self._flushed = max(self._flushed, self._start)
        earlier = [item for item in self._epochs if item[1] <= self._start]
        later = [item for item in self._epochs if item[1] > self._start]
        self._epochs = ([(earlier[-1][0], self._start)] if earlier else []) + later
        # older snapshots are no longer needed
        self._snapshots = {snapshot: self._snapshots[snapshot]}

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        return self._snapshots[snapshot_id][position : position + max_bytes]

    def snapshot_size(self, snapshot_id: SnapshotId) -> int:
        return len(self._snapshots[snapshot_id])

    def install_snapshot(self, snapshot_id: SnapshotId, state: bytes) -> None:
        self._entries = []
        self._start = snapshot_id.offset
        self._flushed = self._start
        self._epochs = []
        self._snapshots = {snapshot_id: bytes(state)}
        self._latest_snapshot = snapshot_id


def _epoch_of(item: tuple[int, int]) -> int:
    return item[0]
