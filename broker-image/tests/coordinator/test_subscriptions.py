"""Topics a consumer subscribes to, read from its JoinGroup metadata with kio's
ConsumerProtocolSubscription (OffsetDelete refuses those topics)."""

from __future__ import annotations

import io
import struct

import pytest
from kio.schema.consumer_protocol_subscription import v0, v1, v2, v3
from kio.serial import entity_writer
from kio.static.primitive import i32
from strom.coordinator import embedded_protocol


def encoded(version: int, subscription: object) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">h", version))
    entity_writer(type(subscription))(out, subscription)
    return out.getvalue()


@pytest.mark.parametrize(
    ("version", "subscription"),
    [
        (0, v0.ConsumerProtocolSubscription(topics=("a", "b"), user_data=None)),
        (1, v1.ConsumerProtocolSubscription(topics=("a", "b"), owned_partitions=())),
        (2, v2.ConsumerProtocolSubscription(topics=("a", "b"), owned_partitions=())),
        (
            3,
            v3.ConsumerProtocolSubscription(
                topics=("a", "b"), owned_partitions=(), generation_id=i32(4), rack_id="r1"
            ),
        ),
    ],
)
def test_every_version_is_read(version: int, subscription: object) -> None:
    assert embedded_protocol.subscribed_topics(encoded(version, subscription)) == {"a", "b"}


def test_a_later_version_is_read_as_the_latest_known() -> None:
    body = encoded(3, v3.ConsumerProtocolSubscription(topics=("a",), owned_partitions=()))
    assert embedded_protocol.subscribed_topics(b"\x00\x07" + body[2:]) == {"a"}


@pytest.mark.parametrize(
    "metadata",
    [b"", b"\x00", b"\xff\xff\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x05\x00", b"\x00\x00\x00"],
)
def test_unreadable_metadata_subscribes_to_nothing(metadata: bytes) -> None:
    assert embedded_protocol.subscribed_topics(metadata) == set()


@pytest.mark.parametrize("version", [0, 1, 3])
def test_an_assignment_written_for_a_classic_member_reads_back(version: int) -> None:
    wanted = {"a": frozenset({0, 2}), "b": frozenset({1})}
    encoded = embedded_protocol.encode_assignment(wanted, version)
    assert encoded[:2] == version.to_bytes(2, "big")
    assert embedded_protocol.parse_assignment(encoded) == wanted
    assert embedded_protocol.parse_assignment(b"") == {}
