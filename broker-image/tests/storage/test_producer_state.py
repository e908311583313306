"""Idempotent producers: retries answered with their original offsets; sequence/epoch checks."""

import pytest
from strom.storage import log_config, producer_state

PID = 4242


def send(harness, log, sequence, epoch=0, count=1, producer_id=PID):
    values = [f"{sequence}+{i}".encode() for i in range(count)]
    return harness.append(
        log, values, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )


def test_a_retried_batch_is_not_written_twice(harness) -> None:
    log = harness.open()
    first = send(harness, log, 0, count=3)
    size = log.size_bytes
    retry = send(harness, log, 0, count=3)
    assert retry.duplicate
    assert (
        (retry.base_offset, retry.last_offset) == (first.base_offset, first.last_offset) == (0, 2)
    )
    assert log.size_bytes == size
    assert log.log_end_offset == 3
    assert send(harness, log, 3).base_offset == 3


def test_any_of_the_last_five_batches_is_recognised(harness) -> None:
    log = harness.open()
    for sequence in range(0, 12, 2):
        send(harness, log, sequence, count=2)  # offsets 0-1 ... 10-11; cache keeps seq 2..10
    retry = send(harness, log, 4, count=2)
    assert retry.duplicate
    assert (retry.base_offset, retry.last_offset) == (4, 5)
    with pytest.raises(producer_state.OutOfOrderSequenceError):
        send(harness, log, 0, count=2)  # too old to be recognised
    assert log.log_end_offset == 12


def test_a_sequence_gap_is_rejected_and_nothing_is_written(harness) -> None:
    log = harness.open()
    send(harness, log, 0)
    with pytest.raises(producer_state.OutOfOrderSequenceError):
        send(harness, log, 2)
    with pytest.raises(producer_state.OutOfOrderSequenceError):
        send(harness, log, 0, count=2)  # overlaps but is not the same batch
    assert log.log_end_offset == 1
    assert send(harness, log, 1).base_offset == 1


def test_an_older_epoch_is_fenced(harness) -> None:
    log = harness.open()
    send(harness, log, 0, epoch=3)
    with pytest.raises(producer_state.InvalidProducerEpochError):
        send(harness, log, 1, epoch=2)


def test_a_new_epoch_starts_at_sequence_zero(harness) -> None:
    log = harness.open()
    send(harness, log, 0, epoch=0)
    send(harness, log, 1, epoch=0)
    with pytest.raises(producer_state.OutOfOrderSequenceError):
        send(harness, log, 2, epoch=1)
    assert not send(harness, log, 0, epoch=1).duplicate
    # The old epoch's batches are forgotten: its retry is now fenced, not a duplicate.
    with pytest.raises(producer_state.InvalidProducerEpochError):
        send(harness, log, 0, epoch=0)


def test_an_unknown_producer_may_start_at_any_sequence(harness) -> None:
    log = harness.open()
    assert send(harness, log, 57).base_offset == 0
    assert send(harness, log, 58).base_offset == 1
    assert send(harness, log, 5, producer_id=PID + 1).base_offset == 2


def test_sequences_wrap_after_int32_max(harness) -> None:
    log = harness.open()
    send(harness, log, 2**31 - 2, count=2)  # last sequence 2**31 - 1
    assert not send(harness, log, 0).duplicate


def test_plain_producers_are_not_tracked(harness) -> None:
    log = harness.open()
    harness.append(log)
    harness.append(log)
    assert log.log_end_offset == 2
    assert log.producer_state.producers == {}


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_reopening(harness, clean) -> None:
    config = log_config.LogConfig(segment_bytes=400)
    log = harness.open(config)
    for sequence in range(6):
        send(harness, log, sequence)
    assert log.segment_count > 1
    if clean:
        log.close()
    else:
        harness.crash(log)  # a killed process: no close, no snapshot
        for snapshot in harness.directory.glob("*.snapshot"):
            snapshot.unlink()
    log = harness.open(config)
    retry = send(harness, log, 5)
    assert retry.duplicate and retry.base_offset == 5
    with pytest.raises(producer_state.OutOfOrderSequenceError):
        send(harness, log, 7)
    assert send(harness, log, 6).base_offset == 6


def test_snapshot_plus_tail_scan_rebuilds_state(harness) -> None:
    log = harness.open()
    send(harness, log, 0)
    log.roll()  # writes a snapshot at offset 1
    send(harness, log, 1)
    assert [p.name for p in harness.directory.glob("*.snapshot")] == [
        "00000000000000000001.snapshot"
    ]
    harness.crash(log)
    log = harness.open()
    assert send(harness, log, 1).duplicate
    assert send(harness, log, 0).duplicate


def test_truncation_forgets_the_removed_batches(harness) -> None:
    log = harness.open()
    send(harness, log, 0)
    send(harness, log, 1)
    log.truncate_to(1)
    retry = send(harness, log, 1)
    assert not retry.duplicate
    assert retry.base_offset == 1


def test_expired_producers_are_forgotten(harness, clock) -> None:
    config = log_config.LogConfig(producer_id_expiration_ms=1_000)
    log = harness.open(config)
    send(harness, log, 0)
    log.run_maintenance(clock.now_ms + 999)
    with pytest.raises(producer_state.OutOfOrderSequenceError):
        send(harness, log, 5)
    log.run_maintenance(clock.now_ms + 1_000)
    assert send(harness, log, 5).base_offset == 1
