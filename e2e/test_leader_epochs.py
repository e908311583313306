"""OffsetForLeaderEpoch on a real broker: the wire answers (where an epoch ends, fencing,
unknown partitions), kept across a restart by the leader-epoch checkpoint; and the Java
consumer, which asks it (KIP-320) when it resumes from a committed offset that carries a
leader epoch, goes on from exactly that offset."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import group_checks as gc
import pytest
import wire_requests
from java_peers import JavaPeers
from kio.schema.errors import ErrorCode
from strom.protocol import apis, outbound
from strom_process import StromProcess

API = "OFFSET_FOR_LEADER_EPOCH"
READ_TIMEOUT_S = 60.0


def offset_for_leader_epoch(
    topics: dict[str, list[tuple[int, int, int]]], replica_id: int = -1
) -> outbound.Draft:
    """topic -> [(partition, current leader epoch, leader epoch asked about)]."""
    return outbound.Draft(
        apis.ApiKey.OFFSET_FOR_LEADER_EPOCH,
        {
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
        },
    )


def ask(
    broker: StromProcess, topics: dict[str, list[tuple[int, int, int]]], version: int
) -> list[tuple[str, int, ErrorCode, int, int]]:
    """(topic, partition, error, leader epoch, end offset) of each partition asked about."""
    response: Any = asyncio.run(
        wire_requests.send(broker.port, offset_for_leader_epoch(topics), version)
    )
    return [
        (
            str(t.topic),
            int(p.partition),
            ErrorCode(p.error_code),
            int(p.leader_epoch),
            int(p.end_offset),
        )
        for t in response.topics
        for p in t.partitions
    ]


def metric_lines(broker: StromProcess, prefix: str) -> list[str]:
    with urllib.request.urlopen(f"{broker.metrics_url}/metrics", timeout=10) as response:
        text: str = response.read().decode()
    return [line for line in text.splitlines() if line.startswith(prefix)]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("version", [2, 4])
def test_the_leader_answers_where_its_epochs_end(
    strom_factory: Callable[..., StromProcess], topic: str, version: int
) -> None:
    broker = strom_factory()
    broker.start()
    gc.create_topic(broker.bootstrap, topic, 2)
    gc.produce(broker.bootstrap, topic, [5, 0], "epochs")
    asked = {
        topic: [(0, 0, 0), (1, 0, 0), (0, -1, 1), (0, 1, 0), (9, -1, 0)],
        "no-such": [(0, -1, 0)],
    }
    expected = [
        (topic, 0, ErrorCode.none, 0, 5),  # a single node leads at epoch 0, to the log end
        (topic, 1, ErrorCode.none, 0, 0),  # nothing written: epoch 0 starts (and ends) at 0
        (topic, 0, ErrorCode.none, -1, -1),  # an epoch newer than any
        (topic, 0, ErrorCode.unknown_leader_epoch, -1, -1),  # the caller is ahead of us
        (topic, 9, ErrorCode.unknown_topic_or_partition, -1, -1),
        ("no-such", 0, ErrorCode.unknown_topic_or_partition, -1, -1),
    ]
    assert ask(broker, asked, version) == expected
    # The epochs are in leader-epoch-checkpoint: a restarted broker answers the same.
    broker.restart(graceful=True)
    assert ask(broker, asked, version) == expected
    broker.kill()
    broker.start()
    assert ask(broker, asked, version) == expected


@pytest.mark.timeout(300)
def test_the_java_consumer_validates_its_committed_position_and_goes_on(
    strom_factory: Callable[..., StromProcess], java_peers: JavaPeers, tmp_path: Path, topic: str
) -> None:
    broker = strom_factory(overrides=gc.BROKER_OVERRIDES)
    broker.start()
    gc.create_topic(broker.bootstrap, topic, 2)
    first = gc.produce(broker.bootstrap, topic, [10, 10], "before")
    group_id = f"{topic}-group"
    group = gc.Group("java", broker.bootstrap, topic, tmp_path, java_argv=java_peers.argv)
    try:
        reader = group.start("first", group_id, max_records=len(first))
        reader.wait_closed(READ_TIMEOUT_S)
        assert {(r["partition"], r["offset"]) for r in reader.records()} == set(first)
        assert reader.committed() == {0: 10, 1: 10}
        asked_before = metric_lines(broker, f'strom_requests_total{{api="{API}"')

        second = gc.produce(broker.bootstrap, topic, [5, 5], "after")
        # Its committed offsets carry leader epoch 0: the consumer checks them with
        # OffsetForLeaderEpoch before fetching, and a wrong answer would reset it.
        resumed = group.start("second", group_id, max_records=len(second))
        resumed.wait_closed(READ_TIMEOUT_S)
        read = [(r["partition"], r["offset"]) for r in resumed.records()]
        assert sorted(read) == sorted(second), group.describe()
    finally:
        group.cleanup()
    asked = metric_lines(broker, f'strom_requests_total{{api="{API}"')
    assert asked and asked != asked_before, asked
    assert metric_lines(broker, f'strom_request_errors_total{{api="{API}"') == []
