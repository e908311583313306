"""Log compaction on real segment files: latest value per key, offsets kept, tombstones,
compressed batches, the dirty ratio and lags, and a crash at every step of a swap."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from strom.records import batches, compression
from strom.storage import cleaner, log_config, partition_log

HOUR_MS = 3_600_000
COMPACT = log_config.LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=2048,
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=HOUR_MS,
    file_delete_delay_ms=0,
)


class Crash(Exception):
    """Stands for the process dying at a step of the swap."""


def append_keyed(
    harness,
    log: partition_log.PartitionLog,
    records: Sequence[tuple[bytes, bytes | None]],
    codec: int = compression.NONE,
    producer_id: int = -1,
    base_sequence: int = -1,
) -> None:
    now = harness.clock.now_ms
    plain = batches.build_batch(
        [(key, value, [], now) for key, value in records],
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
    )
    data = plain
    if codec != compression.NONE:
        header = batches.BatchHeader.parse(plain)
        header.attributes |= codec
        data = batches.rebuild_batch(header, list(batches.iter_raw_records(plain)))
    buffer = bytearray(data)
    headers = batches.validate_produce_batches(memoryview(buffer), 1 << 20)
    log.append(buffer, headers, 0, now)
    log.update_high_watermark(log.log_end_offset)


def all_records(harness, log: partition_log.PartitionLog) -> list[batches.Record]:
    return harness.decoded(log.read(log.log_start_offset, 1 << 30, log.high_watermark))


def latest_view(records: Sequence[batches.Record]) -> dict[bytes | None, tuple[int, bytes | None]]:
    """key -> (offset, value) of the last record of each key."""
    view: dict[bytes | None, tuple[int, bytes | None]] = {}
    for record in records:
        view[record.key] = (record.offset, record.value)
    return view


def clean(
    log: partition_log.PartitionLog, now_ms: int, fault=None
) -> list[cleaner.CleanedGroup] | None:
    plan = log.plan_cleaning(now_ms)
    if plan is None:
        return None
    groups = cleaner.run_pass(plan, cleaner.Throttle(float("inf")), fault)
    for group in groups:
        assert log.replace_segments(group, fault)
    cleaner.finish(plan, groups, log.config.delete_retention_ms)
    return groups


def fill_overwrites(harness, log, rounds: int = 30, keys: int = 5) -> None:
    codecs = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4]
    for number in range(rounds):
        codec = codecs[number % len(codecs)]
        append_keyed(
            harness,
            log,
            [(f"key-{(number + i) % keys}".encode(), f"v{number}-{i}".encode()) for i in range(3)],
            codec,
        )
    log.roll()


def test_keeps_the_latest_value_per_key_at_the_same_offsets(harness) -> None:
    log = harness.open(COMPACT)
    fill_overwrites(harness, log)
    before = all_records(harness, log)
    expected = latest_view(before)
    size_before = log.size_bytes
    groups = clean(log, harness.clock.now_ms)
    assert groups, "a dirty compacted log is cleaned"
    after = all_records(harness, log)
    assert latest_view(after) == expected
    assert len(after) == len(expected), "exactly one record per key below the active segment"
    assert {(r.offset, r.value) for r in after} <= {(r.offset, r.value) for r in before}
    assert log.size_bytes < size_before
    # Compressed batches stay compressed with their codec.
    data = log.read(log.log_start_offset, 1 << 30, log.high_watermark).read_into_bytes()
    codecs = {h.compression for h in batches.iter_batches(data)}
    assert codecs - {compression.NONE}, "rebuilt batches keep their codec"
    # A reopened log holds the same.
    log.close()
    reopened = harness.open(COMPACT)
    assert latest_view(all_records(harness, reopened)) == expected


def test_active_segment_and_unclean_dirty_ratio_are_left_alone(harness) -> None:
    log = harness.open(log_config.LogConfig(cleanup_policy=("compact",), segment_bytes=1 << 20))
    for number in range(20):
        append_keyed(harness, log, [(b"same", str(number).encode())])
    assert log.plan_cleaning(harness.clock.now_ms) is None, "only the active segment"
    log.roll()
    # Default min.cleanable.dirty.ratio 0.5: everything is dirty, so it is due.
    assert log.plan_cleaning(harness.clock.now_ms) is not None
    clean(log, harness.clock.now_ms)
    assert [r.value for r in all_records(harness, log)] == [b"19"]
    # Nothing dirty left: not due again.
    assert log.plan_cleaning(harness.clock.now_ms) is None


def test_delete_policy_is_never_compacted(harness) -> None:
    log = harness.open(log_config.LogConfig(segment_bytes=1024))
    fill_overwrites(harness, log)
    assert log.plan_cleaning(harness.clock.now_ms) is None


def test_tombstones_go_after_delete_retention(harness) -> None:
    log = harness.open(COMPACT)
    append_keyed(harness, log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")])
    append_keyed(harness, log, [(b"a", None), (b"b", b"2")])
    log.roll()
    clean(log, harness.clock.now_ms)
    view = latest_view(all_records(harness, log))
    assert view == {b"a": (3, None), b"b": (4, b"2"), b"c": (2, b"1")}, "tombstone kept at first"
    harness.clock.advance(HOUR_MS)
    assert log.plan_cleaning(harness.clock.now_ms) is None, "nothing dirty, tombstone not due"
    harness.clock.advance(1)
    # No new data: the kept tombstone alone makes the log due once it may go.
    clean(log, harness.clock.now_ms)
    records = all_records(harness, log)
    assert latest_view(records) == {b"b": (4, b"2"), b"c": (2, b"1")}
    assert log.plan_cleaning(harness.clock.now_ms + HOUR_MS) is None


def test_an_emptied_last_batch_stays_so_readers_can_pass_the_gap(harness) -> None:
    log = harness.open(COMPACT)
    append_keyed(harness, log, [(b"a", b"1")])
    append_keyed(harness, log, [(b"a", None)], codec=compression.GZIP)
    log.roll()
    harness.clock.advance(HOUR_MS + 1)
    clean(log, harness.clock.now_ms)
    assert all_records(harness, log) == []
    data = log.read(0, 1 << 30, log.high_watermark).read_into_bytes()
    [header] = list(batches.iter_batches(data))
    assert (header.base_offset, header.last_offset, header.records_count) == (1, 1, 0)
    assert header.compression == compression.NONE
    assert batches.has_valid_crc(data, header)


def test_min_compaction_lag_protects_recent_segments(harness) -> None:
    config = log_config.LogConfig(
        cleanup_policy=("compact",), min_compaction_lag_ms=10_000, min_cleanable_dirty_ratio=0.01
    )
    log = harness.open(config)
    for number in range(5):
        append_keyed(harness, log, [(b"k", str(number).encode())])
    log.roll()
    assert log.plan_cleaning(harness.clock.now_ms) is None
    harness.clock.advance(10_001)
    assert log.plan_cleaning(harness.clock.now_ms) is not None


def test_max_compaction_lag_forces_a_pass_below_the_dirty_ratio(harness) -> None:
    config = log_config.LogConfig(
        cleanup_policy=("compact",),
        segment_bytes=1024,
        min_cleanable_dirty_ratio=0.99,
        max_compaction_lag_ms=60_000,
    )
    log = harness.open(config)
    fill_overwrites(harness, log, rounds=20)
    first = clean(log, harness.clock.now_ms)
    assert first is not None  # everything was dirty
    append_keyed(harness, log, [(b"key-1", b"late")])
    log.roll()
    assert log.plan_cleaning(harness.clock.now_ms) is None, "a little dirt: below the ratio"
    harness.clock.advance(60_001)
    assert log.plan_cleaning(harness.clock.now_ms) is not None, "too old to stay dirty"


def test_producer_fields_and_offset_span_survive_filtering(harness) -> None:
    log = harness.open(COMPACT)
    append_keyed(
        harness, log, [(b"x", b"1"), (b"y", b"1"), (b"x", b"2")], producer_id=7, base_sequence=0
    )
    append_keyed(harness, log, [(b"y", b"2")], producer_id=7, base_sequence=3)
    log.roll()
    clean(log, harness.clock.now_ms)
    data = log.read(0, 1 << 30, log.high_watermark).read_into_bytes()
    headers = list(batches.iter_batches(data))
    assert [(h.base_offset, h.last_offset, h.records_count) for h in headers] == [
        (0, 2, 1),
        (3, 3, 1),
    ]
    assert {(h.producer_id, h.base_sequence) for h in headers} == {(7, 0), (7, 3)}
    log.close()
    reopened = harness.open(COMPACT)
    entry = reopened.producer_state.producers.get(7)
    assert entry is not None and entry.last_sequence == 3


def test_cleaning_skips_segments_retention_removed_meanwhile(harness) -> None:
    log = harness.open(COMPACT)
    fill_overwrites(harness, log)
    plan = log.plan_cleaning(harness.clock.now_ms)
    assert plan is not None
    groups = cleaner.run_pass(plan, cleaner.Throttle(float("inf")))
    log.delete_records_before(log.high_watermark)  # the segments are gone now
    assert not log.replace_segments(groups[0])
    assert not groups[0].path.exists()


@pytest.mark.parametrize(
    "step", ["writing", "swap-renamed", "old-segment-retired", "swap-installed"]
)
def test_a_crash_at_any_step_of_a_swap_recovers_to_a_valid_log(harness, step: str) -> None:
    log = harness.open(COMPACT)
    fill_overwrites(harness, log, rounds=40)
    before = all_records(harness, log)
    expected = latest_view(before)
    end = log.log_end_offset

    def fault(at: str) -> None:
        if at == step:
            raise Crash(at)

    with pytest.raises(Crash):
        clean(log, harness.clock.now_ms, fault)
    harness.crash(log)
    recovered = harness.open(COMPACT)
    records = all_records(harness, recovered)
    assert recovered.log_end_offset == end
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets strictly increase"
    assert latest_view(records) == expected
    assert {(r.offset, r.value) for r in records} <= {(r.offset, r.value) for r in before}
    leftovers = [
        p.name
        for p in recovered.directory.iterdir()
        if p.name.endswith((cleaner.CLEANED_SUFFIX, cleaner.SWAP_SUFFIX))
    ]
    assert leftovers == []
    # And it cleans to the end afterwards.
    clean(recovered, harness.clock.now_ms)
    assert latest_view(all_records(harness, recovered)) == expected
    assert len(all_records(harness, recovered)) == len(expected)


def test_throttle_holds_the_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttle = cleaner.Throttle(1000.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(10):
        throttle.account(500)
    assert now[0] == pytest.approx(5.0)
