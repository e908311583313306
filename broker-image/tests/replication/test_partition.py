"""The partition as the only door to a log: appends as leader, reads bounded by the high
watermark, leader epochs fenced, min.insync.replicas and acks=all."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from strom.cluster import image as images
from strom.records import batches, compression
from strom.replication import outcomes
from strom.replication import partition as partitions
from strom.storage import log_config, partition_log, validator

NOW = 1_700_000_000_000
RULES = validator.Rules(max_message_bytes=1_000_000, compacted=False, compression_type="producer")


def batch(*values: bytes, key: bytes | None = b"k") -> bytearray:
    return bytearray(batches.build_batch([(key, value, [], NOW) for value in values]))


@pytest.fixture
def log(tmp_path: Path) -> Iterator[partition_log.PartitionLog]:
    opened = partition_log.PartitionLog.open(tmp_path / "t-0", log_config.LogConfig(), lambda: NOW)
    yield opened
    opened.close()


def leader(
    log: partition_log.PartitionLog, epoch: int = 3, isr: tuple[int, ...] = (1,)
) -> partitions.Partition:
    state = images.PartitionImage(
        0, (1, 2, 3), isr, leader=1, leader_epoch=epoch, partition_epoch=0
    )
    return partitions.Partition("t", 0, log, 1, state)


def append(
    partition: partitions.Partition,
    data: bytearray,
    *,
    acks: int = 1,
    rules: validator.Rules = RULES,
    min_isr: int = 1,
    transactional: bool = False,
) -> outcomes.AppendOutcome:
    return partition.append_as_leader(
        data,
        acks=acks,
        rules=rules,
        min_insync_replicas=min_isr,
        transactional=transactional,
        now_ms=NOW,
    )


def test_appends_assign_offsets_and_stamp_the_leader_epoch(log: partition_log.PartitionLog) -> None:
    partition = leader(log, epoch=7)
    first = append(partition, batch(b"a", b"b"))
    second = append(partition, batch(b"c"))
    assert (first.error, first.base_offset, first.last_offset, first.records) == (None, 0, 1, 2)
    assert (second.base_offset, second.last_offset) == (2, 2)
    assert partition.high_watermark == 3  # the ISR is the leader alone
    read = partition.read(0, 1 << 20)
    assert read.error is None and read.records is not None
    data = partition_log.ReadResult(list(read.records.ranges), read.size).read_into_bytes()
    headers = list(batches.iter_batches(data))
    assert [h.partition_leader_epoch for h in headers] == [7, 7]


def test_consumers_never_read_past_the_high_watermark(log: partition_log.PartitionLog) -> None:
    partition = leader(log)
    append(partition, batch(b"a"))
    append(partition, batch(b"b"))
    log.update_high_watermark(1)  # as if a follower had not caught up with offset 1
    consumer = partition.read(0, 1 << 20)
    assert consumer.high_watermark == 1 and consumer.size == len(batch(b"a"))
    assert partition.read(1, 1 << 20).records is None  # at the high watermark: nothing yet
    follower = partition.read(0, 1 << 20, follower=outcomes.FollowerFetch(2))
    assert follower.size == 2 * len(batch(b"a"))  # followers read to the log end


def test_leader_epochs_are_fenced(log: partition_log.PartitionLog) -> None:
    partition = leader(log, epoch=5)
    append(partition, batch(b"a"))
    assert (
        partition.read(0, 100, current_leader_epoch=4).error
        is outcomes.ReadError.FENCED_LEADER_EPOCH
    )
    assert (
        partition.read(0, 100, current_leader_epoch=6).error
        is outcomes.ReadError.UNKNOWN_LEADER_EPOCH
    )
    assert partition.read(0, 100, current_leader_epoch=5).error is None
    assert partition.read(0, 100, current_leader_epoch=-1).error is None
    assert partition.list_offset(outcomes.LATEST, 4).error is outcomes.ReadError.FENCED_LEADER_EPOCH
    listed = partition.list_offset(outcomes.LATEST, 5)
    assert (listed.offset, listed.leader_epoch) == (1, 5)


def test_reads_outside_the_log_are_out_of_range(log: partition_log.PartitionLog) -> None:
    partition = leader(log)
    append(partition, batch(b"a"))
    assert partition.read(5, 100).error is outcomes.ReadError.OFFSET_OUT_OF_RANGE
    assert partition.delete_records(5) == (outcomes.ReadError.OFFSET_OUT_OF_RANGE, -1)
    assert partition.delete_records(-1) == (None, 1)
    assert partition.read(0, 100).error is outcomes.ReadError.OFFSET_OUT_OF_RANGE


def test_min_insync_replicas_refuses_acks_all_only(log: partition_log.PartitionLog) -> None:
    partition = leader(log, isr=(1,))
    refused = append(partition, batch(b"a"), acks=-1, min_isr=2)
    assert refused.error is outcomes.AppendError.NOT_ENOUGH_REPLICAS
    assert "{1}" in (refused.message or "") and "min.isr requirement of 2" in (
        refused.message or ""
    )
    assert append(partition, batch(b"a"), acks=1, min_isr=2).error is None
    assert partition.log_end_offset == 1


async def test_acks_all_completes_when_the_high_watermark_covers_the_batch(
    log: partition_log.PartitionLog,
) -> None:
    partition = leader(log)
    outcome = append(partition, batch(b"a", b"b"), acks=-1)
    assert await partition.wait_committed(outcome) is None
    # A batch the high watermark has not reached yet waits for it.
    log.update_high_watermark(0)
    waiting = asyncio.ensure_future(partition.wait_committed(outcome))
    await asyncio.sleep(0)
    assert not waiting.done()
    append(partition, batch(b"c"))  # the leader-only ISR moves the high watermark on
    assert await asyncio.wait_for(waiting, 1) is None
    # A partition that goes away releases its waiters with NOT_LEADER.
    log.update_high_watermark(0)
    gone = asyncio.ensure_future(partition.wait_committed(outcome))
    await asyncio.sleep(0)
    partition.close_waiters()
    assert await asyncio.wait_for(gone, 1) is outcomes.AppendError.NOT_LEADER


@pytest.mark.parametrize(
    ("data", "rules", "transactional", "error"),
    [
        (bytearray(b"\x00" * 70), RULES, False, outcomes.AppendError.CORRUPT_MESSAGE),
        (
            batch(b"x" * 2000),
            validator.Rules(1000, False, "producer"),
            False,
            outcomes.AppendError.MESSAGE_TOO_LARGE,
        ),
        (
            batch(b"v", key=None),
            validator.Rules(1_000_000, True, "producer"),
            False,
            outcomes.AppendError.INVALID_RECORD,
        ),
        (
            bytearray(
                batches.build_batch(
                    [(b"k", b"v", [], NOW)],
                    producer_id=7,
                    producer_epoch=0,
                    base_sequence=0,
                    is_transactional=True,
                )
            ),
            RULES,
            False,
            outcomes.AppendError.TRANSACTIONAL_ID_REQUIRED,
        ),
    ],
    ids=["corrupt", "too-large", "compacted-without-key", "transactional-without-id"],
)
def test_invalid_batches_are_refused_and_nothing_is_appended(
    log: partition_log.PartitionLog,
    data: bytearray,
    rules: validator.Rules,
    transactional: bool,
    error: outcomes.AppendError,
) -> None:
    partition = leader(log)
    outcome = append(partition, data, rules=rules, transactional=transactional)
    assert outcome.error is error
    assert partition.log_end_offset == 0


def test_the_topic_codec_recompresses_the_batch(log: partition_log.PartitionLog) -> None:
    partition = leader(log)
    outcome = append(
        partition, batch(b"a" * 500, b"b" * 500), rules=validator.Rules(1_000_000, False, "gzip")
    )
    assert outcome.error is None and outcome.records == 2
    read = partition.read(0, 1 << 20)
    assert read.records is not None
    data = partition_log.ReadResult(list(read.records.ranges), read.size).read_into_bytes()
    (header,) = batches.iter_batches(data)
    assert header.compression == compression.GZIP


def test_a_replica_that_is_not_the_leader_refuses_clients(log: partition_log.PartitionLog) -> None:
    state = images.PartitionImage(0, (2, 1), (2, 1), leader=2, leader_epoch=1, partition_epoch=0)
    follower = partitions.Partition("t", 0, log, 1, state)
    assert append(follower, batch(b"a")).error is outcomes.AppendError.NOT_LEADER
    assert follower.read(0, 100).error is outcomes.ReadError.NOT_LEADER
    assert follower.list_offset(outcomes.EARLIEST).error is outcomes.ReadError.NOT_LEADER


def test_a_replica_judges_the_leader_epoch_before_its_leadership(
    log: partition_log.PartitionLog,
) -> None:
    """Kafka's order: a client naming a newer epoch than this follower knows hears
    UNKNOWN_LEADER_EPOCH (wait for metadata), an older one FENCED_LEADER_EPOCH."""
    state = images.PartitionImage(0, (2, 1), (2, 1), leader=2, leader_epoch=4, partition_epoch=0)
    follower = partitions.Partition("t", 0, log, 1, state)
    assert (
        follower.read(0, 100, current_leader_epoch=5).error
        is outcomes.ReadError.UNKNOWN_LEADER_EPOCH
    )
    assert (
        follower.read(0, 100, current_leader_epoch=3).error
        is outcomes.ReadError.FENCED_LEADER_EPOCH
    )
    assert follower.read(0, 100, current_leader_epoch=4).error is outcomes.ReadError.NOT_LEADER
    listed = follower.list_offset(outcomes.LATEST, 5)
    assert listed.error is outcomes.ReadError.UNKNOWN_LEADER_EPOCH


async def test_coordinator_records_wait_for_the_topics_min_isr(
    log: partition_log.PartitionLog,
) -> None:
    """As Kafka's coordinators append (required acks -1): refused, and nothing written,
    while the ISR is smaller than the topic's min.insync.replicas."""
    partition = leader(log, isr=(1,))
    data = batch(b"offset commit")
    headers = list(batches.iter_batches(data))
    refused = await partition.append_records(bytearray(data), headers, NOW, 2)
    assert refused.error is outcomes.AppendError.NOT_ENOUGH_REPLICAS
    assert "min.insync.replicas 2" in (refused.message or "")
    assert partition.log_end_offset == 0
    written = await partition.append_records(bytearray(data), headers, NOW, 1)
    assert written.error is None and partition.high_watermark == 1
