"""The codec against kio's own writers: what a client encodes, we decode; garbage is refused."""

from __future__ import annotations

import contextlib
import random
import struct

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from strom.cluster import raft_wire
from strom.protocol import apis, framing, outbound, shaping

METADATA_FLAGS = {
    "allow_auto_topic_creation": True,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}


def encode_request(api_key: int, version: int, body: dict, correlation_id: int = 7) -> bytes:
    """A request as a client encodes it, without the size prefix."""
    frame = outbound.encode_request(
        outbound.Draft(api_key, body).at(version), correlation_id, "test-client"
    )
    return frame[4:]


def decode_response(api_key: int, version: int, parts: list) -> tuple[int, object]:
    data = apis.joined(parts)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    response_type = load_response_schema(api_key, version)
    header, header_size = entity_reader(response_type.__header_schema__)(data, 4)
    body, body_size = entity_reader(response_type)(data, 4 + header_size)
    assert 4 + header_size + body_size == len(data)
    return header.correlation_id, body


@pytest.mark.parametrize("version", [0, 1, 5, 9, 12, 13])
def test_metadata_request_of_every_generation_decodes(version: int) -> None:
    frame = encode_request(3, version, {"topics": [{"name": "orders"}], **METADATA_FLAGS})
    request = apis.decode_request(memoryview(frame))
    assert request.header.api_key == 3
    assert request.header.api_version == version
    assert request.header.correlation_id == 7
    assert request.header.client_id == "test-client"
    assert [t.name for t in request.body.topics] == ["orders"]


def test_response_encoding_round_trips_through_kio_reader() -> None:
    response_type = apis.response_class(18, 3)
    response = shaping.build(
        response_type,
        {"error_code": 0, "api_keys": apis.api_versions_entries(), "throttle_time": 0},
    )
    correlation_id, body = decode_response(18, 3, apis.encode_response(42, response))
    assert correlation_id == 42
    advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert advertised == {int(k): v for k, v in apis.SUPPORTED_VERSIONS.items()}


@pytest.mark.parametrize("version", [5, 6, 7])
def test_null_in_a_field_that_is_not_nullable_in_this_version_is_sent_empty(version: int) -> None:
    # JoinGroup's protocol name became nullable in v7; a member-id-required answer has none.
    response = shaping.build(
        apis.response_class(11, version),
        {
            "throttle_time": 0,
            "error_code": ErrorCode.member_id_required,
            "generation_id": -1,
            "protocol_type": None,
            "protocol_name": None,
            "leader": "",
            "member_id": "m-1",
            "members": [],
        },
    )
    _, body = decode_response(11, version, apis.encode_response(1, response))
    assert body.protocol_name == ("" if version < 7 else None)
    assert body.member_id == "m-1"


@pytest.mark.parametrize("version", [3, 9])
def test_a_null_array_inside_an_array_is_a_protocol_error_naming_the_field(version: int) -> None:
    # Produce with one topic whose partition_data is null (an empty array, then nulled).
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout": 1000,
        "topic_data": [{"name": "t", "partition_data": []}],
    }
    frame = bytearray(encode_request(0, version, body))
    if version >= 9:  # flexible: compact count 1 (empty), then the topic's tagged fields
        assert frame[-3:] == b"\x01\x00\x00"
        frame[-3] = 0
    else:
        assert frame[-4:] == b"\0\0\0\0"
        frame[-4:] = b"\xff\xff\xff\xff"
    with pytest.raises(apis.ProtocolError, match=r"TopicProduceData\.partition_data was null"):
        apis.decode_request(memoryview(bytes(frame)))


def test_nullable_arrays_may_be_null() -> None:
    metadata = encode_request(3, 1, {"topics": None, **METADATA_FLAGS})
    assert apis.decode_request(memoryview(metadata)).body.topics is None
    offsets = encode_request(9, 2, {"group_id": "g", "topics": None})
    assert apis.decode_request(memoryview(offsets)).body.topics is None
    configs = encode_request(
        32,
        1,
        {
            "resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
            "include_synonyms": False,
        },
    )
    assert apis.decode_request(memoryview(configs)).body.resources[0].configuration_keys is None


def test_unsupported_api_versions_version_gets_v0_body_with_error_35() -> None:
    correlation_id, body = decode_response(18, 0, apis.unsupported_api_versions_response(9))
    assert correlation_id == 9
    assert body.error_code == ErrorCode.unsupported_version
    assert {k.api_key for k in body.api_keys} == {int(k) for k in apis.SUPPORTED_VERSIONS}


def test_unknown_api_key_and_unsupported_version_are_refused() -> None:
    with pytest.raises(apis.ProtocolError, match="unknown API key 999"):
        apis.decode_request(memoryview(struct.pack(">hhi", 999, 0, 1) + b"\x00\x00"))
    frame = encode_request(3, 12, {"topics": None, **METADATA_FLAGS})
    patched = struct.pack(">h", 3) + struct.pack(">h", 99) + frame[4:]
    with pytest.raises(apis.UnsupportedVersionError):
        apis.decode_request(memoryview(patched))


def test_truncated_frames_are_protocol_errors_and_padding_is_ignored_like_kafka() -> None:
    frame = encode_request(
        0,
        9,
        {
            "acks": 1,
            "timeout": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x" * 40}]}],
        },
    )
    for cut in range(0, len(frame)):
        with pytest.raises(apis.ProtocolError):
            apis.decode_request(memoryview(frame[:cut]))
    # What librdkafka 2.16 really sends for Metadata v13: 3 bytes past the body.
    librdkafka = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    assert apis.decode_request(memoryview(librdkafka)).body.topics is None
    assert apis.decode_request(memoryview(frame + b"\x00")).header.api_key == 0


def test_random_mutations_only_ever_raise_protocol_error() -> None:
    rng = random.Random(1234)
    seeds = [
        encode_request(3, 12, {"topics": [{"name": "orders"}], **METADATA_FLAGS}),
        encode_request(18, 3, {"client_software_name": "x", "client_software_version": "1"}),
        encode_request(
            1,
            12,
            {
                "max_wait": 500,
                "min_bytes": 1,
                "topics": [
                    {
                        "topic": "t",
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            },
        ),
    ]
    for _ in range(3000):
        frame = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            frame[rng.randrange(len(frame))] = rng.randrange(256)
        with contextlib.suppress(apis.ProtocolError):
            apis.decode_request(memoryview(bytes(frame)))


def test_huge_declared_array_is_refused_before_the_native_decoder_allocates() -> None:
    # ListOffsets v7 whose topics array claims ~31 billion elements in a 10-byte body:
    # kio's decoder would try to reserve 249 GB and abort the whole process.
    frame = encode_request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": []})
    header_end = len(frame) - 7  # body: int32 replica id, int8 isolation, varint, tags
    body = struct.pack(">ib", -1, 0) + bytes([0xFF, 0xFF, 0xFF, 0xFE, 0x73]) + b"\x00" * 4
    with pytest.raises(apis.ProtocolError, match="array of"):
        apis.decode_request(memoryview(frame[:header_end] + body))


def test_inserted_varints_and_lengths_never_reach_the_allocator() -> None:
    rng = random.Random(99)
    seeds = [
        encode_request(
            2,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        ),
        encode_request(3, 12, {"topics": [{"name": "orders"}], **METADATA_FLAGS}),
        encode_request(3, 1, {"topics": [{"name": "orders"}], **METADATA_FLAGS}),
        encode_request(
            0,
            9,
            {
                "acks": 1,
                "timeout": 1000,
                "topic_data": [
                    {"name": "t", "partition_data": [{"index": 0, "records": b"x" * 40}]}
                ],
            },
        ),
    ]
    for _ in range(5000):
        frame = bytearray(rng.choice(seeds))
        position = rng.randrange(8, len(frame))
        if rng.random() < 0.5:
            frame[position : position + 5] = bytes([0xFF, 0xFF, 0xFF, rng.randrange(256), 0x7F])
        else:
            frame[position : position + 4] = struct.pack(">i", rng.randrange(1 << 31))
        with contextlib.suppress(apis.ProtocolError):
            apis.decode_request(memoryview(bytes(frame)))


def test_frame_buffer_splits_stream_and_refuses_absurd_sizes() -> None:
    buffer = framing.FrameBuffer(max_frame_bytes=100)
    stream = struct.pack(">i", 3) + b"abc" + struct.pack(">i", 2) + b"de"
    for byte in stream:  # one byte at a time, as a slow network would deliver
        buffer.feed(bytes([byte]))
    buffer.feed(b"")
    # Frames are only handed out when asked for; both are complete now.
    assert buffer.next_frame() == b"abc"
    assert buffer.next_frame() == b"de"
    assert buffer.next_frame() is None
    buffer.feed(struct.pack(">i", 101))
    with pytest.raises(framing.FrameSizeError):
        buffer.next_frame()
    negative = framing.FrameBuffer(max_frame_bytes=100)
    negative.feed(struct.pack(">i", -5))
    with pytest.raises(framing.FrameSizeError):
        negative.next_frame()


def _heartbeat_frame() -> bytes:
    return encode_request(
        apis.ApiKey.BROKER_HEARTBEAT,
        1,
        {
            "broker_id": 2,
            "broker_epoch": 10,
            "current_metadata_offset": 12,
            "want_fence": False,
            "want_shut_down": False,
        },
    )


def test_each_listener_decodes_only_its_own_table() -> None:
    heartbeat = _heartbeat_frame()
    decoded = apis.decode_request(memoryview(heartbeat), apis.CONTROLLER_VERSIONS)
    assert decoded.body.current_metadata_offset == 12
    # A Kafka broker closes the connection of a request for an API not on its listener.
    with pytest.raises(apis.ProtocolError, match="BROKER_HEARTBEAT is not served on this"):
        apis.decode_request(memoryview(heartbeat))
    metadata = encode_request(3, 12, {"topics": None, **METADATA_FLAGS})
    assert apis.decode_request(memoryview(metadata)).body.topics is None
    with pytest.raises(apis.ProtocolError, match="METADATA is not served on this listener"):
        apis.decode_request(memoryview(metadata), apis.CONTROLLER_VERSIONS)
    patched = struct.pack(">hh", apis.ApiKey.BROKER_HEARTBEAT, 9) + heartbeat[4:]
    with pytest.raises(apis.UnsupportedVersionError):
        apis.decode_request(memoryview(patched), apis.CONTROLLER_VERSIONS)


def test_the_controller_table_serves_every_version_a_broker_forwards_or_raft_wire_reads() -> None:
    forwarded = [
        apis.ApiKey.CREATE_TOPICS,
        apis.ApiKey.DELETE_TOPICS,
        apis.ApiKey.CREATE_PARTITIONS,
        apis.ApiKey.ALTER_CONFIGS,
        apis.ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ]
    for key in forwarded:
        assert apis.CONTROLLER_VERSIONS[key] == apis.SUPPORTED_VERSIONS[key]
    for key, version in raft_wire.VERSIONS.items():
        assert apis.is_supported(key, version, apis.CONTROLLER_VERSIONS)
        assert outbound.client_versions(key) is not None
    for key, (low, high) in apis.CONTROLLER_VERSIONS.items():
        kio_low, kio_high = outbound.client_versions(key) or (0, -1)
        assert kio_low <= low <= high <= kio_high, key.name


def test_unsupported_api_versions_answer_lists_the_listeners_table() -> None:
    parts = apis.unsupported_api_versions_response(4, apis.CONTROLLER_VERSIONS)
    _, body = decode_response(18, 0, parts)
    assert {k.api_key for k in body.api_keys} == {int(k) for k in apis.CONTROLLER_VERSIONS}
