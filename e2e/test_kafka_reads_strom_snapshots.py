"""Kafka's own tool reads the metadata snapshots Strom writes.

A snapshot file from `strom.cluster.snapshots` is given to Kafka's DumpLogSegments with
its cluster-metadata decoder (what ``kafka-dump-log.sh --cluster-metadata-decoder``
runs): Kafka must find the SnapshotHeader first, every batch valid, each record the one
Strom wrote (type, version and every field, as Kafka's JSON shows them), the SnapshotFooter
last.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import uuid
from pathlib import Path
from typing import Any

from java_peers import JavaPeers
from kio.static.primitive import i8, i32, i64, u16
from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import records, snapshots

DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
SNAPSHOT_ID = (1234, 7)  # end offset, epoch
# "| offset: 3 CreateTime: ... payload: {json}", or "SnapshotHeader {json}" for the header
_RECORD_LINE = re.compile(
    r"^\| offset: \d+ .*?(?P<kind>payload:|SnapshotHeader|SnapshotFooter) (?P<json>\{.*\})$"
)


def sample_image() -> images.MetadataImage:
    orders, audit = uuid.UUID(int=0x0123456789ABCDEF), uuid.UUID(int=0xFEDCBA9876543210 << 64)
    endpoint = records.BrokerEndpoint(
        name="PLAINTEXT", host="broker-1", port=u16(9092), security_protocol=0
    )
    history: list[records.MetadataRecord] = [
        records.RegisterBrokerRecord(
            broker_id=i32(1),
            incarnation_id=uuid.UUID(int=11),
            broker_epoch=i64(5),
            end_points=(endpoint,),
            rack="rack-a",
        ),
        records.RegisterBrokerRecord(
            broker_id=i32(2), incarnation_id=uuid.UUID(int=22), broker_epoch=i64(9), end_points=()
        ),
        records.UnfenceBrokerRecord(id=i32(1), epoch=i64(5)),
        records.TopicRecord(name="orders", topic_id=orders),
        *(
            records.PartitionRecord(
                partition_id=i32(index),
                topic_id=orders,
                replicas=(i32(1), i32(2)),
                isr=(i32(1), i32(2)),
                leader=i32(1),
                leader_epoch=i32(0),
                partition_epoch=i32(0),
            )
            for index in range(3)
        ),
        records.PartitionChangeRecord(
            partition_id=i32(2), topic_id=orders, isr=(i32(2),), leader=i32(2)
        ),
        records.TopicRecord(name="audit", topic_id=audit),
        records.ConfigRecord(
            resource_type=i8(records.TOPIC_RESOURCE),
            resource_name="orders",
            name="cleanup.policy",
            value="compact",
        ),
        records.ConfigRecord(
            resource_type=i8(records.BROKER_RESOURCE),
            resource_name="",
            name="log.retention.ms",
            value="600000",
        ),
        records.ProducerIdsRecord(
            broker_id=i32(1), broker_epoch=i64(5), next_producer_id=i64(2000)
        ),
    ]
    delta = deltas.MetadataDelta(images.MetadataImage("strom-cluster"))
    for offset, record in enumerate(history):
        delta.replay(record, offset)
    return delta.apply()


def as_kafka_json(value: Any) -> Any:
    """A record's fields as Kafka's JSON converters print them."""
    if isinstance(value, uuid.UUID):
        return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()
    if isinstance(value, tuple):
        return [as_kafka_json(item) for item in value]
    if dataclasses.is_dataclass(value):
        return {
            _camel(field.name): as_kafka_json(getattr(value, field.name))
            for field in dataclasses.fields(value)
        }
    return value


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _type_name(record: records.MetadataRecord) -> str:
    # TopicRecord -> TOPIC_RECORD, as Kafka's MetadataRecordType names
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(record).__name__).upper()


def test_kafkas_dump_log_segments_reads_a_strom_snapshot(
    java_peers: JavaPeers, tmp_path: Path
) -> None:
    written = snapshots.image_records(sample_image())
    end_offset, epoch = SNAPSHOT_ID
    path = tmp_path / f"{end_offset:020d}-{epoch:010d}.checkpoint"
    path.write_bytes(
        snapshots.encode_snapshot(
            written, epoch=epoch, last_contained_timestamp_ms=1_700_000_000_000, max_batch_bytes=256
        )
    )
    done = java_peers.run(DUMP_LOG_SEGMENTS, "--cluster-metadata-decoder", "--files", str(path))
    output = done.stdout.splitlines()
    assert f"Snapshot end offset: {end_offset}, epoch: {epoch}" in output, done.stdout
    batch_lines = [line for line in output if line.startswith("baseOffset:")]
    assert len(batch_lines) > 3  # header, several data batches, footer
    assert all("isvalid: true" in line for line in batch_lines), done.stdout
    assert all(f"partitionLeaderEpoch: {epoch} " in line for line in batch_lines)
    shown = [_RECORD_LINE.match(line) for line in output if line.startswith("| offset:")]
    assert all(shown), done.stdout
    kinds = [match["kind"] for match in shown if match]
    assert kinds == ["SnapshotHeader", *["payload:"] * len(written), "SnapshotFooter"]
    parsed = [json.loads(match["json"]) for match in shown if match]
    assert parsed[0] == {"version": 0, "lastContainedLogTimestamp": 1_700_000_000_000}
    assert parsed[-1] == {"version": 0}
    for record, payload in zip(written, parsed[1:-1], strict=True):
        assert payload == {
            "type": _type_name(record),
            "version": int(type(record).__version__),
            "data": as_kafka_json(record),
        }
