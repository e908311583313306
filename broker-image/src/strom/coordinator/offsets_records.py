"""The records of `__consumer_offsets`, in Kafka's own formats so Kafka's tools can read
them (OffsetCommitKey v1 / OffsetCommitValue v3, GroupMetadataKey v2 / GroupMetadataValue
v3). A null value is a tombstone: the offset or group was deleted."""

from __future__ import annotations

from dataclasses import dataclass, field

from strom.coordinator import group as group_model
from strom.coordinator.record_structs import Reader, Writer

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3


class RecordFormatError(Exception):
    """A record of __consumer_offsets that we cannot read."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupRecord:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int
    members: tuple[MemberRecord, ...] = field(default_factory=tuple)


def offset_key(key: OffsetKey) -> bytes:
    writer = Writer().int16(OFFSET_KEY_VERSION).string(key.group_id)
    return bytes(writer.string(key.topic).int32(key.partition).buffer)


def offset_value(value: group_model.CommittedOffset) -> bytes:
    writer = Writer().int16(OFFSET_VALUE_VERSION).int64(value.offset)
    writer.int32(value.leader_epoch).string(value.metadata).int64(value.commit_timestamp_ms)
    return bytes(writer.buffer)


def group_key(key: GroupKey) -> bytes:
    return bytes(Writer().int16(GROUP_KEY_VERSION).string(key.group_id).buffer)


def group_value(value: GroupRecord) -> bytes:
    writer = Writer().int16(GROUP_VALUE_VERSION).string(value.protocol_type)
    writer.int32(value.generation_id).string(value.protocol_name).string(value.leader_id)
    writer.int64(value.state_timestamp_ms).int32(len(value.members))
    for member in value.members:
        writer.string(member.member_id).string(member.group_instance_id)
        writer.string(member.client_id).string(member.client_host)
        writer.int32(member.rebalance_timeout_ms).int32(member.session_timeout_ms)
        writer.bytes_(member.subscription).bytes_(member.assignment)
    return bytes(writer.buffer)


def parse_key(data: bytes) -> OffsetKey | GroupKey:
    reader = Reader(data, RecordFormatError)
    version = reader.int16()
    if version in (0, 1):
        group_id, topic = reader.nullable_string(), reader.nullable_string()
        if group_id is None or topic is None:
            raise RecordFormatError("offset key with a null group or topic")
        return OffsetKey(group_id, topic, reader.int32())
    if version == GROUP_KEY_VERSION:
        group_id = reader.nullable_string()
        if group_id is None:
            raise RecordFormatError("group key with a null group")
        return GroupKey(group_id)
    raise RecordFormatError(f"unknown key version {version}")


def parse_offset_value(data: bytes) -> group_model.CommittedOffset:
    reader = Reader(data, RecordFormatError)
    version = reader.int16()
    if version not in (1, 3):
        raise RecordFormatError(f"unsupported offset value version {version}")
    offset = reader.int64()
    leader_epoch = reader.int32() if version == 3 else -1
    metadata = reader.nullable_string() or ""
    commit_timestamp = reader.int64()
    if version == 1:
        reader.int64()  # v1 carried an expire timestamp
    return group_model.CommittedOffset(offset, leader_epoch, metadata, commit_timestamp)


def parse_group_value(data: bytes) -> GroupRecord:
    reader = Reader(data, RecordFormatError)
    version = reader.int16()
    if version != GROUP_VALUE_VERSION:
        raise RecordFormatError(f"unsupported group value version {version}")
    protocol_type = reader.nullable_string() or ""
    generation_id = reader.int32()
    protocol_name = reader.nullable_string()
    leader_id = reader.nullable_string()
    state_timestamp = reader.int64()
    members = []
    for _ in range(reader.int32()):
        member_id = reader.nullable_string() or ""
        instance_id = reader.nullable_string()
        client_id = reader.nullable_string() or ""
        client_host = reader.nullable_string() or ""
        rebalance_timeout = reader.int32()
        session_timeout = reader.int32()
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                reader.bytes_(),
                reader.bytes_(),
            )
        )
    return GroupRecord(
        protocol_type, generation_id, protocol_name, leader_id, state_timestamp, tuple(members)
    )


def java_string_hash(value: str) -> int:
    """Java's String.hashCode, so a group maps to the same partition as on Kafka."""
    result = 0
    for unit in value.encode("utf-16-be").hex(" ", 2).split():
        result = (31 * result + int(unit, 16)) & 0xFFFFFFFF
    return result - (1 << 32) if result & 0x80000000 else result


def partition_for(group_id: str, partitions: int) -> int:
    # Kafka: Utils.abs(groupId.hashCode) % partitions, where abs(MIN_VALUE) is 0.
    hashed = java_string_hash(group_id)
    return (0 if hashed == -(1 << 31) else abs(hashed)) % partitions
