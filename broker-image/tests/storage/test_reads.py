"""Appending and fetching: offsets, the sparse index, byte limits, timestamps."""

import os

import pytest
from strom.records import batches
from strom.storage import log_config, partition_log

SMALL_SEGMENTS = log_config.LogConfig(segment_bytes=1_000, index_interval_bytes=250)


def test_append_assigns_contiguous_offsets_and_stamps_the_leader_epoch(harness) -> None:
    log = harness.open()
    first = harness.append(log, [b"a", b"b", b"c"], leader_epoch=7)
    second = harness.append(log, [b"d"], leader_epoch=7)
    assert (first.base_offset, first.last_offset, first.duplicate) == (0, 2, False)
    assert (second.base_offset, second.last_offset) == (3, 3)
    assert first.log_append_time_ms == -1
    assert first.log_start_offset == 0
    assert log.log_end_offset == 4
    data = log.read(0, 1 << 20, log.high_watermark).read_into_bytes()
    stored = list(batches.iter_batches(data))
    assert [h.base_offset for h in stored] == [0, 3]
    assert {h.partition_leader_epoch for h in stored} == {7}
    assert all(batches.has_valid_crc(data, h) for h in stored)
    assert [r.value for r in harness.decoded(log.read(0, 1 << 20, 4))] == [b"a", b"b", b"c", b"d"]


def test_fetch_from_inside_a_batch_returns_the_whole_batch(harness) -> None:
    log = harness.open()
    for _ in range(3):
        harness.append(log, [b"x", b"y", b"z"])  # offsets 0-2, 3-5, 6-8
    assert harness.offsets_read(log, 3) == list(range(3, 9))
    assert harness.offsets_read(log, 4) == list(range(3, 9))
    assert harness.offsets_read(log, 8) == [6, 7, 8]
    assert harness.offsets_read(log, 9) == []  # at the log end: nothing yet, no error
    with pytest.raises(partition_log.OffsetOutOfRangeError):
        log.read(10, 1 << 20, log.high_watermark)
    with pytest.raises(partition_log.OffsetOutOfRangeError):
        log.read(-1, 1 << 20, log.high_watermark)


def test_every_offset_is_found_across_segments_with_a_sparse_index(harness) -> None:
    log = harness.open(SMALL_SEGMENTS)
    for number in range(40):
        harness.append(
            log, [f"{number}-{i}".encode().ljust(40, b".") for i in range(number % 3 + 1)]
        )
    assert log.segment_count > 5
    assert any(p.stat().st_size > 0 for p in harness.directory.glob("*.index"))
    end = log.log_end_offset
    for offset in range(end):
        found = harness.offsets_read(log, offset, max_bytes=1)  # one batch: the one holding it
        assert found[0] <= offset <= found[-1]
        assert found == list(range(found[0], found[-1] + 1))
    assert harness.offsets_read(log, 0) == list(range(end))


def test_max_bytes_limits_whole_batches_and_ranges_coalesce(harness) -> None:
    log = harness.open(SMALL_SEGMENTS)
    harness.fill(log, 12)
    batch_size = log.size_bytes // 12
    bases = harness.batch_bases_read(log, 0, max_bytes=batch_size * 2 + batch_size // 2)
    assert bases == [0, 1]
    result = log.read(0, 1 << 20, log.high_watermark)
    assert len(result.ranges) == log.segment_count  # one range per segment, batches coalesced
    assert result.total_bytes == log.size_bytes
    assert all(r.file.mode == "rb" for r in result.ranges)


def test_an_oversized_first_batch_is_returned_whole(harness) -> None:
    log = harness.open()
    harness.append(log, [b"x" * 5_000])
    harness.append(log, [b"small"])
    assert harness.batch_bases_read(log, 0, max_bytes=100) == [0]
    assert log.read(0, 100, log.high_watermark, min_one_batch=False).total_bytes == 0


def test_reads_stop_before_batches_reaching_the_high_watermark(harness) -> None:
    log = harness.open()
    for _ in range(3):
        harness.append(log, [b"x", b"y", b"z"])
    log.update_high_watermark(6)
    assert harness.offsets_read(log, 0) == list(range(6))
    assert harness.offsets_read(log, 6) == []
    # A bound inside a batch holds back the whole batch (batches are atomic).
    assert [r.offset for r in harness.decoded(log.read(0, 1 << 20, 7))] == list(range(6))


def test_log_append_time_topics_stamp_the_broker_time(harness, clock) -> None:
    log = harness.open(log_config.LogConfig(message_timestamp_type="LogAppendTime"))
    result = harness.append(log, [b"a", b"b"], timestamp=5)
    assert result.log_append_time_ms == clock.now_ms
    records = harness.decoded(log.read(0, 1 << 20, log.high_watermark))
    assert [r.timestamp for r in records] == [clock.now_ms, clock.now_ms]


def test_offset_for_timestamp_finds_the_first_record_at_or_after(harness) -> None:
    log = harness.open(SMALL_SEGMENTS)
    for number in range(30):
        harness.append(
            log, [b"a".ljust(60, b"."), b"b".ljust(60, b".")], timestamp=1_000 + number * 10
        )
    assert log.segment_count > 3
    # Offsets 2n and 2n+1 have timestamp 1000 + 10n.
    assert log.offset_for_timestamp(0) == (0, 1_000)
    assert log.offset_for_timestamp(1_000) == (0, 1_000)
    assert log.offset_for_timestamp(1_001) == (2, 1_010)
    assert log.offset_for_timestamp(1_150) == (30, 1_150)
    assert log.offset_for_timestamp(1_290) == (58, 1_290)
    assert log.offset_for_timestamp(1_291) is None
    assert log.max_timestamp_and_offset() == (1_290, 58)


def test_offset_for_timestamp_decodes_records_within_a_batch(harness) -> None:
    log = harness.open()
    batch = [(None, b"v", [], ts) for ts in (100, 300, 200, 400)]
    data = bytearray(batches.build_batch(batch))
    log.append(data, batches.validate_produce_batches(memoryview(data), 1 << 20), 0, 0)
    log.update_high_watermark(log.log_end_offset)
    assert log.offset_for_timestamp(150) == (1, 300)
    assert log.offset_for_timestamp(350) == (3, 400)
    assert log.max_timestamp_and_offset() == (400, 3)


def test_read_ranges_serve_sendfile_style_reads(harness) -> None:
    log = harness.open()
    harness.append(log, [b"hello"])
    (file_range,) = log.read(0, 1 << 20, log.high_watermark).ranges
    raw = os.pread(file_range.file.fileno(), file_range.length, file_range.position)
    assert batches.BatchHeader.parse(raw).size == file_range.length


def test_append_rejects_a_read_only_or_mismatched_buffer(harness) -> None:
    log = harness.open()
    data = batches.build_batch([(None, b"v", [], 1)])
    headers = batches.validate_produce_batches(memoryview(data), 1 << 20)
    with pytest.raises(TypeError):
        log.append(memoryview(data), headers, 0, 0)  # bytes cannot be patched
    with pytest.raises(ValueError):
        log.append(bytearray(data + data), headers, 0, 0)
    assert log.log_end_offset == 0
    assert log.size_bytes == 0
