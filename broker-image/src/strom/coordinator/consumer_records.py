"""The records of a consumer-protocol group (KIP-848) in `__consumer_offsets`, in Kafka's
formats (group-coordinator's ConsumerGroup*Key/Value JSON specs, transcribed in kio's
generated style so kio encodes and decodes them): the group epoch (key version 3), the
subscribed topics' ids and partition counts (4, Kafka 4.0's
ConsumerGroupPartitionMetadata, without racks), each member's subscription (5, with a
classic member's protocols and session timeout), the
target assignment's epoch (6) and each member's target (7), and each member's current
assignment and epochs (8). A key is its version (int16) and the key fields; a value is
its version (int16, 0) and the flexible body; a null value is a tombstone.

`replay` applies them to the groups in log order, as a coordinator that loads a
`__consumer_offsets` partition does.
"""

# No `from __future__ import annotations`: kio reads the field types at run time.
import dataclasses
import io
import logging
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32

from strom.coordinator import consumer_group as model
from strom.coordinator import group as group_model

log = logging.getLogger(__name__)

METADATA_KEY = 3
PARTITION_METADATA_KEY = 4
MEMBER_METADATA_KEY = 5
TARGET_METADATA_KEY = 6
TARGET_MEMBER_KEY = 7
CURRENT_ASSIGNMENT_KEY = 8
VALUE_VERSION = 0
_VERSION = struct.Struct(">h")
# Kafka's MemberState values
_STATE_CODES = {
    model.MemberState.STABLE: 0,
    model.MemberState.UNREVOKED_PARTITIONS: 1,
    model.MemberState.UNRELEASED_PARTITIONS: 2,
}
_STATES = {code: state for state, code in _STATE_CODES.items()}

Entry = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupKey:
    """ConsumerGroupMetadataKey (3) and ConsumerGroupTargetAssignmentMetadataKey (6)."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberKey:
    """The keys of one member's records (5, 7 and 8)."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochValue:
    """ConsumerGroupMetadataValue (Epoch) and ConsumerGroupTargetAssignmentMetadataValue
    (AssignmentEpoch): one int32 each."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicProtocol:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    metadata: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PresentClassicMemberMetadata:
    """ClassicMemberMetadata, a nullable struct, behind the byte (1) with which Kafka
    marks a nullable struct that is there; kio's reader expects that byte where its writer
    leaves it out, so the byte is a field here."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    present: i8 = field(metadata={"kafka_type": "int8"}, default=i8(1))
    session_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
    supported_protocols: tuple[ClassicProtocol, ...]


_NO_CLASSIC = PresentClassicMemberMetadata(
    present=i8(0), session_timeout_ms=i32(0), supported_protocols=()
)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataValue:
    """ConsumerGroupMemberMetadataValue."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rack_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    subscribed_topic_regex: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rebalance_timeout_ms: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    server_assignor: str | None = field(metadata={"kafka_type": "string"}, default=None)
    # tagged: written only when it is not the default, as Kafka leaves out a null one
    classic_member_metadata: PresentClassicMemberMetadata = field(
        metadata={"tag": 0}, default=_NO_CLASSIC
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRacks:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    partition: i32 = field(metadata={"kafka_type": "int32"})
    racks: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicMetadata:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = field(metadata={"kafka_type": "string"})
    num_partitions: i32 = field(metadata={"kafka_type": "int32"})
    partition_metadata: tuple[PartitionRacks, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMetadataValue:
    """ConsumerGroupPartitionMetadataValue (no racks: rack-aware assignment is not done)."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetMemberValue:
    """ConsumerGroupTargetAssignmentMemberValue."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrentAssignmentValue:
    """ConsumerGroupCurrentMemberAssignmentValue."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    state: i8 = field(metadata={"kafka_type": "int8"})
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]


_KEY_TYPES: dict[int, type[Any]] = {
    METADATA_KEY: GroupKey,
    PARTITION_METADATA_KEY: GroupKey,
    TARGET_METADATA_KEY: GroupKey,
    MEMBER_METADATA_KEY: MemberKey,
    TARGET_MEMBER_KEY: MemberKey,
    CURRENT_ASSIGNMENT_KEY: MemberKey,
}


def _encode(version: int, entity: Any) -> bytes:
    buffer = io.BytesIO()
    buffer.write(_VERSION.pack(version))
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _group_key(version: int, group_id: str) -> bytes:
    return _encode(version, GroupKey(group_id=group_id))


def _member_key(version: int, group_id: str, member_id: str) -> bytes:
    return _encode(version, MemberKey(group_id=group_id, member_id=member_id))


def _partitions(assignment: Mapping[uuid.UUID, frozenset[int]]) -> tuple[TopicPartitions, ...]:
    return tuple(
        TopicPartitions(topic_id=topic_id, partitions=tuple(i32(p) for p in sorted(partitions)))
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0]))
    )


def _assignment(partitions: tuple[TopicPartitions, ...]) -> model.Assignment:
    return {t.topic_id: frozenset(int(p) for p in t.partitions) for t in partitions}


# Writing -------------------------------------------------------------------------------


def group_epoch(group_id: str, epoch: int) -> Entry:
    return _group_key(METADATA_KEY, group_id), _encode(VALUE_VERSION, EpochValue(epoch=i32(epoch)))


def subscription_metadata(group_id: str, topics: Mapping[str, model.TopicMetadata]) -> Entry:
    value = PartitionMetadataValue(
        topics=tuple(
            TopicMetadata(
                topic_id=meta.topic_id, topic_name=name, num_partitions=i32(meta.partition_count)
            )
            for name, meta in sorted(topics.items())
        )
    )
    return _group_key(PARTITION_METADATA_KEY, group_id), _encode(VALUE_VERSION, value)


def target_epoch(group_id: str, epoch: int) -> Entry:
    value = _encode(VALUE_VERSION, EpochValue(epoch=i32(epoch)))
    return _group_key(TARGET_METADATA_KEY, group_id), value


def member_metadata(group_id: str, member: model.ConsumerMember) -> Entry:
    value = MemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=member.subscribed_topics,
        subscribed_topic_regex=member.subscribed_regex,
        rebalance_timeout_ms=i32(member.rebalance_timeout_ms),
        server_assignor=member.server_assignor,
        classic_member_metadata=_NO_CLASSIC
        if member.classic is None
        else PresentClassicMemberMetadata(
            session_timeout_ms=i32(member.classic.session_timeout_ms),
            supported_protocols=tuple(
                ClassicProtocol(name=name, metadata=metadata)
                for name, metadata in member.classic.protocols
            ),
        ),
    )
    key = _member_key(MEMBER_METADATA_KEY, group_id, member.member_id)
    return key, _encode(VALUE_VERSION, value)


def target_member(group_id: str, member_id: str, target: model.Assignment) -> Entry:
    value = TargetMemberValue(topic_partitions=_partitions(target))
    return _member_key(TARGET_MEMBER_KEY, group_id, member_id), _encode(VALUE_VERSION, value)


def current_assignment(group_id: str, member: model.ConsumerMember) -> Entry:
    value = CurrentAssignmentValue(
        member_epoch=i32(member.member_epoch),
        previous_member_epoch=i32(member.previous_member_epoch),
        state=i8(_STATE_CODES[member.state]),
        assigned_partitions=_partitions(member.assigned),
        partitions_pending_revocation=_partitions(member.pending_revocation),
    )
    key = _member_key(CURRENT_ASSIGNMENT_KEY, group_id, member.member_id)
    return key, _encode(VALUE_VERSION, value)


def member_tombstones(group_id: str, member_id: str) -> list[Entry]:
    """A member removed: Kafka's order (current assignment, target, subscription)."""
    return [
        (_member_key(CURRENT_ASSIGNMENT_KEY, group_id, member_id), None),
        (_member_key(TARGET_MEMBER_KEY, group_id, member_id), None),
        (_member_key(MEMBER_METADATA_KEY, group_id, member_id), None),
    ]


def group_tombstones(group_id: str) -> list[Entry]:
    """The group itself gone (deleted, or back to the classic protocol); its members'
    records were tombstoned when they left."""
    return [
        (_group_key(PARTITION_METADATA_KEY, group_id), None),
        (_group_key(TARGET_METADATA_KEY, group_id), None),
        (_group_key(METADATA_KEY, group_id), None),
    ]


def _classic_info(stored: PresentClassicMemberMetadata) -> model.ClassicMemberInfo | None:
    if stored.present != 1:
        return None
    protocols = tuple((p.name, bytes(p.metadata)) for p in stored.supported_protocols)
    return model.ClassicMemberInfo(int(stored.session_timeout_ms), protocols)


# Replay --------------------------------------------------------------------------------


def is_consumer_key(key: bytes) -> bool:
    return len(key) >= 2 and _VERSION.unpack_from(key)[0] in _KEY_TYPES


def replay(
    groups: dict[str, group_model.Group],
    key_bytes: bytes,
    value: bytes | None,
    group_for: Callable[[str], group_model.Group],
) -> None:
    """Apply one record of a consumer group (`is_consumer_key`); raises ValueError when
    it cannot be read."""
    version = _VERSION.unpack_from(key_bytes)[0]
    key, _ = entity_reader(_KEY_TYPES[version])(key_bytes, 2)
    existing = groups.get(key.group_id)
    if value is None:
        if existing is None or existing.consumer is None:
            return
        if version == METADATA_KEY:
            existing.consumer = None
        elif version == PARTITION_METADATA_KEY:
            existing.consumer.subscription_metadata = {}
        elif version == MEMBER_METADATA_KEY:
            existing.consumer.remove_member(key.member_id)
        elif version == TARGET_MEMBER_KEY:
            existing.consumer.target.pop(key.member_id, None)
        return
    group = group_for(key.group_id)
    if group.consumer is None:
        group.consumer = model.ConsumerGroup()
    consumer = group.consumer
    if version in (METADATA_KEY, TARGET_METADATA_KEY):
        epoch, _ = entity_reader(EpochValue)(value, 2)
        if version == METADATA_KEY:
            consumer.group_epoch = int(epoch.epoch)
        else:
            consumer.assignment_epoch = int(epoch.epoch)
    elif version == PARTITION_METADATA_KEY:
        topics, _ = entity_reader(PartitionMetadataValue)(value, 2)
        consumer.subscription_metadata = {
            t.topic_name: model.TopicMetadata(t.topic_id, int(t.num_partitions))
            for t in topics.topics
        }
    elif version == MEMBER_METADATA_KEY:
        meta, _ = entity_reader(MemberMetadataValue)(value, 2)
        member = consumer.members.get(key.member_id) or model.ConsumerMember(key.member_id)
        consumer.put_member(
            dataclasses.replace(
                member,
                instance_id=meta.instance_id,
                rack_id=meta.rack_id,
                client_id=meta.client_id,
                client_host=meta.client_host,
                subscribed_topics=tuple(meta.subscribed_topic_names),
                subscribed_regex=meta.subscribed_topic_regex or None,
                rebalance_timeout_ms=int(meta.rebalance_timeout_ms),
                server_assignor=meta.server_assignor,
                classic=_classic_info(meta.classic_member_metadata),
            )
        )
    elif version == TARGET_MEMBER_KEY:
        target, _ = entity_reader(TargetMemberValue)(value, 2)
        consumer.target[key.member_id] = _assignment(target.topic_partitions)
    else:
        current, _ = entity_reader(CurrentAssignmentValue)(value, 2)
        member = consumer.members.get(key.member_id) or model.ConsumerMember(key.member_id)
        state = _STATES.get(int(current.state))
        consumer.put_member(
            dataclasses.replace(
                member,
                member_epoch=int(current.member_epoch),
                previous_member_epoch=int(current.previous_member_epoch),
                # Kafka's UNKNOWN: reconcile from scratch
                state=state or model.MemberState.UNRELEASED_PARTITIONS,
                assigned=_assignment(current.assigned_partitions),
                pending_revocation=_assignment(current.partitions_pending_revocation),
            )
        )
