"""Fetch through the real dispatcher, as bytes on the wire: the response names each topic
as the request did (by id from v13, by name before) and holds only what was asked for.

These fetches are sessionless (epoch -1), so each is a full one to the Java client, which
drops an answer holding a topic id or partition it did not ask for (FetchSessionHandler's
verifyFullFetchResponsePartitions). Sessions: test_fetch_session_handler.py.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from strom.server import broker as broker_module

FETCH = 1
ZERO_UUID = uuid.UUID(int=0)

from broker_calls import call, consumer_fetch  # noqa: E402


async def fetch(broker: broker_module.Broker, version: int, topics: list[dict[str, Any]]) -> Any:
    """Encode as a client would, decode, dispatch, encode the answer, decode it again."""
    body = consumer_fetch(topics)
    return await call(broker, FETCH, version, body)


def wanted(*indexes: int) -> list[dict[str, Any]]:
    return [
        {
            "partition": index,
            "current_leader_epoch": -1,
            "fetch_offset": 0,
            "last_fetched_epoch": -1,
            "log_start_offset": -1,
            "partition_max_bytes": 1 << 20,
            "replica_directory_id": ZERO_UUID,
        }
        for index in indexes
    ]


def answered(response: Any, key: str) -> list[tuple[Any, list[tuple[int, ErrorCode]]]]:
    return [
        (
            getattr(topic, key),
            [(int(p.partition_index), ErrorCode(p.error_code)) for p in topic.partitions],
        )
        for topic in response.responses
    ]


@pytest.mark.parametrize("version", [13, 17])
async def test_topics_by_id_answered_by_the_same_ids(
    broker: broker_module.Broker, version: int
) -> None:
    known = broker.metadata.image.topics["orders"].topic_id
    unknown = uuid.uuid4()
    response = await fetch(
        broker,
        version,
        [
            {"topic_id": known, "partitions": wanted(1, 0)},
            {"topic_id": unknown, "partitions": wanted(0)},
        ],
    )
    assert response.error_code == ErrorCode.none
    assert response.session_id == 0
    assert answered(response, "topic_id") == [
        (known, [(1, ErrorCode.none), (0, ErrorCode.none)]),
        (unknown, [(0, ErrorCode.unknown_topic_id)]),
    ]


@pytest.mark.parametrize("version", [13, 17])
async def test_a_zero_topic_id_is_an_unknown_topic_id(
    broker: broker_module.Broker, version: int
) -> None:
    """From v13 a topic has no name field: a zero id names no topic, as in Kafka.

    kio reads the zero id as None, on the way in and on the way back.
    """
    known = broker.metadata.image.topics["orders"].topic_id
    response = await fetch(
        broker,
        version,
        [
            {"topic_id": ZERO_UUID, "partitions": wanted(0)},
            {"topic_id": known, "partitions": wanted(0)},
        ],
    )
    assert answered(response, "topic_id") == [
        (None, [(0, ErrorCode.unknown_topic_id)]),
        (known, [(0, ErrorCode.none)]),
    ]


async def test_topics_by_name_before_v13(broker: broker_module.Broker) -> None:
    response = await fetch(
        broker,
        12,
        [
            {"topic": "orders", "partitions": wanted(0, 5)},
            {"topic": "missing", "partitions": wanted(0)},
        ],
    )
    assert answered(response, "topic") == [
        ("orders", [(0, ErrorCode.none), (5, ErrorCode.unknown_topic_or_partition)]),
        ("missing", [(0, ErrorCode.unknown_topic_or_partition)]),
    ]
