"""kafka-python against a real Strom broker: admin, idempotent producer, assign() consumer."""

from __future__ import annotations

import time

import e2e_records
import pytest
from e2e_records import CODECS, Consumed, Record
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import codec as kafka_codec
from kafka.admin import KafkaAdminClient, NewTopic
from strom_process import StromProcess

# kafka-python compresses only with optional packages that the test extras may not have.
CODEC_SUPPORT = {
    "none": (True, ""),
    "gzip": (kafka_codec.has_gzip(), ""),
    "snappy": (kafka_codec.has_snappy(), "python-snappy"),
    "lz4": (kafka_codec.has_lz4(), "lz4"),
    "zstd": (kafka_codec.has_zstd(), "zstandard"),
}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="e2e-kafka-python-admin")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=30_000)
    finally:
        admin.close()


def produce(
    bootstrap: str, topic: str, records: list[Record], codec: str
) -> dict[int, tuple[int, int]]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="e2e-kafka-python-producer",
        compression_type=None if codec == "none" else codec,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        request_timeout_ms=30_000,
    )
    try:
        futures = [
            producer.send(
                topic,
                key=r.key,
                value=r.value,
                headers=list(r.headers),
                partition=r.partition,
                timestamp_ms=r.timestamp,
            )
            for r in records
        ]
        producer.flush(timeout=60)
        acked = {}
        for i, future in enumerate(futures):
            md = future.get(timeout=60)
            acked[i] = (md.partition, md.offset)
        return acked
    finally:
        producer.close(timeout=30)


def consume(
    bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 60.0
) -> list[Consumed]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="e2e-kafka-python-consumer",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        check_crcs=True,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[Consumed] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for tp_records in consumer.poll(timeout_ms=500).values():
                for m in tp_records:
                    record = Record(
                        partition=m.partition,
                        key=m.key,
                        value=m.value,
                        headers=e2e_records.headers_of(m.headers),
                        timestamp=m.timestamp,
                    )
                    assert m.timestamp_type == 0, f"expected CreateTime, got {m.timestamp_type}"
                    out.append(Consumed(m.partition, m.offset, record))
        assert len(out) >= count, f"consumed {len(out)} of {count} records within {timeout}s"
        # ListOffsets (latest) agrees with what was read: nothing beyond it.
        ends = consumer.end_offsets(tps)
        per_partition = e2e_records.assert_contiguous(out)
        assert {tp.partition: n for tp, n in ends.items()} == {
            p: per_partition.get(p, 0) for p in range(partitions)
        }
        return out
    finally:
        consumer.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(strom: StromProcess, topic: str, codec: str) -> None:
    supported, package = CODEC_SUPPORT[codec]
    if not supported:
        pytest.skip(f"kafka-python needs the {package!r} package for {codec} (not installed)")
    records = e2e_records.make_records("kafka-python")
    create_topic(strom.bootstrap, topic, e2e_records.PARTITIONS)
    acked = produce(strom.bootstrap, topic, records, codec)
    consumed = consume(strom.bootstrap, topic, e2e_records.PARTITIONS, len(records))
    e2e_records.verify_round_trip(records, acked, consumed)
