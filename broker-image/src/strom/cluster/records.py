"""The cluster metadata records: Kafka's metadata record types, as the metadata log stores them.

Each class is transcribed from the JSON spec of the same name in Kafka's
``metadata/src/main/resources/common/metadata/`` (api key and fields as Kafka has them,
fields Strom does not use yet left out: a later version adds them), written in kio's
generated style so kio's own serializer encodes and decodes them; nothing is packed by
hand. A record in the log is framed as Kafka's ``MetadataRecordSerde`` frames it:
unsigned varints for the frame version (1), the api key and the record version, then
the record's body.
"""

# No `from __future__ import annotations`: kio reads the field types at run time.
import io
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_unsigned_varint
from kio.serial.writers import write_unsigned_varint
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64, u16, uvarint

FRAME_VERSION = 1
# ConfigRecord resource types (Kafka's ConfigResource.Type ids).
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32  # a group's configs (Kafka's GroupConfig, KIP-848)


class RecordDecodeError(Exception):
    """Bytes in the metadata log that are not a metadata record Strom knows."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord:
    """TopicRecord.json, api key 2."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[int] = 2
    name: str = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord:
    """PartitionRecord.json, api key 3: one partition's replicas, ISR and leader."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[int] = 3
    partition_id: i32 = field(metadata={"kafka_type": "int32"})
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})
    isr: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})
    removing_replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    adding_replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    leader: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    partition_epoch: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRecord:
    """ConfigRecord.json, api key 4: one config of a topic, broker or group; a null value
    removes it. The broker resource "" is the cluster-wide dynamic default."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[int] = 4
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    resource_name: str = field(metadata={"kafka_type": "string"})
    name: str = field(metadata={"kafka_type": "string"})
    value: str | None = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionChangeRecord:
    """PartitionChangeRecord.json, api key 5: what changed in a partition. Every change
    is a tagged field, as in Kafka: a null list or leader -2 means unchanged. Replicas,
    removing and adding replicas change in a reassignment (the replicas are the union of
    the target and the current ones while it runs)."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[int] = 5
    partition_id: i32 = field(metadata={"kafka_type": "int32"})
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    isr: tuple[i32, ...] | None = field(metadata={"kafka_type": "int32", "tag": 0}, default=None)
    leader: i32 = field(metadata={"kafka_type": "int32", "tag": 1}, default=i32(-2))
    replicas: tuple[i32, ...] | None = field(
        metadata={"kafka_type": "int32", "tag": 2}, default=None
    )
    removing_replicas: tuple[i32, ...] | None = field(
        metadata={"kafka_type": "int32", "tag": 3}, default=None
    )
    adding_replicas: tuple[i32, ...] | None = field(
        metadata={"kafka_type": "int32", "tag": 4}, default=None
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveTopicRecord:
    """RemoveTopicRecord.json, api key 9."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[int] = 9
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdsRecord:
    """ProducerIdsRecord.json, api key 15: a block of producer ids handed to a broker;
    ``next_producer_id`` is the first id of the next block."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[int] = 15
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"})
    next_producer_id: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEndpoint:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    host: str = field(metadata={"kafka_type": "string"})
    port: u16 = field(metadata={"kafka_type": "uint16"})
    security_protocol: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFeature:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    min_supported_version: i16 = field(metadata={"kafka_type": "int16"})
    max_supported_version: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRecord:
    """RegisterBrokerRecord.json, api key 0, version 1: a broker and where it listens."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[int] = 0
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
    incarnation_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"})
    end_points: tuple[BrokerEndpoint, ...]
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = field(metadata={"kafka_type": "string"}, default=None)
    fenced: bool = field(metadata={"kafka_type": "bool"}, default=True)
    in_controlled_shutdown: bool = field(metadata={"kafka_type": "bool"}, default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerRecord:
    """UnregisterBrokerRecord.json, api key 6."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[int] = 6
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class FenceBrokerRecord:
    """FenceBrokerRecord.json, api key 7: the broker missed its heartbeats."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[int] = 7
    id: i32 = field(metadata={"kafka_type": "int32"})
    epoch: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class UnfenceBrokerRecord:
    """UnfenceBrokerRecord.json, api key 8: the broker caught up and may lead again."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[int] = 8
    id: i32 = field(metadata={"kafka_type": "int32"})
    epoch: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationChangeRecord:
    """BrokerRegistrationChangeRecord.json, api key 17, version 1: a registered broker's
    fencing (-1 unfenced, 0 no change, 1 fenced) or controlled shutdown (1: it entered
    one; 0 no change) changed. Both tagged fields, as in Kafka."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[int] = 17
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"})
    fenced: i8 = field(metadata={"kafka_type": "int8", "tag": 0}, default=i8(0))
    in_controlled_shutdown: i8 = field(metadata={"kafka_type": "int8", "tag": 1}, default=i8(0))


MetadataRecord = (
    RegisterBrokerRecord
    | BrokerRegistrationChangeRecord
    | UnregisterBrokerRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | ProducerIdsRecord
)

_BY_API_KEY: dict[int, type[Any]] = {
    cls.__api_key__: cls
    for cls in (
        RegisterBrokerRecord,
        BrokerRegistrationChangeRecord,
        UnregisterBrokerRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        TopicRecord,
        PartitionRecord,
        ConfigRecord,
        PartitionChangeRecord,
        RemoveTopicRecord,
        ProducerIdsRecord,
    )
}


def encode(record: MetadataRecord) -> bytes:
    """The record framed as Kafka's metadata log stores it."""
    buffer = io.BytesIO()
    write_unsigned_varint(buffer, uvarint(FRAME_VERSION))
    write_unsigned_varint(buffer, uvarint(type(record).__api_key__))
    write_unsigned_varint(buffer, uvarint(int(type(record).__version__)))
    entity_writer(type(record))(buffer, record)
    return buffer.getvalue()


def decode(data: bytes | memoryview) -> MetadataRecord:
    try:
        frame_version, position = _uvarint(data, 0)
        api_key, position = _uvarint(data, position)
        version, position = _uvarint(data, position)
    except Exception as error:  # kio's native reader raises its own types on short bytes
        raise RecordDecodeError(f"truncated metadata record frame: {error}") from None
    if frame_version != FRAME_VERSION:
        raise RecordDecodeError(f"unknown metadata record frame version {frame_version}")
    record_type = _BY_API_KEY.get(api_key)
    if record_type is None:
        raise RecordDecodeError(f"unknown metadata record type {api_key}")
    if version > int(record_type.__version__):
        raise RecordDecodeError(
            f"{record_type.__name__} version {version} is newer than this Strom reads"
        )
    try:
        record, size = entity_reader(record_type)(bytes(data), position)
    except Exception as error:  # kio's native reader raises several types on bad bytes
        raise RecordDecodeError(f"malformed {record_type.__name__}: {error}") from None
    if position + size != len(data):
        raise RecordDecodeError(f"{record_type.__name__} has trailing bytes")
    result: MetadataRecord = record
    return result


def _uvarint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    value, size = read_unsigned_varint(bytes(data[position : position + 5]), 0)
    return int(value), position + size
