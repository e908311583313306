"""OffsetForLeaderEpoch: Kafka's answers from a partition's leader-epoch cache (the end
offset of an epoch, the floor epoch for one never led, (-1, -1) for one newer than any),
its fencing of the caller's current leader epoch, and leadership; then the same through
the dispatcher at every version, for hosted, unknown and not-led partitions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_calls import call
from kio.schema.errors import ErrorCode
from strom.cluster import image as images
from strom.protocol import apis
from strom.records import batches
from strom.replication import leader_epochs, outcomes
from strom.replication import partition as partitions
from strom.server import broker as broker_module
from strom.storage import log_config, partition_log, validator

NOW = 1_700_000_000_000
RULES = validator.Rules(max_message_bytes=1_000_000, compacted=False, compression_type="producer")
NODE = 1


def state(epoch: int, leader: int = NODE) -> images.PartitionImage:
    return images.PartitionImage(
        0, (1, 2), (1, 2), leader=leader, leader_epoch=epoch, partition_epoch=epoch
    )


def append(partition: partitions.Partition, count: int) -> None:
    data = bytearray(batches.build_batch([(None, b"v", [], NOW)] * count))
    outcome = partition.append_as_leader(
        data, acks=1, rules=RULES, min_insync_replicas=1, transactional=False, now_ms=NOW
    )
    assert outcome.error is None, outcome


@pytest.fixture
def log(tmp_path: Path) -> Iterator[partition_log.PartitionLog]:
    opened = partition_log.PartitionLog.open(tmp_path / "t-0", log_config.LogConfig(), lambda: NOW)
    yield opened
    opened.close()


def led_through_epochs(
    log: partition_log.PartitionLog, epochs: list[tuple[int, int]]
) -> partitions.Partition:
    """A leader whose log holds `count` records of each (epoch, count), in order."""
    partition = partitions.Partition("t", 0, log, NODE, state(epochs[0][0]))
    for epoch, count in epochs:
        partition.become(state(epoch))
        append(partition, count)
    return partition


def answer(
    partition: partitions.Partition, epoch: int, current: int = -1
) -> tuple[outcomes.ReadError | None, int, int]:
    found = leader_epochs.last_offset_for_leader_epoch(partition, current, epoch)
    return found.error, found.leader_epoch, found.end_offset


def test_an_epoch_ends_where_the_next_one_starts(log: partition_log.PartitionLog) -> None:
    # epoch 0: offsets 0-1, epoch 2: 2-4, epoch 5: 5-6
    partition = led_through_epochs(log, [(0, 2), (2, 3), (5, 2)])
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [
        (0, 0),
        (2, 2),
        (5, 5),
    ]
    assert answer(partition, 0) == (None, 0, 2)
    assert answer(partition, 2) == (None, 2, 5)
    # The latest epoch ends at the log end offset.
    assert answer(partition, 5) == (None, 5, 7)


def test_an_epoch_never_led_answers_the_epoch_before_it(log: partition_log.PartitionLog) -> None:
    partition = led_through_epochs(log, [(0, 2), (2, 3), (5, 2)])
    # Epochs 3 and 4 wrote nothing: a follower at epoch 3 diverges where epoch 5 starts.
    assert answer(partition, 3) == (None, 2, 5)
    assert answer(partition, 4) == (None, 2, 5)
    assert answer(partition, 1) == (None, 0, 2)


def test_an_epoch_older_than_the_cache_ends_where_the_log_starts(
    log: partition_log.PartitionLog,
) -> None:
    partition = led_through_epochs(log, [(3, 2), (4, 1)])
    # As Kafka's LeaderEpochFileCache: the requested epoch itself, and the first start offset.
    assert answer(partition, 1) == (None, 1, 0)


def test_unknown_epochs_answer_undefined_without_an_error(log: partition_log.PartitionLog) -> None:
    empty = partitions.Partition("t", 0, log, NODE, state(2))
    # Kafka marks a new leader's epoch at the log end even in an empty log: every epoch
    # up to the current one ends there, a newer one is unknown.
    assert answer(empty, 2) == (None, 2, 0)
    assert answer(empty, 0) == (None, 0, 0)
    assert answer(empty, 3) == (None, -1, -1)
    partition = led_through_epochs(log, [(0, 2), (2, 1)])
    assert answer(partition, 9) == (None, -1, -1)  # newer than any known
    assert answer(partition, -1) == (None, -1, -1)


def test_the_callers_current_leader_epoch_is_fenced(log: partition_log.PartitionLog) -> None:
    partition = led_through_epochs(log, [(0, 2), (4, 1)])
    assert answer(partition, 0, current=4) == (None, 0, 2)
    assert answer(partition, 0, current=3)[0] == outcomes.ReadError.FENCED_LEADER_EPOCH
    assert answer(partition, 0, current=5)[0] == outcomes.ReadError.UNKNOWN_LEADER_EPOCH


def test_only_the_leader_answers(log: partition_log.PartitionLog) -> None:
    partition = led_through_epochs(log, [(0, 2)])
    partition.become(state(1, leader=2))
    assert answer(partition, 0)[0] == outcomes.ReadError.NOT_LEADER
    # Fencing comes first, as in Kafka's Partition.getLocalLog.
    assert answer(partition, 0, current=0)[0] == outcomes.ReadError.FENCED_LEADER_EPOCH


# Through the dispatcher -----------------------------------------------------------------


def request(topics: dict[str, list[tuple[int, int, int]]], replica_id: int = -1) -> dict[str, Any]:
    """topic -> [(partition, current leader epoch, leader epoch)]."""
    return {
        "replica_id": replica_id,
        "topics": [
            {
                "topic": name,
                "partitions": [
                    {"partition": p, "current_leader_epoch": current, "leader_epoch": epoch}
                    for p, current, epoch in wanted
                ],
            }
            for name, wanted in topics.items()
        ],
    }


def answers(response: Any) -> list[tuple[str, int, ErrorCode, int, int]]:
    """(topic, partition, error, leader epoch, end offset), in the response's order."""
    return [
        (
            str(topic.topic),
            int(p.partition),
            ErrorCode(p.error_code),
            int(p.leader_epoch),
            int(p.end_offset),
        )
        for topic in response.topics
        for p in topic.partitions
    ]


@pytest.mark.parametrize("version", [2, 3, 4])
async def test_every_version_answers_from_the_leaders_cache(
    broker: broker_module.Broker, version: int
) -> None:
    partition = broker.context.partition("orders", 0)
    assert partition is not None and partition.leader_epoch == 0
    append(partition, 3)
    append(partition, 2)
    wanted = {"orders": [(0, 0, 0), (1, -1, 0), (0, 1, 0), (7, -1, 0)], "missing": [(0, -1, 0)]}
    response = await call(broker, apis.ApiKey.OFFSET_FOR_LEADER_EPOCH, version, request(wanted))
    assert answers(response) == [
        ("orders", 0, ErrorCode.none, 0, 5),
        ("orders", 1, ErrorCode.none, 0, 0),  # nothing written yet: epoch 0 ends at 0
        ("orders", 0, ErrorCode.unknown_leader_epoch, -1, -1),  # the caller is ahead
        ("orders", 7, ErrorCode.unknown_topic_or_partition, -1, -1),
        ("missing", 0, ErrorCode.unknown_topic_or_partition, -1, -1),
    ]


async def test_a_follower_does_not_answer(broker: broker_module.Broker) -> None:
    partition = broker.context.partition("orders", 1)
    assert partition is not None
    partition.become(state(1, leader=2))
    response = await call(
        broker,
        apis.ApiKey.OFFSET_FOR_LEADER_EPOCH,
        4,
        request({"orders": [(1, -1, 0)]}, replica_id=2),
    )
    assert answers(response) == [("orders", 1, ErrorCode.not_leader_or_follower, -1, -1)]
