"""The leader-epoch checkpoint and truncation (what replication will build on)."""

import pytest
from strom.storage import leader_epochs, log_config, partition_log


def test_each_new_leader_epoch_is_checkpointed_with_its_start_offset(harness) -> None:
    log = harness.open()
    harness.append(log, [b"a", b"b"], leader_epoch=0)
    harness.append(log, [b"c"], leader_epoch=0)
    harness.append(log, [b"d"], leader_epoch=3)
    expected = [leader_epochs.EpochEntry(0, 0), leader_epochs.EpochEntry(3, 3)]
    assert log.leader_epoch_cache.entries == expected
    assert (harness.directory / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 3\n"
    assert log.leader_epoch_cache.end_offset_for(0, log.log_end_offset) == (0, 3)
    assert log.leader_epoch_cache.end_offset_for(2, log.log_end_offset) == (0, 3)
    assert log.leader_epoch_cache.end_offset_for(3, log.log_end_offset) == (3, 4)
    assert log.leader_epoch_cache.end_offset_for(4, log.log_end_offset) == (-1, -1)
    log.close()
    assert harness.open().leader_epoch_cache.entries == expected


def test_an_unreadable_epoch_checkpoint_is_rebuilt_from_the_batches(harness) -> None:
    log = harness.open()
    harness.append(log, leader_epoch=1)
    harness.append(log, leader_epoch=2)
    log.close()
    (harness.directory / "leader-epoch-checkpoint").write_text("garbage")
    assert harness.open().leader_epoch_cache.entries == [
        leader_epochs.EpochEntry(1, 0),
        leader_epochs.EpochEntry(2, 1),
    ]


def test_truncate_removes_records_indexes_and_epochs_above_the_offset(harness) -> None:
    log = harness.open(log_config.LogConfig(segment_bytes=600, index_interval_bytes=100))
    for epoch in range(4):
        for _ in range(3):
            harness.append(log, [b"x".ljust(80, b"."), b"y"], leader_epoch=epoch)
    assert log.segment_count > 3
    log.truncate_to(13)  # inside the batch 12-13: that batch goes too, as in Kafka
    assert log.log_end_offset == 13
    assert log.high_watermark == 13
    assert harness.offsets_read(log, 0) == list(range(12))
    assert [e.epoch for e in log.leader_epoch_cache.entries] == [0, 1, 2]
    assert harness.append(log, [b"z"], leader_epoch=5).base_offset == 13
    log.close()
    reopened = harness.open(log_config.LogConfig(segment_bytes=600, index_interval_bytes=100))
    assert harness.offsets_read(reopened, 0) == [*range(12), 13]


def test_truncate_below_the_first_segment_restarts_the_log_there(harness) -> None:
    log = harness.open()
    harness.fill(log, 5)
    log.delete_records_before(3)
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (0, 0, 1)
    assert harness.append(log).base_offset == 0


def test_a_closed_log_refuses_work(harness) -> None:
    log = harness.open()
    log.close()
    with pytest.raises(partition_log.LogClosedError):
        log.read(0, 1, 1)


def test_epoch_cache_follows_kafka_assignment_rules(tmp_path) -> None:
    cache = leader_epochs.LeaderEpochCache(tmp_path / "leader-epoch-checkpoint", [])
    cache.assign(1, 0)
    cache.assign(1, 5)  # same epoch, later offset: nothing new
    cache.assign(2, 10)
    cache.assign(4, 20)
    cache.assign(3, 15)  # contradicts epoch 4 at 20, which is dropped
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(1, 0), (2, 10), (3, 15)]
    cache.truncate_from_start(12)
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(2, 12), (3, 15)]
    cache.truncate_from_end(15)
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(2, 12)]
    loaded = leader_epochs.LeaderEpochCache.load(tmp_path / "leader-epoch-checkpoint")
    assert loaded is not None and loaded.entries == cache.entries
