"""Compaction of transactional data, Kafka's rules: an aborted transaction's records never
hide a committed value and are removed, nothing past the last stable offset is cleaned,
markers stay so read_committed reads of the cleaned log are what they were."""

from __future__ import annotations

from strom.records import batches, control
from strom.storage import cleaner, log_config, partition_log

HOUR_MS = 3_600_000
COMPACT = log_config.LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=1 << 20,
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=HOUR_MS,
    file_delete_delay_ms=0,
)
COMMIT = control.EndTxnMarker(commit=True, coordinator_epoch=0)
ABORT = control.EndTxnMarker(commit=False, coordinator_epoch=0)
PLAIN, P, Q = -1, 2001, 2002


def write(harness, log, records, producer_id=PLAIN, sequence=-1):
    """One batch of (key, value) records: plain, or transactional of `producer_id`."""
    now = harness.clock.now_ms
    buffer = bytearray(
        batches.build_batch(
            [(key, value, [], now) for key, value in records],
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=sequence,
            is_transactional=producer_id >= 0,
        )
    )
    headers = batches.validate_produce_batches(memoryview(buffer), 1 << 20)
    log.append(buffer, headers, 0, now)
    log.update_high_watermark(log.log_end_offset)


def end(harness, log, producer_id, marker):
    log.append_marker(producer_id, 0, marker, 0, harness.clock.now_ms)
    log.update_high_watermark(log.log_end_offset)


def committed_view(harness, log: partition_log.PartitionLog) -> dict[bytes | None, bytes | None]:
    """key -> latest value as a read_committed consumer sees the log (aborted skipped)."""
    read = log.read(log.log_start_offset, 1 << 30, log.last_stable_offset)
    aborted = log.aborted_transactions(log.log_start_offset, log.last_stable_offset)
    view: dict[bytes | None, bytes | None] = {}
    data = read.read_into_bytes()
    for header in batches.iter_batches(data):
        if header.is_control:
            continue
        if header.is_transactional and any(
            entry.producer_id == header.producer_id
            and entry.first_offset <= header.base_offset <= entry.last_offset
            for entry in aborted
        ):
            continue
        for record in batches.iter_records(data[header.position : header.position + header.size]):
            view[record.key] = record.value
    return view


def values_in_log(harness, log: partition_log.PartitionLog) -> list[bytes | None]:
    """Every data record's value in the log, aborted or not (markers left out)."""
    data = log.read(log.log_start_offset, 1 << 30, log.log_end_offset).read_into_bytes()
    return [
        record.value
        for header in batches.iter_batches(data)
        if not header.is_control
        for record in batches.iter_records(data[header.position : header.position + header.size])
    ]


def clean(log: partition_log.PartitionLog, now_ms: int) -> list[cleaner.CleanedGroup] | None:
    plan = log.plan_cleaning(now_ms)
    if plan is None:
        return None
    groups = cleaner.run_pass(plan, cleaner.Throttle(float("inf")))
    for group in groups:
        assert log.replace_segments(group)
    cleaner.finish(plan, groups, log.config.delete_retention_ms)
    return groups


def test_an_aborted_value_neither_hides_the_committed_one_nor_survives(harness) -> None:
    log = harness.open(COMPACT)
    write(harness, log, [(b"k", b"committed")], P, 0)  # 0
    end(harness, log, P, COMMIT)  # 1
    write(harness, log, [(b"k", b"aborted"), (b"j", b"aborted")], Q, 0)  # 2-3
    end(harness, log, Q, ABORT)  # 4
    write(harness, log, [(b"other", b"x")])  # 5
    log.roll()
    before = committed_view(harness, log)
    assert before == {b"k": b"committed", b"other": b"x"}
    assert clean(log, harness.clock.now_ms)
    assert committed_view(harness, log) == before
    in_log = values_in_log(harness, log)
    assert b"aborted" not in in_log, "an aborted transaction's records are removed"
    assert b"committed" in in_log
    # Markers stay (the transaction indexes are unchanged), and a reopened log agrees.
    log.close()
    reopened = harness.open(COMPACT)
    assert committed_view(harness, reopened) == before
    assert [e.producer_id for e in reopened.aborted_transactions(0, 6)] == [Q]


def test_an_open_transaction_is_not_cleaned_until_it_ends(harness) -> None:
    log = harness.open(COMPACT)
    write(harness, log, [(b"k", b"v1")])  # 0
    write(harness, log, [(b"k", b"open")], P, 0)  # 1: open, so the LSO is 1
    log.roll()
    write(harness, log, [(b"other", b"x")])  # 2
    log.roll()
    assert log.last_stable_offset == 1
    # The segment holding the open transaction is past the LSO: nothing to clean yet
    # (cleaning it could let a value that may still abort remove v1).
    assert log.plan_cleaning(harness.clock.now_ms) is None
    assert values_in_log(harness, log) == [b"v1", b"open", b"x"]
    end(harness, log, P, ABORT)
    log.roll()
    assert clean(log, harness.clock.now_ms)
    assert committed_view(harness, log) == {b"k": b"v1", b"other": b"x"}
    assert values_in_log(harness, log) == [b"v1", b"x"]


def test_a_committed_transaction_compacts_like_plain_records(harness) -> None:
    log = harness.open(COMPACT)
    write(harness, log, [(b"k", b"old")])  # 0
    write(harness, log, [(b"k", b"new")], P, 0)  # 1
    end(harness, log, P, COMMIT)  # 2
    log.roll()
    assert clean(log, harness.clock.now_ms)
    assert committed_view(harness, log) == {b"k": b"new"}
    assert values_in_log(harness, log) == [b"new"]
