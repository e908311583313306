"""confluent-kafka (librdkafka) against a real Strom broker: admin, idempotent producer,
assign() consumer with CRC checks."""

from __future__ import annotations

import time
from collections.abc import Callable

import e2e_records
import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_records import CODECS, Consumed, Record
from strom_process import StromProcess


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "e2e-confluent-admin"})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)
    futures[topic].result(timeout=60)


def produce(
    bootstrap: str, topic: str, records: list[Record], codec: str
) -> dict[int, tuple[int, int]]:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "e2e-confluent-producer",
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
        }
    )
    acked: dict[int, tuple[int, int]] = {}
    errors: dict[int, KafkaError] = {}

    def on_delivery(i: int) -> Callable[[KafkaError | None, Message], None]:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors[i] = err
            else:
                acked[i] = (msg.partition(), msg.offset())

        return report

    for i, r in enumerate(records):
        producer.produce(
            topic,
            key=r.key,
            value=r.value,
            headers=list(r.headers),
            partition=r.partition,
            timestamp=r.timestamp,
            on_delivery=on_delivery(i),
        )
        producer.poll(0)
    left = producer.flush(90)
    assert left == 0, f"{left} records still undelivered after flush"
    assert not errors, f"delivery errors: {dict(list(errors.items())[:10])}"
    return acked


def consume(
    bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 60.0
) -> list[Consumed]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "e2e-confluent-consumer",
            # librdkafka insists on a group.id; with assign() and no commits it is unused.
            "group.id": "e2e-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "check.crcs": True,
        }
    )
    try:
        tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        consumer.assign(tps)
        out: list[Consumed] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, f"consumer error: {msg.error()}"
            ts_type, ts = msg.timestamp()
            assert ts_type == TIMESTAMP_CREATE_TIME, f"expected CreateTime, got {ts_type}"
            record = Record(
                partition=msg.partition(),
                key=msg.key(),
                value=msg.value(),
                headers=e2e_records.headers_of(msg.headers()),
                timestamp=ts,
            )
            out.append(Consumed(msg.partition(), msg.offset(), record))
        assert len(out) >= count, f"consumed {len(out)} of {count} records within {timeout}s"
        per_partition = e2e_records.assert_contiguous(out)
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=10, cached=False
            )
            assert (low, high) == (0, per_partition.get(p, 0)), f"partition {p} watermarks"
        return out
    finally:
        consumer.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(strom: StromProcess, topic: str, codec: str) -> None:
    records = e2e_records.make_records("confluent-kafka")
    create_topic(strom.bootstrap, topic, e2e_records.PARTITIONS)
    acked = produce(strom.bootstrap, topic, records, codec)
    consumed = consume(strom.bootstrap, topic, e2e_records.PARTITIONS, len(records))
    e2e_records.verify_round_trip(records, acked, consumed)
