"""strom.client.wire without a broker: the exchange fed with response frames by hand."""

from __future__ import annotations

import datetime
import io
import struct
from typing import Any

import pytest
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.describe_quorum.v1 import request as quorum_request
from kio.schema.describe_quorum.v1 import response as quorum_response
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i32Timedelta
from strom.client import errors, wire

QUORUM_REQUEST = quorum_request.DescribeQuorumRequest(
    topics=(
        quorum_request.TopicData(
            topic_name=TopicName("__cluster_metadata"),
            partitions=(quorum_request.PartitionData(partition_index=i32(0)),),
        ),
    )
)


def response_frame(response: Any, correlation_id: int) -> bytes:
    header_type = type(response).__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header_type(correlation_id=i32(correlation_id)))
    entity_writer(type(response))(buffer, response)
    return buffer.getvalue()


def versions(*apis: tuple[int, int, int]) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(
            ApiVersion(api_key=i16(k), min_version=i16(lo), max_version=i16(hi))
            for k, lo, hi in apis
        ),
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
    )


def test_a_request_frame_is_sized_and_headed() -> None:
    frame = wire.encode(QUORUM_REQUEST, 7)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    header_type = QUORUM_REQUEST.__header_schema__
    header, used = entity_reader(header_type)(memoryview(frame[4:]), 0)
    assert (header.request_api_key, header.request_api_version) == (55, 1)
    assert (header.correlation_id, header.client_id) == (7, wire.CLIENT_ID)
    body, _ = entity_reader(type(QUORUM_REQUEST))(memoryview(frame[4:]), used)
    assert body == QUORUM_REQUEST


def test_the_exchange_checks_versions_then_sends_the_request() -> None:
    talk = wire._conversation(QUORUM_REQUEST, quorum_response.DescribeQuorumResponse, "b:1")
    assert next(talk)[4:6] == b"\x00\x12"  # ApiVersions (18) first
    sent = talk.send(response_frame(versions((18, 0, 4), (55, 0, 2)), 0))
    assert sent == wire.encode(QUORUM_REQUEST, 1)
    answer = quorum_response.DescribeQuorumResponse(
        error_code=ErrorCode.not_leader_or_follower, topics=()
    )
    with pytest.raises(StopIteration) as done:
        talk.send(response_frame(answer, 1))
    assert done.value.value == answer


@pytest.mark.parametrize(
    ("served", "message"),
    [
        ((), "the broker at b:1 does not support DescribeQuorum (API key 55)"),
        (((55, 2, 3),), "the broker at b:1 serves DescribeQuorum v2-v3, this client sends v1"),
    ],
)
def test_an_api_the_broker_does_not_serve_is_named(
    served: tuple[tuple[int, int, int], ...], message: str
) -> None:
    talk = wire._conversation(QUORUM_REQUEST, quorum_response.DescribeQuorumResponse, "b:1")
    next(talk)
    with pytest.raises(errors.UnsupportedError) as refused:
        talk.send(response_frame(versions((18, 0, 4), *served), 0))
    assert str(refused.value) == message


def test_a_wrong_correlation_id_is_refused() -> None:
    with pytest.raises(errors.ClientError, match="correlation id 3, not 0"):
        wire.decode(response_frame(versions(), 3), ApiVersionsResponse, 0)


def test_addresses_and_security() -> None:
    assert wire.split_addresses("a:1, PLAINTEXT://b:2,[::1]:3") == [
        ("a", 1),
        ("b", 2),
        ("::1", 3),
    ]
    with pytest.raises(errors.ConfigurationError, match="'a' is not HOST:PORT"):
        wire.split_addresses("a")
    wire.check_security("PLAINTEXT")
    with pytest.raises(errors.ConfigurationError, match=r"security\.protocol=SSL"):
        wire.check_security("SSL")


def test_a_closed_connection_is_named() -> None:
    with pytest.raises(errors.ClientError, match="b:1 closed the connection during x"):
        wire._frame_size(b"", "b:1", "x")
