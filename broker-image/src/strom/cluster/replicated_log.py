"""The Raft core's `ReplicatedLog` on a storage partition log: ``__cluster_metadata-0``.

As in Kafka's KafkaMetadataLog: one record batch per append, stamped with the entry's
leader epoch (so the storage layer's leader-epoch cache answers `end_offset_for_epoch`),
the core's control entries as control batches (key: version 0, type LEADER_CHANGE; the
batches are those ``raft_wire`` puts in a Fetch response), the
recovery point as what survives a crash (`flushed_end_offset`), and snapshots as files
``<end offset>-<epoch>.checkpoint`` beside the segments, written atomically. The storage
high watermark is kept at the log end: the Raft core keeps its own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from strom.cluster import metadata_log, raft_wire
from strom.cluster.raft import log as raft_log
from strom.records import batches
from strom.storage import checkpoints, log_config, partition_log

SNAPSHOT_SUFFIX = ".checkpoint"
_SNAPSHOT_NAME = re.compile(r"(?P<offset>\d{20})-(?P<epoch>\d{10})\.checkpoint")

Entry = raft_log.Entry
OffsetAndEpoch = raft_log.OffsetAndEpoch
SnapshotId = raft_log.SnapshotId


class LogContractError(Exception):
    """A caller broke the log's contract (a bug in the Raft core)."""


def snapshot_file_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"


class PartitionReplicatedLog:
    def __init__(
        self,
        directory: Path,
        now_ms: Callable[[], int],
        config: log_config.LogConfig = metadata_log.LOG_CONFIG,
    ) -> None:
        self.directory = directory
        self._now_ms = now_ms
        self._log = partition_log.PartitionLog.open(directory, config, now_ms)
        self._log.update_high_watermark(self._log.log_end_offset)
        found = self._snapshot_ids()
        self._latest_snapshot: SnapshotId | None = max(found) if found else None

    def close(self) -> None:
        self._log.close()

    # Offsets ---------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def flushed_end_offset(self) -> int:
        return self._log.recovery_point

    @property
    def last_fetched_epoch(self) -> int:
        if self.end_offset > self.log_start_offset:
            return max(self._log.leader_epoch_cache.latest_epoch, 0)
        return self._latest_snapshot.epoch if self._latest_snapshot else 0

    # Appending -------------------------------------------------------------------------

    def append_as_leader(self, data: Sequence[bytes], epoch: int, *, control: bool = False) -> int:
        if epoch < self.last_fetched_epoch:
            raise LogContractError(f"append at epoch {epoch} after {self.last_fetched_epoch}")
        end = self.end_offset
        self._append([Entry(end + i, epoch, item, control) for i, item in enumerate(data)])
        return self.end_offset - 1

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        if entries[0].offset != self.end_offset:
            raise LogContractError(
                f"append at {entries[0].offset}, the log ends at {self.end_offset}"
            )
        if entries[0].epoch < self.last_fetched_epoch:
            raise LogContractError(f"epoch {entries[0].epoch} after {self.last_fetched_epoch}")
        self._append(entries)

    def _append(self, entries: Sequence[Entry]) -> None:
        """Entries from the log end on, as the wire carries them: a batch per run of one
        epoch and kind, each appended with its epoch (the epoch cache learns it)."""
        data = bytearray(raft_wire.encode_entries(entries))
        now = self._now_ms()
        for header in batches.iter_batches(data):
            batch = data[header.position : header.position + header.size]
            checked = batches.validate_produce_batches(memoryview(batch), len(batch))
            self._log.append(batch, checked, leader_epoch=header.partition_leader_epoch, now_ms=now)
        self._log.update_high_watermark(self._log.log_end_offset)

    def truncate_to(self, offset: int) -> None:
        start = self.log_start_offset
        if offset < start:
            raise LogContractError(f"truncate to {offset} below the log start")
        if offset >= self.end_offset:
            return
        base = self._batch_base(offset)
        if base >= offset:
            self._log.truncate_to(offset)
            return
        # Inside a batch (storage keeps or drops batches whole): keep its entries before
        # `offset` and write them again as a batch of their own.
        kept = [entry for entry in self.read(max(base, start), 1 << 30) if entry.offset < offset]
        if base < start:
            self._log.truncate_fully_and_start_at(start)
        else:
            self._log.truncate_to(base)
        self._append(kept)

    def _batch_base(self, offset: int) -> int:
        read = self._log.read(offset, 1, max_offset=self.end_offset)
        for header in batches.iter_batches(read.read_into_bytes()):
            return int(header.base_offset)
        return offset

    def flush(self) -> None:
        self._log.flush()

    # Reading ---------------------------------------------------------------------------

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The end of ``epoch`` in this log (see ``raft_log.ReplicatedLog``); the log's
        start inside the snapshot's epoch counts as that epoch's start."""
        start = self.log_start_offset
        epochs = [(e.epoch, e.start_offset) for e in self._log.leader_epoch_cache.entries]
        if not epochs or epochs[0][1] > start:
            base = self._latest_snapshot.epoch if self._latest_snapshot else 0
            if not epochs or epochs[0][0] > base:
                epochs = [(base, start), *epochs]
        if epoch >= epochs[-1][0]:
            return OffsetAndEpoch(self.end_offset, epochs[-1][0])
        index = next(i for i, (known, _) in enumerate(epochs) if known > epoch)
        if index > 0:
            return OffsetAndEpoch(epochs[index][1], epochs[index - 1][0])
        found = OffsetAndEpoch(epochs[0][1], epoch)
        snapshot = self._latest_snapshot
        if snapshot is not None and found.offset == snapshot.offset and epoch > snapshot.epoch:
            # Older than the log's first epoch: the snapshot at the log start answers, as
            # Kafka's KafkaMetadataLog.endOffsetForEpoch does.
            return snapshot
        return found

    def read(self, start: int, max_bytes: int) -> list[Entry]:
        if start < self.log_start_offset or start > self.end_offset:
            raise LogContractError(f"read at {start} outside the log")
        if start == self.end_offset:
            return []
        read = self._log.read(start, max(max_bytes, 1), max_offset=self.end_offset)
        data = read.read_into_bytes()
        result: list[Entry] = []
        size = 0
        for header in batches.iter_batches(data):
            batch = memoryview(data)[header.position : header.position + header.size]
            for record in batches.iter_records(batch):
                if record.offset < start:
                    continue
                entry = Entry(
                    record.offset,
                    header.partition_leader_epoch,
                    record.value or b"",
                    header.is_control,
                )
                size += entry.size
                if result and size > max_bytes:
                    return result
                result.append(entry)
        return result

    def entry_epoch(self, offset: int) -> int | None:
        if not self.log_start_offset <= offset < self.end_offset:
            return None
        read = self._log.read(offset, 1, max_offset=self.end_offset)
        data = read.read_into_bytes()
        for header in batches.iter_batches(data):
            if header.base_offset <= offset <= header.last_offset:
                return int(header.partition_leader_epoch)
        return None

    # Snapshots -------------------------------------------------------------------------

    def _snapshot_ids(self) -> list[SnapshotId]:
        found = []
        for name in os.listdir(self.directory):
            match = _SNAPSHOT_NAME.fullmatch(name)
            if match is not None:
                found.append(SnapshotId(int(match["offset"]), int(match["epoch"])))
        return found

    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._latest_snapshot

    def create_snapshot(self, snapshot_id: SnapshotId, state: bytes) -> None:
        if not self.log_start_offset <= snapshot_id.offset <= self.end_offset:
            raise LogContractError(f"snapshot at {snapshot_id.offset} outside the log")
        if self._latest_snapshot is not None and snapshot_id <= self._latest_snapshot:
            return
        checkpoints.write_atomically(self.directory / snapshot_file_name(snapshot_id), state)
        self._latest_snapshot = snapshot_id

    def delete_before_snapshot(self) -> None:
        snapshot = self._latest_snapshot
        if snapshot is None:
            return
        if snapshot.offset > self.end_offset:
            self._log.truncate_fully_and_start_at(snapshot.offset)
        elif snapshot.offset > self.log_start_offset:
            self._log.update_high_watermark(self.end_offset)
            self._log.delete_records_before(snapshot.offset)
        for older in self._snapshot_ids():
            if older < snapshot:
                (self.directory / snapshot_file_name(older)).unlink(missing_ok=True)

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        path = self.directory / snapshot_file_name(snapshot_id)
        try:
            with path.open("rb") as handle:
                return os.pread(handle.fileno(), max_bytes, position)
        except FileNotFoundError:
            raise KeyError(snapshot_id) from None

    def snapshot_size(self, snapshot_id: SnapshotId) -> int:
        try:
            return (self.directory / snapshot_file_name(snapshot_id)).stat().st_size
        except FileNotFoundError:
            raise KeyError(snapshot_id) from None

    def install_snapshot(self, snapshot_id: SnapshotId, state: bytes) -> None:
        checkpoints.write_atomically(self.directory / snapshot_file_name(snapshot_id), state)
        self._log.truncate_fully_and_start_at(snapshot_id.offset)
        self._log.flush()
        self._latest_snapshot = snapshot_id
        for older in self._snapshot_ids():
            if older != snapshot_id:
                (self.directory / snapshot_file_name(older)).unlink(missing_ok=True)
