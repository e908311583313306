"""Fetch through the real dispatcher, as bytes on the wire: the response names each topic
as the request did (by id from v13, by name before) and holds only what was asked for.

Strom keeps no fetch sessions, so every fetch is a full one to the Java client, which drops
an answer holding a topic id or partition it did not ask for (FetchSessionHandler's
verifyFullFetchResponsePartitions).
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from strom.config import broker as broker_config
from strom.protocol import apis, shaping
from strom.server import broker as broker_module
from strom.server import dispatch

FETCH = 1
ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[broker_module.Broker]:
    server = broker_module.Broker(
        broker_config.BrokerConfig(
            {"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0"}
        )
    )
    server.create_topic("orders", 2, 1, {})
    yield server
    server.logs.close_all()


async def fetch(broker: broker_module.Broker, version: int, topics: list[dict[str, Any]]) -> Any:
    """Encode as a client would, decode, dispatch, encode the answer, decode it again."""
    request_type = load_request_schema(FETCH, version)
    header_type = request_type.__header_schema__
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": topics,
        "forgotten_topics_data": (),
        "rack_id": "",
    }
    buffer = io.BytesIO()
    entity_writer(header_type)(
        buffer,
        header_type(
            request_api_key=FETCH, request_api_version=version, correlation_id=7, client_id="t"
        ),
    )
    entity_writer(request_type)(buffer, shaping.build(request_type, body))
    request = apis.decode_request(memoryview(buffer.getvalue()))
    response = await dispatch.Dispatcher(broker).dispatch(request, "PLAINTEXT", "127.0.0.1")
    data = apis.joined(apis.encode_response(7, response))
    response_type = load_response_schema(FETCH, version)
    _, header_size = entity_reader(response_type.__header_schema__)(data, 4)
    body_read, _ = entity_reader(response_type)(data, 4 + header_size)
    return body_read


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
