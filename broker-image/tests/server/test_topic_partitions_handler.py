"""DescribeTopicPartitions through the dispatcher, as Kafka 4's AdminClient pages through
it: topics in name order, at most min(response_partition_limit,
max.request.partition.size.limit) partitions a response, next_cursor naming the first
partition left out, errors for unknown or invalid names and for a bad cursor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from broker_calls import call as call_broker
from broker_calls import create_topic, loaded
from kio.schema.errors import ErrorCode
from strom.protocol import apis
from strom.server import broker as broker_module
from strom.server.handlers import topic_partitions


@pytest.fixture
async def three_topics(tmp_path: Path) -> AsyncIterator[broker_module.Broker]:
    """Topics a (3 partitions), b (5), c (1); at most 4 partitions a response."""
    server = await loaded(tmp_path, **{"max.request.partition.size.limit": "4"})
    for name, count in (("a", 3), ("b", 5), ("c", 1)):
        await create_topic(server, name, count)
    yield server
    server.close()


async def describe(
    broker: broker_module.Broker,
    names: list[str],
    cursor: tuple[str, int] | None = None,
    limit: int = 2000,
) -> Any:
    return await call_broker(
        broker,
        apis.ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        0,
        {
            "topics": [{"name": name} for name in names],
            "response_partition_limit": limit,
            "cursor": None
            if cursor is None
            else {"topic_name": cursor[0], "partition_index": cursor[1]},
        },
    )


def pages(response: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


def cursor_of(response: Any) -> tuple[str, int] | None:
    cursor = response.next_cursor
    return None if cursor is None else (cursor.topic_name, cursor.partition_index)


async def test_all_topics_come_in_pages_of_the_broker_limit(
    three_topics: broker_module.Broker,
) -> None:
    first = await describe(three_topics, [])
    assert pages(first) == [("a", [0, 1, 2]), ("b", [0])]
    assert cursor_of(first) == ("b", 1)
    second = await describe(three_topics, [], cursor_of(first))
    assert pages(second) == [("b", [1, 2, 3, 4])]
    assert cursor_of(second) == ("c", 0)
    third = await describe(three_topics, [], cursor_of(second))
    assert pages(third) == [("c", [0])]
    assert cursor_of(third) is None


async def test_the_request_limit_applies_when_lower(three_topics: broker_module.Broker) -> None:
    response = await describe(three_topics, ["b"], limit=2)
    assert pages(response) == [("b", [0, 1])]
    assert cursor_of(response) == ("b", 2)


async def test_a_partition_carries_what_the_admin_client_shows(
    three_topics: broker_module.Broker,
) -> None:
    response = await describe(three_topics, ["c"])
    (topic,) = response.topics
    assert topic.error_code == ErrorCode.none
    assert topic.topic_id == three_topics.context.image.topics["c"].topic_id
    assert topic.topic_authorized_operations == topic_partitions.TOPIC_AUTHORIZED_OPERATIONS
    (partition,) = topic.partitions
    node = three_topics.context.node_id
    assert (partition.leader_id, partition.replica_nodes, partition.isr_nodes) == (
        node,
        (node,),
        (node,),
    )


async def test_unknown_and_invalid_names_get_errors(three_topics: broker_module.Broker) -> None:
    response = await describe(three_topics, ["c", "missing", "bad name!"])
    errors = {t.name: t.error_code for t in response.topics}
    assert errors == {
        "c": ErrorCode.none,
        "missing": ErrorCode.unknown_topic_or_partition,
        "bad name!": ErrorCode.invalid_topic_exception,
    }


async def test_a_cursor_outside_the_named_topics_is_an_invalid_request(
    three_topics: broker_module.Broker,
) -> None:
    response = await describe(three_topics, ["a"], cursor=("b", 0))
    assert [(t.name, t.error_code) for t in response.topics] == [("a", ErrorCode.invalid_request)]
    negative = await describe(three_topics, ["a"], cursor=("a", -1))
    assert [t.error_code for t in negative.topics] == [ErrorCode.invalid_request]
