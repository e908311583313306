"""Opening a log after a crash: torn tails, corrupt batches, lost or broken indexes."""

import os

from strom.records import batches
from strom.storage import log_config

SEGMENTS_OF_5 = log_config.LogConfig(segment_bytes=5 * 180, index_interval_bytes=200)


def active_log_file(harness):
    return sorted(harness.directory.glob("*.log"))[-1]


def fill_and_crash(harness, batch_count=12):
    log = harness.open(SEGMENTS_OF_5)
    harness.fill(log, batch_count, size=100)
    assert log.segment_count > 1
    end = log.log_end_offset
    harness.crash(log)
    return end


def test_garbage_after_the_last_batch_is_cut_off(harness) -> None:
    end = fill_and_crash(harness)
    path = active_log_file(harness)
    good_size = path.stat().st_size
    with open(path, "ab") as file:
        file.write(os.urandom(300))
    log = harness.open(SEGMENTS_OF_5)
    assert path.stat().st_size == good_size
    assert log.log_end_offset == end
    assert harness.offsets_read(log, 0) == list(range(end))
    assert harness.append(log).base_offset == end


def test_a_torn_last_batch_is_removed_and_its_offsets_reused(harness) -> None:
    end = fill_and_crash(harness)
    path = active_log_file(harness)
    os.truncate(path, path.stat().st_size - 30)
    log = harness.open(SEGMENTS_OF_5)
    assert log.log_end_offset == end - 1
    assert harness.offsets_read(log, 0) == list(range(end - 1))
    assert harness.append(log, [b"again"]).base_offset == end - 1
    assert harness.offsets_read(log, 0) == list(range(end))


def test_a_zero_filled_tail_is_removed(harness) -> None:
    end = fill_and_crash(harness)
    with open(active_log_file(harness), "ab") as file:
        file.write(bytes(4096))  # what a filesystem may show after a power cut
    log = harness.open(SEGMENTS_OF_5)
    assert log.log_end_offset == end


def test_a_batch_failing_its_crc_truncates_the_log_there(harness) -> None:
    log = harness.open()
    harness.fill(log, 6)
    data = log.read(0, 1 << 20, log.high_watermark).read_into_bytes()
    third = list(batches.iter_batches(data))[3]
    harness.crash(log)
    path = active_log_file(harness)
    with open(path, "r+b") as file:
        file.seek(third.position + third.size - 1)
        file.write(b"\x00" if data[third.position + third.size - 1] else b"\x01")
    log = harness.open()
    assert log.log_end_offset == 3
    assert path.stat().st_size == third.position


def test_a_torn_earlier_segment_drops_the_segments_after_it(harness) -> None:
    fill_and_crash(harness)
    first = sorted(harness.directory.glob("*.log"))[0]
    os.truncate(first, first.stat().st_size - 10)
    log = harness.open(SEGMENTS_OF_5)
    assert log.segment_count == 1
    assert harness.offsets_read(log, 0) == list(range(log.log_end_offset))
    assert log.log_end_offset == 4


def test_missing_and_broken_indexes_are_rebuilt(harness) -> None:
    log = harness.open(log_config.LogConfig(index_interval_bytes=200))
    harness.fill(log, 20)
    end = log.log_end_offset
    log.close()
    index = harness.directory / "00000000000000000000.index"
    time_index = harness.directory / "00000000000000000000.timeindex"
    expected_index, expected_time_index = index.read_bytes(), time_index.read_bytes()
    assert expected_index
    index.unlink()
    time_index.write_bytes(b"\x00" * 7)
    log = harness.open(log_config.LogConfig(index_interval_bytes=200))
    assert index.read_bytes() == expected_index
    assert time_index.read_bytes() == expected_time_index
    for offset in range(end):
        assert offset in harness.offsets_read(log, offset, max_bytes=1)


def test_an_index_pointing_past_the_log_is_rebuilt(harness) -> None:
    log = harness.open(log_config.LogConfig(index_interval_bytes=200))
    harness.fill(log, 20)
    end = log.log_end_offset
    log.close()
    index = harness.directory / "00000000000000000000.index"
    index.write_bytes(index.read_bytes() + (30).to_bytes(4, "big") + (10**8).to_bytes(4, "big"))
    log = harness.open(log_config.LogConfig(index_interval_bytes=200))
    assert harness.offsets_read(log, 0) == list(range(end))


def test_after_a_clean_close_nothing_is_rescanned(harness) -> None:
    log = harness.open()
    harness.fill(log, 5)
    log.close()
    assert (harness.directory / "clean-shutdown").exists()
    # Corrupt a payload byte: a recovery scan would cut the log here, a clean open trusts it.
    path = active_log_file(harness)
    with open(path, "r+b") as file:
        file.seek(path.stat().st_size - 1)
        file.write(b"!")
    log = harness.open()
    assert not (harness.directory / "clean-shutdown").exists()
    assert log.recovery_point == log.log_end_offset == 5
    assert log.high_watermark == 5


def test_unflushed_segments_are_rescanned_but_flushed_ones_are_not(harness, clock) -> None:
    log = harness.open(SEGMENTS_OF_5)
    harness.fill(log, 12)
    log.run_maintenance(clock.now_ms)  # fsyncs the rolled segments
    assert log.recovery_point == log.segment_base_offsets[-1]
    harness.crash(log)
    first = sorted(harness.directory.glob("*.log"))[0]
    with open(first, "r+b") as file:
        file.seek(first.stat().st_size - 1)
        file.write(b"!")  # below the recovery point: trusted, not rescanned
    log = harness.open(SEGMENTS_OF_5)
    assert log.log_end_offset == 12
