"""Segment roll (size, time, explicit), retention (time, size), DeleteRecords, delayed deletes."""

import pytest
from strom.storage import log_config, partition_log

HOUR_MS = 3_600_000


def segment_files(directory, suffix=".log"):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(suffix))


def test_segments_roll_when_the_next_batch_would_pass_segment_bytes(harness) -> None:
    probe = harness.open()
    harness.append(probe, [b"0".ljust(100, b".")])
    batch_size = probe.size_bytes
    probe.delete()
    log = harness.open(log_config.LogConfig(segment_bytes=batch_size * 3))
    harness.fill(log, 7)
    assert log.segment_base_offsets == [0, 3, 6]
    assert segment_files(harness.directory) == [
        "00000000000000000000.log",
        "00000000000000000003.log",
        "00000000000000000006.log",
    ]
    sizes = [(harness.directory / name).stat().st_size for name in segment_files(harness.directory)]
    assert sizes == [batch_size * 3, batch_size * 3, batch_size]
    assert harness.offsets_read(log, 0) == list(range(7))


def test_a_batch_larger_than_a_segment_gets_a_segment_of_its_own(harness) -> None:
    log = harness.open(log_config.LogConfig(segment_bytes=500))
    harness.append(log, [b"small"])
    harness.append(log, [b"x" * 2_000])
    harness.append(log, [b"small"])
    assert log.segment_base_offsets == [0, 1, 2]


def test_segments_roll_by_time_from_the_first_batch_timestamp(harness, clock) -> None:
    log = harness.open(log_config.LogConfig(segment_ms=HOUR_MS))
    start = clock.now_ms
    harness.append(log, timestamp=start)
    harness.append(log, timestamp=start + HOUR_MS)
    assert log.segment_count == 1
    harness.append(log, timestamp=start + HOUR_MS + 1)
    assert log.segment_base_offsets == [0, 2]


def test_a_quiet_active_segment_rolls_in_maintenance(harness, clock) -> None:
    log = harness.open(log_config.LogConfig(segment_ms=HOUR_MS))
    harness.append(log)
    log.run_maintenance(clock.now_ms + HOUR_MS)
    assert log.segment_count == 1
    log.run_maintenance(clock.now_ms + HOUR_MS + 1)
    assert log.segment_base_offsets == [0, 1]
    log.roll()  # the new active segment is empty: no-op
    assert log.segment_count == 2


def test_time_retention_deletes_old_segments_and_raises_the_log_start(harness, clock) -> None:
    log = harness.open(log_config.LogConfig(retention_ms=10 * HOUR_MS))
    old = clock.now_ms - 20 * HOUR_MS
    harness.append(log, [b"a", b"b"], timestamp=old)
    log.roll()
    harness.append(log, [b"c"], timestamp=old + HOUR_MS)
    log.roll()
    harness.append(log, [b"d"], timestamp=clock.now_ms)
    assert log.apply_retention(clock.now_ms) == 2
    assert log.segment_base_offsets == [3]
    assert log.log_start_offset == 3
    with pytest.raises(partition_log.OffsetOutOfRangeError):
        log.read(0, 1 << 20, log.high_watermark)
    assert harness.offsets_read(log, 3) == [3]
    assert log.apply_retention(clock.now_ms) == 0


def test_time_retention_of_everything_rolls_and_keeps_the_log_end(harness, clock) -> None:
    log = harness.open(log_config.LogConfig(retention_ms=HOUR_MS))
    harness.append(log, [b"a", b"b"])
    clock.advance(HOUR_MS + 1)
    assert log.apply_retention(clock.now_ms) == 1
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (2, 2, 1)
    assert harness.offsets_read(log, 2) == []
    assert harness.append(log).base_offset == 2


def test_an_empty_cleanup_policy_keeps_every_segment(harness, clock) -> None:
    """Kafka 4: cleanup.policy "" means infinite retention, whatever retention.ms says."""
    log = harness.open(log_config.LogConfig(retention_ms=HOUR_MS, cleanup_policy=()))
    assert not log.config.deletes_old_segments and not log.config.compacts
    harness.append(log, [b"a", b"b"])
    log.roll()
    harness.append(log, [b"c"])
    clock.advance(2 * HOUR_MS)
    assert log.apply_retention(clock.now_ms) == 0
    assert (log.log_start_offset, log.segment_count) == (0, 2)


def test_retention_never_deletes_above_the_high_watermark(harness, clock) -> None:
    log = harness.open(log_config.LogConfig(retention_ms=HOUR_MS))
    harness.append(log)
    log.roll()
    harness.append(log)
    log.update_high_watermark(0)
    clock.advance(2 * HOUR_MS)
    assert log.apply_retention(clock.now_ms) == 0
    log.update_high_watermark(1)
    assert log.apply_retention(clock.now_ms) == 1


def test_size_retention_keeps_at_least_retention_bytes(harness) -> None:
    probe = harness.open()
    harness.append(probe, [b"0".ljust(100, b".")])
    batch_size = probe.size_bytes
    probe.delete()
    config = log_config.LogConfig(segment_bytes=batch_size * 2, retention_bytes=batch_size * 5)
    log = harness.open(config)
    harness.fill(log, 11)  # segments of 2 batches: [0,1] [2,3] [4,5] [6,7] [8,9] [10]
    assert log.apply_retention(0) == 3
    assert log.segment_base_offsets == [6, 8, 10]
    assert log.size_bytes == batch_size * 5
    assert log.log_start_offset == 6


def test_compacted_topics_are_not_deleted_by_retention(harness, clock) -> None:
    log = harness.open(log_config.LogConfig(retention_ms=1, cleanup_policy=("compact",)))
    harness.append(log, timestamp=0)
    log.roll()
    assert log.apply_retention(clock.now_ms) == 0


def test_deleted_segments_stay_readable_until_the_delete_delay(harness, clock) -> None:
    log = harness.open(log_config.LogConfig(retention_ms=HOUR_MS, file_delete_delay_ms=60_000))
    harness.append(log, [b"in flight"], timestamp=0)
    log.roll()
    harness.append(log)
    in_flight = log.read(0, 1 << 20, log.high_watermark)
    assert log.apply_retention(clock.now_ms) == 1
    # No .index: one small batch makes no offset index entry, and index files are created
    # with their first entry.
    assert segment_files(harness.directory, ".deleted") == [
        "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted",
    ]
    assert [r.value for r in harness.decoded(in_flight)] == [b"in flight", b"value"]
    assert log.delete_expired_files(clock.now_ms + 59_999) == 0
    assert log.delete_expired_files(clock.now_ms + 60_000) == 1
    assert segment_files(harness.directory, ".deleted") == []


def test_delete_records_moves_the_log_start_and_removes_whole_segments(harness) -> None:
    log = harness.open()
    for _ in range(3):
        harness.append(log, [b"a", b"b", b"c"])
        log.roll()
    harness.append(log, [b"d"])  # segments start at 0, 3, 6, 9
    assert log.delete_records_before(4) == 4
    assert log.segment_base_offsets == [3, 6, 9]
    with pytest.raises(partition_log.OffsetOutOfRangeError):
        log.read(3, 1 << 20, log.high_watermark)
    # Reading from the new start returns its whole batch; the consumer skips offset 3.
    assert harness.offsets_read(log, 4) == list(range(3, 10))
    assert log.delete_records_before(2) == 4  # never moves backwards
    with pytest.raises(partition_log.OffsetOutOfRangeError):
        log.delete_records_before(log.high_watermark + 1)
    assert log.delete_records_before(log.high_watermark) == 10
    assert log.segment_base_offsets == [9]
    log.close()
    reopened = harness.open()
    assert reopened.log_start_offset == 10
    assert harness.offsets_read(reopened, 10) == []


def test_segments_roll_when_an_index_is_full(harness) -> None:
    # index.interval.bytes 0: an offset-index entry for every batch after the first, and
    # 24 bytes hold three: four batches per segment. (Equal timestamps add no time entries.)
    log = harness.open(log_config.LogConfig(index_interval_bytes=0, segment_index_bytes=24))
    harness.fill(log, 9)
    assert log.segment_base_offsets == [0, 4, 8]
    assert harness.offsets_read(log, 0) == list(range(9))
