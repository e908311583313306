"""The Raft ReplicatedLog on a storage partition log behaves as the in-memory log the Raft
simulation verified: the same operations give the same answers (a differential test over
random operation sequences), and what was flushed survives a reopen."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from strom.cluster import replicated_log
from strom.cluster.raft import log as raft_log
from strom.cluster.raft import memory_log

NOW = 1_700_000_000_000
SnapshotId = raft_log.SnapshotId


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[replicated_log.PartitionReplicatedLog]:
    opened = replicated_log.PartitionReplicatedLog(tmp_path / "__cluster_metadata-0", lambda: NOW)
    yield opened
    opened.close()


def observe(log: Any) -> tuple[Any, ...]:
    start, end = log.log_start_offset, log.end_offset
    return (
        start,
        end,
        log.last_fetched_epoch,
        log.latest_snapshot_id(),
        [(e.offset, e.epoch, e.data, e.control) for e in log.read(start, 1 << 20)],
        [log.entry_epoch(offset) for offset in range(start - 1, end + 1)],
        # every epoch, those below the log's first included: the snapshot at the log start
        # answers for them, as Kafka's KafkaMetadataLog does
        [log.end_offset_for_epoch(epoch) for epoch in range(16)],
    )


def floor(log: Any) -> int:
    latest = log.latest_snapshot_id()
    return max(log.log_start_offset, latest.offset if latest else 0)


@pytest.mark.parametrize("seed", range(40))
def test_the_stored_log_answers_as_the_memory_log_does(
    stored: replicated_log.PartitionReplicatedLog, seed: int
) -> None:
    rng = random.Random(seed)
    memory = memory_log.MemoryLog()
    epoch = 1
    for step in range(60):
        choice = rng.random()
        if choice < 0.35:
            data = [f"{seed}-{step}-{i}".encode() for i in range(rng.randint(1, 4))]
            control = rng.random() < 0.1
            if control:
                data = [b""]
            for log in (memory, stored):
                log.append_as_leader(data, epoch, control=control)
        elif choice < 0.5:
            epoch += rng.randint(1, 2)
        elif choice < 0.6:
            entries = [
                raft_log.Entry(memory.end_offset + i, epoch, f"f{step}-{i}".encode())
                for i in range(rng.randint(1, 3))
            ]
            for log in (memory, stored):
                log.append_as_follower(entries)
        elif choice < 0.7 and memory.end_offset > floor(memory):
            # Raft never truncates below its latest snapshot (a committed offset).
            offset = rng.randint(floor(memory), memory.end_offset)
            for log in (memory, stored):
                log.truncate_to(offset)
        elif choice < 0.8 and memory.end_offset > floor(memory):
            offset = rng.randint(floor(memory) + 1, memory.end_offset)
            snapshot = SnapshotId(offset, memory.entry_epoch(offset - 1) or 0)
            delete = rng.random() < 0.7
            for log in (memory, stored):
                log.create_snapshot(snapshot, f"state-{step}".encode())
                if delete:
                    log.delete_before_snapshot()
        elif choice < 0.85:
            snapshot = SnapshotId(memory.end_offset + rng.randint(0, 5), epoch)
            for log in (memory, stored):
                log.install_snapshot(snapshot, f"installed-{step}".encode())
        else:
            for log in (memory, stored):
                log.flush()
        assert observe(stored) == observe(memory), f"seed {seed} step {step}"
        latest = memory.latest_snapshot_id()
        if latest is not None:
            assert stored.read_snapshot(latest, 1, 4) == memory.read_snapshot(latest, 1, 4)
            assert stored.snapshot_size(latest) == memory.snapshot_size(latest)


def test_flushed_entries_and_snapshots_survive_a_reopen(tmp_path: Path) -> None:
    directory = tmp_path / "__cluster_metadata-0"
    log = replicated_log.PartitionReplicatedLog(directory, lambda: NOW)
    log.append_as_leader([b"a", b"b"], 1)
    log.append_as_leader([b""], 2, control=True)
    log.append_as_leader([b"c"], 2)
    log.create_snapshot(SnapshotId(2, 1), b"two")
    log.delete_before_snapshot()
    log.flush()
    assert log.flushed_end_offset == 4
    log.close()
    again = replicated_log.PartitionReplicatedLog(directory, lambda: NOW)
    try:
        assert (again.log_start_offset, again.end_offset) == (2, 4)
        assert again.latest_snapshot_id() == SnapshotId(2, 1)
        assert [(e.offset, e.epoch, e.control) for e in again.read(2, 1 << 20)] == [
            (2, 2, True),
            (3, 2, False),
        ]
        assert again.read_snapshot(SnapshotId(2, 1), 0, 10) == b"two"
        with pytest.raises(KeyError):
            again.read_snapshot(SnapshotId(1, 1), 0, 10)
    finally:
        again.close()
