"""Metadata snapshots: an image as records, the records as a snapshot file, and back.

Kafka's KRaft snapshots, sans-I/O (the Raft log stores the bytes, the driver decides when):

- `image_records`: the records that rebuild an image from an empty one, what Kafka's
  MetadataImage.write emits: brokers (registration with their fence state), topics with
  their partitions as they are now, configs (cluster default, brokers, topics), the next
  producer id.
- `encode_snapshot` / `decode_snapshot`: the ``<end offset>-<epoch>.checkpoint`` content,
  as Kafka's RecordsSnapshotWriter lays it out: record batches with offsets from 0, a
  control batch holding a SnapshotHeader control record first, the records in batches of
  at most ``max_batch_bytes``, a control batch holding a SnapshotFooter last; every batch
  stamped with the snapshot's epoch (Kafka's DumpLogSegments reads them: see
  e2e/test_kafka_reads_strom_snapshots.py). Decoding skips the KRaft version and voters
  control records Kafka writes after the header; anything else that is not such a file
  raises `CorruptSnapshotError`.
- `load_snapshot`: the image a snapshot holds (``MetadataLoader.reset`` puts it in place).
- `write_image` / `read_image`: the two the Raft driver calls, image to file and back.
- `SnapshotPolicy`: when to take the next one (Kafka's SnapshotGenerator rule).
"""

from __future__ import annotations

import dataclasses
import io
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64, u16

from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import records
from strom.config import quorum
from strom.records import batches

# Kafka's ControlRecordType ids; a control record's key is (version 0, type), two int16s.
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
# Raft's own control records that Kafka (kraft.version 1) writes after the header: the
# quorum's, not the metadata's, so skipped here.
KRAFT_VERSION = 5
KRAFT_VOTERS = 6
_CONTROL_KEY = struct.Struct(">hh")
# Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the largest batch a snapshot writer makes.
MAX_BATCH_BYTES = 8 * 1024 * 1024
# Kafka's defaults for metadata.log.max.record.bytes.between.snapshots and
# metadata.log.max.snapshot.interval.ms.
DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024
DEFAULT_MAX_SNAPSHOT_INTERVAL_MS = 60 * 60 * 1000
# What a record adds to its value in a batch at most (length, attributes, timestamp and
# offset deltas, null key, header count: varints).
_RECORD_FRAMING = 20
# Kafka writes -1 for the broker of the ProducerIdsRecord in a snapshot: no broker asked.
_NO_BROKER = -1


class CorruptSnapshotError(Exception):
    """Snapshot bytes that are not a whole, valid metadata snapshot; says what is wrong."""


# The image as records ------------------------------------------------------------------


def image_records(image: images.MetadataImage) -> list[records.MetadataRecord]:
    """The records that rebuild ``image`` from an empty image of its cluster, in the order
    Kafka's MetadataImage.write uses (topics before their configs)."""
    out: list[records.MetadataRecord] = [
        _register_broker(broker) for _, broker in sorted(image.brokers.items())
    ]
    for name in sorted(image.topics):
        topic = image.topics[name]
        out.append(records.TopicRecord(name=name, topic_id=topic.topic_id))
        out.extend(_partition(topic, topic.partitions[index]) for index in sorted(topic.partitions))
    for resource_name in sorted(image.broker_configs):
        out.extend(
            _configs(records.BROKER_RESOURCE, resource_name, image.broker_configs[resource_name])
        )
    for name in sorted(image.topics):
        out.extend(_configs(records.TOPIC_RESOURCE, name, image.topics[name].configs))
    for group_id in sorted(image.group_configs):
        out.extend(_configs(records.GROUP_RESOURCE, group_id, image.group_configs[group_id]))
    # none for an empty image's (no block handed out yet), as Kafka's ProducerIdsImage
    if image.next_producer_id != images.MetadataImage(image.cluster_id).next_producer_id:
        out.append(
            records.ProducerIdsRecord(
                broker_id=i32(_NO_BROKER),
                broker_epoch=i64(-1),
                next_producer_id=i64(image.next_producer_id),
            )
        )
    return out


def _register_broker(broker: images.BrokerImage) -> records.RegisterBrokerRecord:
    return records.RegisterBrokerRecord(
        broker_id=i32(broker.node_id),
        incarnation_id=broker.incarnation_id,
        broker_epoch=i64(broker.epoch),
        end_points=tuple(
            records.BrokerEndpoint(
                name=endpoint.listener,
                host=endpoint.host,
                port=u16(endpoint.port),
                security_protocol=i16(endpoint.security_protocol),
            )
            for endpoint in broker.endpoints
        ),
        rack=broker.rack,
        fenced=broker.fenced,
        in_controlled_shutdown=broker.in_controlled_shutdown,
    )


def _partition(
    topic: images.TopicImage, partition: images.PartitionImage
) -> records.PartitionRecord:
    return records.PartitionRecord(
        partition_id=i32(partition.index),
        topic_id=topic.topic_id,
        replicas=tuple(i32(replica) for replica in partition.replicas),
        isr=tuple(i32(replica) for replica in partition.isr),
        removing_replicas=tuple(i32(replica) for replica in partition.removing_replicas),
        adding_replicas=tuple(i32(replica) for replica in partition.adding_replicas),
        leader=i32(partition.leader),
        leader_epoch=i32(partition.leader_epoch),
        partition_epoch=i32(partition.partition_epoch),
    )


def _configs(
    resource_type: int, resource_name: str, configs: Mapping[str, str]
) -> Iterator[records.ConfigRecord]:
    for name, value in sorted(configs.items()):
        yield records.ConfigRecord(
            resource_type=i8(resource_type), resource_name=resource_name, name=name, value=value
        )


def load_snapshot(
    cluster_id: str, snapshot: Sequence[records.MetadataRecord], end_offset: int
) -> images.MetadataImage:
    """The image a snapshot holds: its records replayed on an empty image of the cluster.
    The snapshot holds every record before ``end_offset`` (its id's offset), so the image
    includes offset ``end_offset - 1``. A record that does not apply raises DeltaError."""
    delta = deltas.MetadataDelta(images.MetadataImage(cluster_id))
    for record in snapshot:
        delta.replay(record)
    return dataclasses.replace(delta.apply(), offset=end_offset - 1)


# What the Raft driver calls ------------------------------------------------------------


def write_image(
    image: images.MetadataImage, *, epoch: int, last_contained_timestamp_ms: int
) -> bytes:
    """The snapshot file of ``image`` (``state`` for ``RaftClient.create_snapshot``;
    ``epoch`` is the snapshot id's: the epoch of the entry before its end offset)."""
    return encode_snapshot(
        image_records(image), epoch=epoch, last_contained_timestamp_ms=last_contained_timestamp_ms
    )


def read_image(cluster_id: str, data: bytes, end_offset: int) -> images.MetadataImage:
    """The image a snapshot file holds (``actions.SnapshotLoaded``'s state and id offset),
    for ``MetadataLoader.reset``; `CorruptSnapshotError` when the file is not a valid
    snapshot or its records do not build an image."""
    snapshot = decode_snapshot(data)
    try:
        return load_snapshot(cluster_id, snapshot, end_offset)
    except deltas.DeltaError as error:
        raise CorruptSnapshotError(f"the snapshot's records do not apply: {error}") from None


# The snapshot file ---------------------------------------------------------------------


def encode_snapshot(
    snapshot: Sequence[records.MetadataRecord],
    *,
    epoch: int,
    last_contained_timestamp_ms: int,
    max_batch_bytes: int = MAX_BATCH_BYTES,
) -> bytes:
    """The snapshot file of ``snapshot``'s records: header, data batches, footer.

    ``epoch`` is the snapshot id's (each batch's partition leader epoch);
    ``last_contained_timestamp_ms`` the append time of the last record it covers (the
    header's field, and every batch's timestamp: the bytes depend on nothing else)."""
    stamp = last_contained_timestamp_ms
    header = SnapshotHeaderRecord(version=i16(0), last_contained_log_timestamp=i64(stamp))
    runs: list[tuple[bool, list[bytes | None], list[bytes]]] = [
        (True, [_CONTROL_KEY.pack(0, SNAPSHOT_HEADER)], [_kio_bytes(header)])
    ]
    size = max_batch_bytes  # start a new run at the first record
    for record in snapshot:
        value = records.encode(record)
        if size + len(value) + _RECORD_FRAMING > max_batch_bytes:
            runs.append((False, [], []))
            size = batches.HEADER_SIZE
        runs[-1][1].append(None)
        runs[-1][2].append(value)
        size += len(value) + _RECORD_FRAMING
    footer = SnapshotFooterRecord(version=i16(0))
    runs.append((True, [_CONTROL_KEY.pack(0, SNAPSHOT_FOOTER)], [_kio_bytes(footer)]))
    out = bytearray()
    offset = 0
    for control, keys, values in runs:
        out += batches.build_batch(
            [(key, value, [], stamp) for key, value in zip(keys, values, strict=True)],
            base_offset=offset,
            partition_leader_epoch=epoch,
            is_control=control,
        )
        offset += len(values)
    return bytes(out)


def decode_snapshot(data: bytes | bytearray | memoryview) -> list[records.MetadataRecord]:
    """The metadata records of a snapshot file; `CorruptSnapshotError` naming what is
    wrong when it is not one whole valid snapshot (a bad CRC, a batch cut short, no
    header or footer, records after the footer, offsets out of order, a record that does
    not decode)."""
    view = memoryview(data)
    decoded: list[records.MetadataRecord] = []
    expected_offset = 0
    seen_header = seen_footer = False
    position = 0
    while position < len(view):
        try:
            header = batches.parse_complete_header(view, position)
        except batches.CorruptRecordError as error:
            raise CorruptSnapshotError(f"snapshot cut short or garbled: {error}") from None
        batch = view[position : position + header.size]
        where = f"batch at byte {position} (offset {header.base_offset})"
        if not batches.has_valid_crc(view, header):
            raise CorruptSnapshotError(f"{where}: CRC mismatch")
        if header.base_offset != expected_offset:
            raise CorruptSnapshotError(f"{where}: expected offset {expected_offset}")
        try:
            batch_records = list(batches.iter_records(batch))
        except batches.RecordsError as error:
            raise CorruptSnapshotError(f"{where}: {error}") from None
        for record in batch_records:
            if seen_footer:
                raise CorruptSnapshotError(f"{where}: records after the snapshot footer")
            if record.offset != expected_offset:
                raise CorruptSnapshotError(f"{where}: record offset {record.offset} out of order")
            expected_offset += 1
            if header.is_control:
                kind = _control_type(record.key, where)
                if kind == SNAPSHOT_HEADER and expected_offset == 1:
                    _kio_message(SnapshotHeaderRecord, record.value, where)
                    seen_header = True
                elif kind == SNAPSHOT_FOOTER and seen_header:
                    _kio_message(SnapshotFooterRecord, record.value, where)
                    seen_footer = True
                elif kind in (KRAFT_VERSION, KRAFT_VOTERS) and seen_header:
                    continue
                else:
                    raise CorruptSnapshotError(f"{where}: unexpected control record type {kind}")
            elif not seen_header:
                raise CorruptSnapshotError("the snapshot does not start with a SnapshotHeader")
            else:
                decoded.append(_metadata_record(record.value, record.offset))
        position += header.size
    if not seen_header:
        raise CorruptSnapshotError("the snapshot has no SnapshotHeader")
    if not seen_footer:
        raise CorruptSnapshotError("the snapshot has no SnapshotFooter: it was cut short")
    return decoded


def _control_type(key: bytes | None, where: str) -> int:
    if key is None or len(key) != _CONTROL_KEY.size:
        raise CorruptSnapshotError(f"{where}: a control record without a control key")
    version, kind = _CONTROL_KEY.unpack(key)
    if version != 0:
        raise CorruptSnapshotError(f"{where}: control record key version {version}")
    return int(kind)


def _metadata_record(value: bytes | None, offset: int) -> records.MetadataRecord:
    if value is None:
        raise CorruptSnapshotError(f"record at offset {offset} has no value")
    try:
        return records.decode(value)
    except records.RecordDecodeError as error:
        raise CorruptSnapshotError(f"record at offset {offset}: {error}") from None


def _kio_bytes(message: SnapshotHeaderRecord | SnapshotFooterRecord) -> bytes:
    """A control record's value: the message at its version, no prefix (Kafka's
    ControlRecordUtils)."""
    buffer = io.BytesIO()
    entity_writer(type(message))(buffer, message)
    return buffer.getvalue()


def _kio_message(message_type: type[Any], value: bytes | None, where: str) -> None:
    """Check a control record's value is a whole ``message_type``."""
    try:
        _, size = entity_reader(message_type)(value or b"", 0)
    except Exception as error:  # kio's native reader raises several types on bad bytes
        raise CorruptSnapshotError(f"{where}: malformed {message_type.__name__}: {error}") from None
    if size != len(value or b""):
        raise CorruptSnapshotError(f"{where}: {message_type.__name__} has trailing bytes")


# When to snapshot ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """Kafka's SnapshotGenerator rule: snapshot once ``max_bytes_between_snapshots`` of
    records were committed since the last snapshot, or once ``max_interval_ms`` passed
    with some records committed (0 turns the time rule off)."""

    max_bytes_between_snapshots: int = DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS
    max_interval_ms: int = DEFAULT_MAX_SNAPSHOT_INTERVAL_MS

    @classmethod
    def from_settings(cls, settings: quorum.QuorumSettings) -> SnapshotPolicy:
        return cls(
            max_bytes_between_snapshots=settings.metadata_log_max_record_bytes_between_snapshots,
            max_interval_ms=settings.metadata_log_max_snapshot_interval_ms,
        )

    def reason(self, bytes_since_snapshot: int, ms_since_snapshot: int) -> str | None:
        """Why to snapshot now, or None when it is not time yet."""
        if bytes_since_snapshot >= self.max_bytes_between_snapshots:
            return (
                f"{bytes_since_snapshot} record bytes since the last snapshot, "
                f"at least {self.max_bytes_between_snapshots}"
            )
        timed = self.max_interval_ms > 0 and bytes_since_snapshot > 0
        if timed and ms_since_snapshot >= self.max_interval_ms:
            return (
                f"{ms_since_snapshot} ms since the last snapshot, at least {self.max_interval_ms}"
            )
        return None

    def should_snapshot(self, bytes_since_snapshot: int, ms_since_snapshot: int) -> bool:
        return self.reason(bytes_since_snapshot, ms_since_snapshot) is not None
