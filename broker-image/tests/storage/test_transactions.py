"""Transactions in a partition log: the last stable offset, markers, the aborted index,
and how they survive reopening, crashes, truncation and replication (Kafka's rules:
ProducerStateManager, ProducerAppendInfo, UnifiedLog.append, TransactionIndex)."""

import json

import pytest
from strom.records import batches, control
from strom.storage import log_config, partition_log, producer_state, txn_index

A, B, C = 1001, 1002, 1003
COMMIT = control.EndTxnMarker(commit=True, coordinator_epoch=0)
ABORT = control.EndTxnMarker(commit=False, coordinator_epoch=0)


def send_txn(harness, log, producer_id, sequence, count=1, epoch=0, *, hw=True):
    """One transactional batch; the high watermark follows the log end unless ``hw`` is
    False (a leader waiting for its followers)."""
    ts = harness.clock.now_ms
    batch = bytearray(
        batches.build_batch(
            [(None, f"{producer_id}:{sequence + i}".encode(), [], ts) for i in range(count)],
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence,
            is_transactional=True,
        )
    )
    headers = batches.validate_produce_batches(memoryview(batch), 1 << 20)
    result = log.append(batch, headers, 0, ts)
    if hw:
        log.update_high_watermark(log.log_end_offset)
    return result


def end_txn(harness, log, producer_id, marker, epoch=0, *, hw=True):
    result = log.append_marker(producer_id, epoch, marker, 0, harness.clock.now_ms)
    if hw:
        log.update_high_watermark(log.log_end_offset)
    return result


def entries(log):
    return log.aborted_transactions(0, log.log_end_offset)


def test_the_lso_stops_at_the_first_open_transaction(harness) -> None:
    log = harness.open()
    send_txn(harness, log, A, 0, count=2)  # 0-1
    harness.append(log, [b"plain"])  # 2
    send_txn(harness, log, B, 0)  # 3
    assert log.high_watermark == 4
    assert log.last_stable_offset == 0
    assert end_txn(harness, log, A, COMMIT).base_offset == 4
    assert log.last_stable_offset == 3  # B's transaction is still open
    assert end_txn(harness, log, B, ABORT).base_offset == 5
    assert log.last_stable_offset == log.high_watermark == 6
    assert entries(log) == [txn_index.AbortedTxn(B, 3, 5, 6)]


def test_an_abort_is_indexed_with_the_lso_it_leaves(harness) -> None:
    log = harness.open()
    send_txn(harness, log, A, 0)  # 0
    send_txn(harness, log, B, 0)  # 1
    end_txn(harness, log, A, ABORT)  # 2: B still open from 1
    end_txn(harness, log, B, ABORT)  # 3
    assert entries(log) == [
        txn_index.AbortedTxn(A, 0, 2, 1),
        txn_index.AbortedTxn(B, 1, 3, 4),
    ]
    path = harness.directory / "00000000000000000000.txnindex"
    assert path.stat().st_size == 2 * txn_index.ENTRY_SIZE
    assert txn_index.decode(path.read_bytes()) == entries(log)


def test_the_lso_waits_for_the_marker_to_be_replicated(harness) -> None:
    log = harness.open()
    send_txn(harness, log, A, 0, count=3, hw=False)  # 0-2
    end_txn(harness, log, A, COMMIT, hw=False)  # 3
    assert log.last_stable_offset == 0  # the high watermark is still 0
    log.update_high_watermark(3)  # the data is replicated, the marker not yet
    assert log.last_stable_offset == 0
    log.update_high_watermark(4)
    assert log.last_stable_offset == 4


def test_a_plain_batch_inside_a_transaction_is_refused(harness) -> None:
    log = harness.open()
    send_txn(harness, log, A, 0)
    with pytest.raises(producer_state.InvalidTxnStateError):
        harness.append(log, [b"x"], producer_id=A, producer_epoch=0, base_sequence=1)
    assert log.log_end_offset == 1


def test_markers_from_an_old_epoch_or_coordinator_are_refused(harness) -> None:
    log = harness.open()
    send_txn(harness, log, A, 0, epoch=3)
    end_txn(harness, log, A, control.EndTxnMarker(True, coordinator_epoch=5), epoch=3)
    with pytest.raises(producer_state.InvalidProducerEpochError):
        end_txn(harness, log, A, control.EndTxnMarker(True, coordinator_epoch=5), epoch=2)
    with pytest.raises(producer_state.CoordinatorFencedError):
        end_txn(harness, log, A, control.EndTxnMarker(False, coordinator_epoch=4), epoch=3)
    assert log.log_end_offset == 2
    with pytest.raises(producer_state.InvalidProducerEpochError):
        send_txn(harness, log, A, 1, epoch=2)


def test_a_retried_marker_changes_nothing_but_the_log_end(harness) -> None:
    log = harness.open()
    send_txn(harness, log, A, 0)
    end_txn(harness, log, A, ABORT)
    end_txn(harness, log, A, ABORT)  # the coordinator resent it after a lost answer
    assert log.log_end_offset == 3
    assert log.last_stable_offset == 3
    assert entries(log) == [txn_index.AbortedTxn(A, 0, 1, 2)]


def test_a_fencing_marker_with_a_new_epoch_resets_the_sequences(harness) -> None:
    log = harness.open()
    send_txn(harness, log, A, 0, count=2, epoch=0)
    end_txn(harness, log, A, ABORT, epoch=1)  # the coordinator fenced epoch 0
    with pytest.raises(producer_state.OutOfOrderSequenceError):
        send_txn(harness, log, A, 2, epoch=1)
    assert send_txn(harness, log, A, 0, epoch=1).base_offset == 3


def test_aborted_transactions_of_a_range_span_segments(harness) -> None:
    log = harness.open()
    send_txn(harness, log, A, 0)  # 0
    log.roll()
    send_txn(harness, log, B, 0)  # 1
    end_txn(harness, log, A, ABORT)  # 2, indexed in segment 1
    log.roll()
    end_txn(harness, log, B, ABORT)  # 3, indexed in segment 3
    send_txn(harness, log, C, 0)  # 4
    end_txn(harness, log, C, ABORT)  # 5
    a, b, c = (
        txn_index.AbortedTxn(A, 0, 2, 1),
        txn_index.AbortedTxn(B, 1, 3, 4),
        txn_index.AbortedTxn(C, 4, 5, 6),
    )
    assert log.aborted_transactions(0, 6) == [a, b, c]
    assert log.aborted_transactions(0, 1) == [a]  # B starts at the bound
    assert log.aborted_transactions(3, 4) == [b]  # A ended before 3
    assert log.aborted_transactions(4, 6) == [c]


def test_an_open_transaction_survives_a_clean_reopen(harness) -> None:
    log = harness.open()
    send_txn(harness, log, A, 0)
    send_txn(harness, log, B, 0)
    end_txn(harness, log, B, ABORT)
    log.close()
    log = harness.open()
    assert log.last_stable_offset == 0
    assert entries(log) == [txn_index.AbortedTxn(B, 1, 2, 0)]
    with pytest.raises(producer_state.InvalidTxnStateError):
        harness.append(log, [b"x"], producer_id=A, producer_epoch=0, base_sequence=1)
    end_txn(harness, log, A, COMMIT)
    assert log.last_stable_offset == 4


def test_a_crash_rebuilds_open_transactions_and_the_index_from_the_log(harness) -> None:
    config = log_config.LogConfig(segment_bytes=300)
    log = harness.open(config)
    for sequence in range(3):
        send_txn(harness, log, A, sequence)
        send_txn(harness, log, B, sequence)
    end_txn(harness, log, A, ABORT)
    send_txn(harness, log, C, 0)
    end_txn(harness, log, C, COMMIT)
    assert log.segment_count > 2
    want_lso, want_entries = log.last_stable_offset, entries(log)
    assert want_lso == 1 and len(want_entries) == 1
    harness.crash(log)
    for leftover in [
        *harness.directory.glob("*.snapshot"),
        *harness.directory.glob("*.txnindex"),
    ]:
        leftover.unlink()
    log = harness.open(config)
    assert log.last_stable_offset == want_lso
    assert entries(log) == want_entries
    assert log.producer_state.ongoing_transactions == {1: B}


def test_truncating_through_a_marker_reopens_its_transaction(harness) -> None:
    log = harness.open()
    send_txn(harness, log, A, 0)
    marker = end_txn(harness, log, A, ABORT)
    assert entries(log)
    log.truncate_to(marker.base_offset)
    assert entries(log) == []
    assert log.producer_state.ongoing_transactions == {0: A}
    assert log.last_stable_offset == 0
    end_txn(harness, log, A, COMMIT)
    assert log.last_stable_offset == 2 and entries(log) == []


def test_a_producer_with_an_open_transaction_does_not_expire(harness, clock) -> None:
    log = harness.open(log_config.LogConfig(producer_id_expiration_ms=1_000))
    send_txn(harness, log, A, 0)
    harness.append(log, [b"x"], producer_id=B, producer_epoch=0, base_sequence=0)
    clock.advance(5_000)
    log.run_maintenance(clock.now_ms)
    assert set(log.producer_state.producers) == {A}
    end_txn(harness, log, A, COMMIT)
    clock.advance(5_000)
    log.run_maintenance(clock.now_ms)
    assert log.producer_state.producers == {}


def test_a_follower_replays_markers_into_the_same_state(harness, tmp_path) -> None:
    leader = harness.open()
    send_txn(harness, leader, A, 0, count=2)
    send_txn(harness, leader, B, 0)
    end_txn(harness, leader, A, ABORT)
    send_txn(harness, leader, C, 0)
    copied = leader.read(0, 1 << 20, leader.log_end_offset).read_into_bytes()
    follower = partition_log.PartitionLog.open(
        tmp_path / "follower-0", log_config.LogConfig(), harness.clock
    )
    follower.append_as_follower(copied)
    follower.update_high_watermark(follower.log_end_offset)
    assert follower.aborted_transactions(0, 10) == entries(leader)
    assert follower.producer_state.ongoing_transactions == {2: B, 4: C}
    assert follower.last_stable_offset == leader.last_stable_offset == 2
    follower.close()


def test_a_version_1_snapshot_still_loads(harness) -> None:
    log = harness.open()
    harness.append(log, [b"x"], producer_id=A, producer_epoch=0, base_sequence=0)
    log.close()
    (snapshot,) = harness.directory.glob("*.snapshot")
    document = json.loads(snapshot.read_bytes())
    document["version"] = 1
    for producer in document["producers"]:
        del producer["coordinator_epoch"], producer["current_txn_first_offset"]
    snapshot.write_text(json.dumps(document))
    log = harness.open()
    assert harness.append(log, [b"x"], producer_id=A, producer_epoch=0, base_sequence=0).duplicate
    assert log.last_stable_offset == log.high_watermark


def test_a_marker_batch_reads_back(harness) -> None:
    data = control.build_end_txn_marker(
        producer_id=A, producer_epoch=7, commit=False, coordinator_epoch=9, timestamp_ms=5
    )
    header = batches.BatchHeader.parse(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (A, 7, -1)
    assert batches.has_valid_crc(data, header)
    assert control.parse_end_txn_marker(data) == control.EndTxnMarker(False, 9)
    (record,) = batches.iter_records(data)
    assert record.key == bytes.fromhex("00000000") and record.value == bytes.fromhex("000000000009")


def test_aborted_transactions_interleaved_past_the_bound_are_all_found(harness) -> None:
    """The chaos test's case: A opens at 0, B at 1; A's abort marker (2) lies past a read
    bound of 2, and B's abort (3) too. Both overlap the read [1, 2): the search may stop
    only at an entry whose last stable offset reaches the bound (Kafka's rule), not at
    the first marker past it."""
    log = harness.open()
    send_txn(harness, log, A, 0)  # 0
    send_txn(harness, log, B, 0)  # 1
    end_txn(harness, log, A, ABORT)  # 2: B still open, so its LSO is 1
    end_txn(harness, log, B, ABORT)  # 3
    assert log.aborted_transactions(1, 2) == [
        txn_index.AbortedTxn(A, 0, 2, 1),
        txn_index.AbortedTxn(B, 1, 3, 4),
    ]


def verified_send(harness, log, producer_id, sequence, guard):
    ts = harness.clock.now_ms
    batch = bytearray(
        batches.build_batch(
            [(None, b"v", [], ts)],
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=sequence,
            is_transactional=True,
        )
    )
    headers = batches.validate_produce_batches(memoryview(batch), 1 << 20)
    return log.append(batch, headers, 0, ts, guard, verify=True)


def test_a_batch_opening_a_transaction_needs_its_verification(harness) -> None:
    """KIP-890 part 1: a client's transactional batch that would open a transaction is
    taken only with the producer's current guard; one in an open transaction needs none."""
    log = harness.open()
    producers = log.producer_state
    with pytest.raises(producer_state.InvalidTxnStateError):
        verified_send(harness, log, A, 0, None)
    guard = producers.start_verification(A)
    assert verified_send(harness, log, A, 0, guard).base_offset == 0
    assert not producers.needs_verification(A)
    assert verified_send(harness, log, A, 1, None).base_offset == 1  # already open


def test_a_marker_between_verification_and_append_voids_the_guard(harness) -> None:
    """The race KIP-890 closes: the coordinator verified the transaction, then its abort
    marker landed, then the late batch came: it must not open a new transaction."""
    log = harness.open()
    guard = log.producer_state.start_verification(A)
    end_txn(harness, log, A, ABORT)  # the coordinator ended the transaction meanwhile
    with pytest.raises(producer_state.InvalidTxnStateError):
        verified_send(harness, log, A, 0, guard)
    assert log.producer_state.ongoing_transactions == {}
