"""Replication in one partition, leader and followers over real logs: the high watermark
over the ISR, acks=all, ISR proposals, truncation of a diverging follower, and what a
follower copies (offsets, epochs, idempotent producer state)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from strom.cluster import image as images
from strom.records import batches
from strom.replication import outcomes
from strom.replication import partition as partitions
from strom.storage import log_config, partition_log, validator

NOW = 1_700_000_000_000
RULES = validator.Rules(max_message_bytes=1_000_000, compacted=False, compression_type="producer")


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def batch(*values: bytes, producer: tuple[int, int, int] | None = None) -> bytearray:
    """A batch; `producer` = (id, epoch, base sequence) makes it idempotent."""
    built = batches.build_batch(
        [(b"k", value, [], NOW) for value in values],
        **(
            {}
            if producer is None
            else {
                "producer_id": producer[0],
                "producer_epoch": producer[1],
                "base_sequence": producer[2],
            }
        ),
    )
    return bytearray(built)


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[dict[int, partition_log.PartitionLog]]:
    opened = {
        node: partition_log.PartitionLog.open(
            tmp_path / str(node) / "t-0", log_config.LogConfig(), lambda: NOW
        )
        for node in (1, 2, 3)
    }
    yield opened
    for each in opened.values():
        each.close()


def state(
    leader: int, epoch: int, isr: tuple[int, ...] = (1, 2, 3), pe: int = 0
) -> images.PartitionImage:
    return images.PartitionImage(0, (1, 2, 3), isr, leader, epoch, pe)


class Proposals(list[tuple[int, ...]]):
    def __call__(self, partition: partitions.Partition, isr: tuple[int, ...]) -> None:
        self.append(isr)


def replica(
    node: int,
    log: partition_log.PartitionLog,
    at: images.PartitionImage,
    clock: Clock | None = None,
    proposals: Proposals | None = None,
) -> partitions.Partition:
    return partitions.Partition(
        "t",
        0,
        log,
        node,
        at,
        now_ms=clock or Clock(),
        propose_isr=proposals if proposals is not None else Proposals(),
    )


def append(
    partition: partitions.Partition, data: bytearray, acks: int = -1, min_isr: int = 1
) -> outcomes.AppendOutcome:
    return partition.append_as_leader(
        data, acks=acks, rules=RULES, min_insync_replicas=min_isr, transactional=False, now_ms=NOW
    )


def copy(leader: partitions.Partition, follower: partitions.Partition) -> outcomes.ReadOutcome:
    """One fetch of `follower` from `leader`, applied as the fetcher does."""
    read = leader.read(
        follower.log_end_offset,
        1 << 20,
        current_leader_epoch=follower.leader_epoch,
        follower=outcomes.FollowerFetch(follower.node_id, follower.last_fetched_epoch),
    )
    assert read.error is None, read
    if read.diverging_epoch is not None:
        follower.truncate_diverging(*read.diverging_epoch)
        return read
    data = b""
    if read.records is not None:
        data = partition_log.ReadResult(list(read.records.ranges), read.size).read_into_bytes()
    follower.append_as_follower(data, read.high_watermark)
    return read


def values(log: partition_log.PartitionLog) -> list[bytes]:
    data = log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset).read_into_bytes()
    return [
        bytes(record.value or b"")
        for header in batches.iter_batches(data)
        for record in batches.iter_records(data[header.position : header.position + header.size])
    ]


async def test_the_high_watermark_waits_for_every_in_sync_follower(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    leader = replica(1, logs[1], state(1, 0))
    followers = [replica(n, logs[n], state(1, 0)) for n in (2, 3)]
    outcome = append(leader, batch(b"a", b"b"))
    assert leader.log_end_offset == 2 and leader.high_watermark == 0
    acked = asyncio.ensure_future(leader.wait_committed(outcome, 2))
    copy(leader, followers[0])  # gets the records; the leader learns at its next fetch
    copy(leader, followers[0])
    await asyncio.sleep(0)
    assert leader.high_watermark == 0 and not acked.done()  # follower 3 unknown yet
    copy(leader, followers[1])
    copy(leader, followers[1])
    assert leader.high_watermark == 2
    assert await asyncio.wait_for(acked, 1) is None
    # the followers learn the high watermark from the leader's answers
    copy(leader, followers[0])
    assert followers[0].high_watermark == 2
    assert values(logs[2]) == [b"a", b"b"] and values(logs[3]) == [b"a", b"b"]
    # consumers read only what is committed
    append(leader, batch(b"c"))
    assert leader.read(2, 1 << 20).records is None


async def test_acks_all_fails_after_append_when_the_isr_shrank_below_min_isr(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    leader = replica(1, logs[1], state(1, 0, isr=(1, 2)))
    outcome = append(leader, batch(b"a"), min_isr=2)
    assert outcome.error is None
    acked = asyncio.ensure_future(leader.wait_committed(outcome, 2))
    await asyncio.sleep(0)
    leader.become(state(1, 0, isr=(1,), pe=1))  # the controller dropped follower 2
    assert await asyncio.wait_for(acked, 1) is outcomes.AppendError.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    refused = append(leader, batch(b"b"), min_isr=2)
    assert refused.error is outcomes.AppendError.NOT_ENOUGH_REPLICAS


async def test_losing_the_leadership_fails_waiting_producers(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    leader = replica(1, logs[1], state(1, 0))
    acked = asyncio.ensure_future(leader.wait_committed(append(leader, batch(b"a"))))
    await asyncio.sleep(0)
    leader.become(state(2, 1, isr=(2, 3), pe=1))
    assert await asyncio.wait_for(acked, 1) is outcomes.AppendError.NOT_LEADER


def test_a_caught_up_follower_is_proposed_into_the_isr_and_a_lagging_one_out(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    clock = Clock()
    proposals = Proposals()
    leader = replica(1, logs[1], state(1, 0, isr=(1, 2)), clock, proposals)
    follower2 = replica(2, logs[2], state(1, 0, isr=(1, 2)))
    follower3 = replica(3, logs[3], state(1, 0, isr=(1, 2)))
    append(leader, batch(b"a"))
    copy(leader, follower2)
    copy(leader, follower2)
    assert leader.high_watermark == 1 and proposals == []
    copy(leader, follower3)  # fetches from 0 < high watermark 1: not caught up yet
    assert proposals == []
    copy(leader, follower3)  # fetches from 1: caught up
    assert proposals == [(1, 2, 3)] and leader.proposed_isr == (1, 2, 3)
    leader.isr_answered((1, 2, 3), 0, 1)
    assert leader.isr == (1, 2, 3) and leader.partition_epoch == 1
    # follower 2 stops fetching while the log grows: out after replica.lag.time.max.ms
    append(leader, batch(b"b"))
    copy(leader, follower3)
    clock.now += 10_000
    assert leader.shrink_isr_if_lagging(30_000) == []
    clock.now += 25_000
    copy(leader, follower3)
    assert leader.shrink_isr_if_lagging(30_000) == [2]
    assert proposals[-1] == (1, 3)
    # a proposed shrink does not count yet: the high watermark still waits for 2 ...
    assert leader.high_watermark == 1
    leader.isr_answered((1, 3), 0, 2)
    assert leader.high_watermark == 2  # ... until the controller committed it


def test_a_follower_truncates_what_a_new_leader_does_not_have(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    """Leader 1 (epoch 0) wrote a, b; only b was not replicated when 2 became leader
    (epoch 1) and wrote c. Back as a follower, 1 must drop b and take c."""
    one = replica(1, logs[1], state(1, 0))
    two = replica(2, logs[2], state(1, 0))
    append(one, batch(b"a"))
    copy(one, two)
    append(one, batch(b"b"))  # never reaches 2
    two.become(state(2, 1, isr=(2, 3), pe=1))
    append(two, batch(b"c"))
    one.become(state(2, 1, isr=(2, 3), pe=1))
    read = copy(two, one)
    assert read.diverging_epoch == (0, 1)  # epoch 0 ends at offset 1 on the new leader
    assert one.log_end_offset == 1
    copy(two, one)
    assert values(logs[1]) == [b"a", b"c"]
    assert [e.epoch for e in logs[1].leader_epoch_cache.entries] == [0, 1]


def test_a_follower_keeps_the_producer_state_and_offsets_of_the_leader(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    one = replica(1, logs[1], state(1, 4))
    two = replica(2, logs[2], state(1, 4))
    first = append(one, batch(b"a", b"b", producer=(77, 0, 0)))
    copy(one, two)
    assert two.log_end_offset == 2
    # 2 takes over: the same producer's retry of the batch is a duplicate there too,
    # and its next batch continues the sequence.
    two.become(state(2, 5, isr=(2, 3), pe=1))
    retry = append(two, batch(b"a", b"b", producer=(77, 0, 0)))
    assert retry.duplicate and retry.base_offset == first.base_offset == 0
    following = append(two, batch(b"c", producer=(77, 0, 2)))
    assert following.error is None and following.base_offset == 2
    skipped = append(two, batch(b"e", producer=(77, 0, 9)))
    assert skipped.error is outcomes.AppendError.OUT_OF_ORDER_SEQUENCE


def test_a_follower_below_the_leaders_log_start_starts_over_there(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    one = replica(1, logs[1], state(1, 0, isr=(1,)))
    for value in (b"a", b"b", b"c"):
        append(one, batch(value))
    logs[1].roll()
    append(one, batch(b"d"))
    assert one.delete_records(3) == (None, 3)
    two = replica(2, logs[2], state(1, 0, isr=(1,)))
    read = one.read(0, 1 << 20, follower=outcomes.FollowerFetch(2))
    assert read.error is outcomes.ReadError.OFFSET_OUT_OF_RANGE and read.log_start_offset == 3
    two.restart_at(read.log_start_offset)
    copy(one, two)
    assert logs[2].log_start_offset == 3 and values(logs[2]) == [b"d"]


def test_a_copy_that_fails_its_crc_is_refused_whole(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    two = replica(2, logs[2], state(1, 0))
    good = batch(b"a")
    bad = batch(b"b")
    batches.patch_base_offset(bad, 0, 1)
    bad[-1] ^= 0xFF
    with pytest.raises(batches.CorruptRecordError):
        two.append_as_follower(bytes(good + bad), 0)
    assert two.log_end_offset == 0


async def test_a_producer_that_times_out_leaves_no_waiter_behind(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    leader = replica(1, logs[1], state(1, 0))
    outcome = append(leader, batch(b"a"))
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await leader.wait_committed(outcome)
    assert leader._hw_waiters == []


def test_a_follower_past_a_new_leaders_empty_log_truncates_and_joins_its_isr(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    """Leader 1 (epoch 0) wrote a, which never reached 2; 2 took over with an empty log
    (no epoch mark yet) and the ISR (2,). Following 2, 1 must drop a and catch up, then
    be proposed into the ISR: before, 2 answered the divergence (-1, -1), which the
    follower ignores, and 1 fetched past 2's end for good (the ISR stayed (2,))."""
    proposals = Proposals()
    one = replica(1, logs[1], state(1, 0))
    append(one, batch(b"a"))  # never reaches 2
    two = replica(2, logs[2], state(2, 1, isr=(2,), pe=1), proposals=proposals)
    one.become(state(2, 1, isr=(2,), pe=1))
    read = copy(two, one)
    assert read.diverging_epoch == (0, 0)  # epoch 0 ends where 2's log ends
    assert one.log_end_offset == 0
    copy(two, one)  # fetches from 0 = 2's high watermark: caught up
    assert proposals == [(1, 2)]


def test_a_follower_whose_epoch_the_leader_cannot_place_is_told_out_of_range(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    """Kafka's rule: no divergence when the leader cannot say where the follower's last
    epoch ends (here newer than any it knows); the read answers OFFSET_OUT_OF_RANGE to a
    follower past its end, and the follower truncates to the high watermark."""
    two = replica(2, logs[2], state(2, 1, isr=(2, 3), pe=1))
    append(two, batch(b"a"))
    read = two.read(5, 1 << 20, current_leader_epoch=1, follower=outcomes.FollowerFetch(1, 7))
    assert read.diverging_epoch is None
    assert read.error is outcomes.ReadError.OFFSET_OUT_OF_RANGE


def test_a_follower_drops_the_mark_of_an_epoch_it_led_without_appending(
    logs: dict[int, partition_log.PartitionLog],
) -> None:
    """1 wrote a (epoch 0) to all; 2 led epoch 1 and appended nothing (its mark (1, 1)
    stays at its log end); 3 took over in epoch 2. Following 3, 2's last fetched epoch is
    1, which 3 never had: 3 answers the divergence (0, 1), which cuts nothing from 2's
    log, but the mark (1, 1) must go, or every later fetch is answered the same and 2
    never rejoins the ISR (Kafka's truncateTo drops the epoch marks even then)."""
    one = replica(1, logs[1], state(1, 0))
    two = replica(2, logs[2], state(1, 0))
    append(one, batch(b"a"))
    copy(one, two)
    copy(one, replica(3, logs[3], state(1, 0)))
    two.become(state(2, 1, isr=(2, 3), pe=1))  # leads epoch 1, writes nothing
    assert [(e.epoch, e.start_offset) for e in logs[2].leader_epoch_cache.entries] == [
        (0, 0),
        (1, 1),
    ]
    proposals = Proposals()
    three = replica(3, logs[3], state(3, 2, isr=(3,), pe=2), proposals=proposals)
    two.become(state(3, 2, isr=(3,), pe=2))
    first = copy(three, two)
    assert first.diverging_epoch == (0, 1)
    assert two.last_fetched_epoch == 0, "the mark of the epoch it led is gone"
    second = copy(three, two)
    assert second.diverging_epoch is None
    assert proposals == [(2, 3)], "caught up, it is proposed into the ISR again"
