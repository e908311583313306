"""The client direction against the server direction: what one side encodes, the other
decodes to the same kio objects, for several APIs and both header generations."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from strom.protocol import apis, outbound, shaping

METADATA_REQUEST = {
    "topics": [{"name": "orders", "topic_id": None}],
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}
RECORDS = b"\x00" * 61 + b"batch-bytes"


def server_decodes(frame: bytes) -> apis.Request:
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return apis.decode_request(memoryview(frame)[4:])


def client_decodes(api_key: int, version: int, response: Any, correlation_id: int) -> Any:
    data = apis.joined(apis.encode_response(correlation_id, response))
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    got_id, body = outbound.decode_response(data[4:], api_key, version)
    assert got_id == correlation_id == outbound.response_correlation_id(data[4:])
    return body


@pytest.mark.parametrize("version", [0, 4, 8, 9, 12, 13])  # v9 is the first flexible one
def test_metadata_request_round_trips_with_header_v1_and_v2(version: int) -> None:
    request = outbound.Draft(apis.ApiKey.METADATA, METADATA_REQUEST).at(version)
    frame = outbound.encode_request(request, correlation_id=12345, client_id="broker-2")
    decoded = server_decodes(frame)
    assert decoded.header == apis.RequestHeader(3, version, 12345, "broker-2")
    assert decoded.body == request


@pytest.mark.parametrize("version", [0, 8, 9, 12])
def test_metadata_response_round_trips(version: int) -> None:
    response = shaping.build(
        apis.response_class(3, version),
        {
            "throttle_time": 0,
            "brokers": [{"node_id": 1, "host": "h1", "port": 9092, "rack": None}],
            "cluster_id": "c",
            "controller_id": 1,
            "topics": [
                {
                    "error_code": 0,
                    "name": "orders",
                    "is_internal": False,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition_index": 0,
                            "leader_id": 1,
                            "leader_epoch": 3,
                            "replica_nodes": [1],
                            "isr_nodes": [1],
                            "offline_replicas": [],
                        }
                    ],
                    "topic_authorized_operations": -2147483648,
                }
            ],
            "cluster_authorized_operations": -2147483648,
        },
    )
    assert client_decodes(3, version, response, 7) == response


@pytest.mark.parametrize("version", [3, 8, 9, 13])
def test_produce_request_round_trips_with_records(version: int) -> None:
    request = outbound.Draft(
        apis.ApiKey.PRODUCE,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": 1500,
            "topic_data": [
                {"name": "t", "partition_data": [{"index": 2, "records": RECORDS}]},
            ],
        },
    ).at(version)
    decoded = server_decodes(outbound.encode_request(request, 1, None))
    assert decoded.header.client_id is None
    assert decoded.body == request


@pytest.mark.parametrize("version", [4, 11, 12, 16, 17])
def test_fetch_round_trips_both_ways(version: int) -> None:
    request = outbound.Draft(
        apis.ApiKey.FETCH,
        {
            "replica_id": 2,
            "replica_state": {"replica_id": 2, "replica_epoch": 5},
            "max_wait": 500,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "t",
                    "topic_id": apis_uuid(),
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": 4,
                            "fetch_offset": 10,
                            "last_fetched_epoch": 3,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    ).at(version)
    decoded = server_decodes(outbound.encode_request(request, 99, "fetcher-2"))
    assert decoded.header.api_version == version
    assert decoded.body == request

    response = shaping.build(
        apis.response_class(1, version),
        {
            "throttle_time": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": "t",
                    "topic_id": apis_uuid(),
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 0,
                            "high_watermark": 11,
                            "last_stable_offset": 11,
                            "log_start_offset": 0,
                            "aborted_transactions": [],
                            "preferred_read_replica": -1,
                            "records": RECORDS,
                        }
                    ],
                }
            ],
        },
    )
    assert client_decodes(1, version, response, 99) == response


def apis_uuid() -> Any:
    import uuid

    return uuid.UUID(int=0x1234)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_both_ways_and_response_header_is_always_v0(version: int) -> None:
    request = outbound.api_versions_request(version)
    frame = outbound.encode_request(request, 3, "broker-1")
    decoded = server_decodes(frame)
    assert decoded.header.api_version == version
    response = shaping.build(
        apis.response_class(18, version),
        {"error_code": 0, "api_keys": apis.api_versions_entries(), "throttle_time": 0},
    )
    data = apis.joined(apis.encode_response(3, response))
    # Header v0 even for the flexible v3/v4: the body starts right after the correlation id.
    assert struct.unpack_from(">h", data, 8)[0] == 0
    body = client_decodes(18, version, response, 3)
    assert outbound.peer_versions(body) == {int(k): v for k, v in apis.SUPPORTED_VERSIONS.items()}


def test_kip511_fallback_body_is_decoded_as_v0() -> None:
    data = apis.joined(apis.unsupported_api_versions_response(8))
    correlation_id, body = outbound.decode_response(data[4:], 18, 4)
    assert correlation_id == 8
    assert body.error_code == ErrorCode.unsupported_version
    assert outbound.peer_versions(body)[18] == apis.SUPPORTED_VERSIONS[apis.ApiKey.API_VERSIONS]


@pytest.mark.parametrize(
    ("api_key", "request_fields", "response_fields"),
    [
        (
            52,  # Vote
            {
                "cluster_id": "c",
                "voter_id": 1,
                "topics": [
                    {
                        "topic_name": "__cluster_metadata",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "replica_epoch": 4,
                                "replica_id": 2,
                                "replica_directory_id": apis_uuid(),
                                "voter_directory_id": apis_uuid(),
                                "last_offset_epoch": 3,
                                "last_offset": 120,
                                "pre_vote": False,
                            }
                        ],
                    }
                ],
            },
            {
                "error_code": 0,
                "topics": [
                    {
                        "topic_name": "__cluster_metadata",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "error_code": 0,
                                "leader_id": -1,
                                "leader_epoch": 4,
                                "vote_granted": True,
                            }
                        ],
                    }
                ],
                "node_endpoints": [],
            },
        ),
        (
            53,  # BeginQuorumEpoch
            {
                "cluster_id": "c",
                "voter_id": 1,
                "topics": [
                    {
                        "topic_name": "__cluster_metadata",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "voter_directory_id": apis_uuid(),
                                "leader_id": 2,
                                "leader_epoch": 5,
                            }
                        ],
                    }
                ],
                "leader_endpoints": [{"name": "CONTROLLER", "host": "h", "port": 9093}],
            },
            {
                "error_code": 0,
                "topics": [
                    {
                        "topic_name": "__cluster_metadata",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "error_code": 0,
                                "leader_id": 2,
                                "leader_epoch": 5,
                            }
                        ],
                    }
                ],
                "node_endpoints": [],
            },
        ),
    ],
)
def test_raft_apis_we_only_send_round_trip_at_every_kio_version(
    api_key: int, request_fields: dict[str, Any], response_fields: dict[str, Any]
) -> None:
    versions = outbound.client_versions(api_key)
    assert versions is not None
    for version in range(versions[0], versions[1] + 1):
        request = outbound.Draft(api_key, request_fields).at(version)
        frame = outbound.encode_request(request, 17, "raft-1")
        # Strom serves no Raft API yet, so read the frame with kio's own readers.
        request_type = outbound.request_class(api_key, version)
        header, size = entity_reader(request_type.__header_schema__)(frame, 4)
        assert (header.request_api_key, header.request_api_version) == (api_key, version)
        assert (header.correlation_id, header.client_id) == (17, "raft-1")
        body, body_size = entity_reader(request_type)(frame, 4 + size)
        assert body == request
        assert 4 + size + body_size == len(frame)

        response = shaping.build(apis.response_class(api_key, version), response_fields)
        assert client_decodes(api_key, version, response, 17) == response


def test_negotiation_picks_the_highest_common_version() -> None:
    peer = {3: (0, 12), 1: (4, 17), 18: (0, 4), 52: (0, 1), 999: (0, 3)}
    ours = {3: (1, 13), 1: (12, 18), 18: (0, 4), 53: (0, 1), 999: (4, 5)}
    assert outbound.negotiate(peer, ours) == {3: 12, 1: 17, 18: 4}
    assert outbound.highest_common_version(52, peer, ours) is None  # we don't list it
    assert outbound.highest_common_version(999, peer, ours) is None  # no overlap
    # Without `ours`: whatever kio can encode.
    assert outbound.negotiate(peer)[1] == 17
    assert outbound.highest_common_version(52, peer) == 1
    assert 999 not in outbound.negotiate(peer)


def test_client_versions_are_what_kio_has() -> None:
    assert outbound.client_versions(18) == (0, 4)
    assert outbound.client_versions(3) == (0, 13)
    assert outbound.client_versions(12345) is None


def test_truncated_or_absurd_responses_are_malformed() -> None:
    response = shaping.build(
        apis.response_class(18, 3),
        {"error_code": 0, "api_keys": apis.api_versions_entries(), "throttle_time": 0},
    )
    data = apis.joined(apis.encode_response(1, response))[4:]
    with pytest.raises(outbound.MalformedResponse):
        outbound.decode_response(data[:-5], 18, 3)
    with pytest.raises(outbound.MalformedResponse):
        outbound.response_correlation_id(b"\x00")
    # Metadata v0: brokers array declaring two billion entries in a few bytes.
    absurd = struct.pack(">ii", 5, 2_000_000_000) + b"\x00" * 8
    with pytest.raises(outbound.MalformedResponse, match="array of"):
        outbound.decode_response(absurd, 3, 0)
