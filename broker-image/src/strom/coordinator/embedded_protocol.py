"""The consumer protocol embedded in the classic group protocol: a member's
ConsumerProtocolSubscription (its JoinGroup metadata) and ConsumerProtocolAssignment (its
SyncGroup assignment), read and written with kio's schemas.

A version later than kio knows is read as the latest one, as Kafka's consumer does
(later versions only add fields at the end).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_assignment.v1 import data as assignment_v1
from kio.schema.consumer_protocol_assignment.v2 import data as assignment_v2
from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
from kio.schema.consumer_protocol_subscription import v0, v1, v2, v3
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.serial.readers import Reader
from kio.static.primitive import i16, i32

log = logging.getLogger(__name__)

_SUBSCRIPTIONS = [v.ConsumerProtocolSubscription for v in (v0, v1, v2, v3)]
_SUBSCRIPTION_READERS = [entity_reader(s) for s in _SUBSCRIPTIONS]
_ASSIGNMENT_MODULES = [assignment_v0, assignment_v1, assignment_v2, assignment_v3]
_ASSIGNMENT_READERS = [entity_reader(m.ConsumerProtocolAssignment) for m in _ASSIGNMENT_MODULES]


class MalformedProtocol(Exception):
    """Embedded consumer protocol bytes that cannot be read."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    # (topic, partitions) the member says it owns (v1+; cooperative members)
    owned: tuple[tuple[str, tuple[int, ...]], ...] = ()
    rack_id: str | None = None


def _version(data: bytes) -> int:
    if len(data) < 2:
        raise MalformedProtocol(f"{len(data)} bytes, no version")
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        raise MalformedProtocol(f"version {version}")
    return version


def version_of(data: bytes) -> int:
    """The version an embedded message starts with; 0 when it has none."""
    try:
        return _version(data)
    except MalformedProtocol:
        return 0


def _read(data: bytes, readers: Sequence[Reader[Any]]) -> Any:
    """The message at the version it says, a later one read as the latest known."""
    reader = readers[min(_version(data), len(readers) - 1)]
    try:
        entity, _ = reader(data, 2)
    except SerialError as error:
        raise MalformedProtocol(str(error)) from error
    return entity


def parse_subscription(metadata: bytes) -> Subscription:
    subscription = _read(metadata, _SUBSCRIPTION_READERS)
    owned = tuple(
        (str(tp.topic), tuple(int(p) for p in tp.partitions))
        for tp in getattr(subscription, "owned_partitions", ())
    )
    return Subscription(
        _version(metadata),
        tuple(subscription.topics),
        owned,
        getattr(subscription, "rack_id", None),
    )


def subscribed_topics(metadata: bytes) -> set[str]:
    """The topics of a subscription; unreadable metadata subscribes to nothing."""
    try:
        return set(parse_subscription(metadata).topics)
    except MalformedProtocol as error:
        log.debug("unreadable consumer subscription (%d bytes): %s", len(metadata), error)
        return set()


def parse_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """Partitions by topic name of a ConsumerProtocolAssignment (empty bytes: none)."""
    if not data:
        return {}
    assignment = _read(data, _ASSIGNMENT_READERS)
    return {
        str(tp.topic): frozenset(int(p) for p in tp.partitions)
        for tp in assignment.assigned_partitions
    }


def encode_assignment(partitions: dict[str, frozenset[int]], version: int) -> bytes:
    """A ConsumerProtocolAssignment at `version` (capped at what kio knows), as Kafka's
    coordinator answers a classic member's SyncGroup in a consumer group."""
    version = min(max(version, 0), len(_ASSIGNMENT_MODULES) - 1)
    module = _ASSIGNMENT_MODULES[version]
    assignment = module.ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            module.TopicPartition(topic=topic, partitions=tuple(i32(p) for p in sorted(ps)))
            for topic, ps in sorted(partitions.items())
        ),
        user_data=None,
    )
    buffer = io.BytesIO()
    buffer.write(int(i16(version)).to_bytes(2, "big", signed=True))
    entity_writer(module.ConsumerProtocolAssignment)(buffer, assignment)
    return buffer.getvalue()
