"""The in-memory ReplicatedLog of the simulation: the epoch cache, crashes, snapshots."""

from __future__ import annotations

import pytest
from strom.cluster.raft import log as raft_log
from strom.cluster.raft import memory_log, replication

OffsetAndEpoch = raft_log.OffsetAndEpoch


def epochs_log() -> memory_log.MemoryLog:
    log = memory_log.MemoryLog()
    log.append_as_leader([b"a", b"b"], epoch=1)  # 0, 1
    log.append_as_leader([b"c"], epoch=3)  # 2
    log.append_as_leader([b"d", b"e"], epoch=4)  # 3, 4
    return log


def test_the_epoch_cache_answers_kafkas_end_offset_for_epoch() -> None:
    log = epochs_log()
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)  # no epoch 2: the one before
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(3, 3)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(5, 4)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    log.truncate_to(3)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(3, 3)
    assert log.last_fetched_epoch == 3


def test_a_crash_keeps_the_flushed_prefix_only() -> None:
    log = epochs_log()
    log.flush()
    log.append_as_leader([b"f"], epoch=5)
    restarted = log.crash()
    assert restarted.end_offset == 5 and restarted.last_fetched_epoch == 4
    log.truncate_to(2)
    assert log.flushed_end_offset == 2
    assert log.crash().end_offset == 2


def test_a_snapshot_moves_the_log_start_and_answers_for_its_epoch() -> None:
    log = epochs_log()
    log.create_snapshot(raft_log.SnapshotId(4, 4), b"state")
    log.delete_before_snapshot()
    assert (log.log_start_offset, log.end_offset) == (4, 5)
    assert [entry.data for entry in log.read(4, 100)] == [b"e"]
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(5, 4)
    assert log.read_snapshot(raft_log.SnapshotId(4, 4), 1, 3) == b"tat"
    # a follower behind the start, or whose log diverges before it, needs the snapshot
    snapshot = replication.NeedsSnapshot(raft_log.SnapshotId(4, 4))
    assert replication.validate_fetch(log, 2, 3) == snapshot
    assert replication.validate_fetch(log, 4, 3) == snapshot
    assert replication.validate_fetch(log, 4, 4) == replication.Valid()
    log.truncate_to(4)
    assert log.last_fetched_epoch == 4 and log.end_offset == 4
    with pytest.raises(memory_log.LogError):
        log.truncate_to(3)


def test_an_installed_snapshot_replaces_the_log() -> None:
    log = epochs_log()
    log.install_snapshot(raft_log.SnapshotId(10, 6), b"state")
    assert (log.log_start_offset, log.end_offset, log.flushed_end_offset) == (10, 10, 10)
    assert log.last_fetched_epoch == 6
    assert log.crash().latest_snapshot_id() == raft_log.SnapshotId(10, 6)
    log.append_as_follower([raft_log.Entry(10, 7, b"x")])
    assert log.end_offset_for_epoch(6) == OffsetAndEpoch(10, 6)
    with pytest.raises(memory_log.LogError):
        log.append_as_follower([raft_log.Entry(12, 7, b"gap")])


def test_below_the_first_epoch_the_snapshot_at_the_log_start_answers() -> None:
    # Kafka's KafkaMetadataLog.endOffsetForEpoch: an epoch between the snapshot's and
    # the log's first is answered with the snapshot id, not the asked epoch.
    log = memory_log.MemoryLog()
    log.install_snapshot(raft_log.SnapshotId(10, 2), b"state")
    log.append_as_follower([raft_log.Entry(10, 5, b"x"), raft_log.Entry(11, 5, b"y")])
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(10, 2)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(10, 2)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(10, 2)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(12, 5)
