"""Compacted topics on a real broker with real producers: overwrites and tombstones from
several producers and every codec are cleaned down to the latest value per key, at the
offsets the producers were given; keyless records are refused."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable

import e2e_records
import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from strom_process import StromProcess
from waiting import wait_until

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KEYS = 20
ROUNDS = 30
TOMBSTONED = {f"k{i}" for i in range(5)}
# Small segments that roll by time too, so everything becomes cleanable quickly.
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "8192",
    "segment.ms": "1500",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "3000",
}
BROKER_OVERRIDES = {
    "log.cleaner.backoff.ms": "200",
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
}


def read_all(bootstrap: str, topic: str) -> list[tuple[int, str, str | None]]:
    """(offset, key, value) of every record from the start to the high watermark."""
    return [
        (offset, key.decode() if key else "", value.decode() if value else None)
        for offset, key, value in e2e_records.read_partition(bootstrap, topic)
    ]


def records_removed(broker: StromProcess) -> float:
    with urllib.request.urlopen(f"{broker.metrics_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(r"^strom_log_cleaner_records_removed_total (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.timeout(240)
def test_compacted_topic_keeps_the_latest_value_per_key(
    strom_factory: Callable[..., StromProcess], topic: str
) -> None:
    broker = strom_factory(overrides=BROKER_OVERRIDES)
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=TOPIC_CONFIGS)])[topic].result(60)

    acked: dict[int, tuple[str, str | None]] = {}
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            value = msg.value()
            acked[msg.offset()] = (msg.key().decode(), value.decode() if value else None)

    producers = [
        Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "compression.type": codec,
                "enable.idempotence": index % 2 == 0,
                "linger.ms": 2,
            }
        )
        for index, codec in enumerate(CODECS)
    ]
    for round_number in range(ROUNDS):
        producer = producers[round_number % len(producers)]
        for key in range(KEYS):
            value = f"r{round_number}-{'x' * 40}"
            producer.produce(topic, key=f"k{key}", value=value, on_delivery=report)
        producer.flush(60)
    for key in sorted(TOMBSTONED):
        producers[1].produce(topic, key=key, value=None, on_delivery=report)
    producers[1].flush(60)
    assert not errors, errors[:5]
    assert len(acked) == ROUNDS * KEYS + len(TOMBSTONED)

    latest: dict[str, tuple[int, str | None]] = {}
    for offset in sorted(acked):
        key, value = acked[offset]
        latest[key] = (offset, value)
    expected = {(o, k, v) for k, (o, v) in latest.items() if v is not None}

    def view() -> set[tuple[int, str, str | None]]:
        return set(read_all(broker.bootstrap, topic))

    wait_until(
        lambda: view() == expected,
        90,
        lambda: f"{len(view())} records, expected {len(expected)}",
    )
    assert records_removed(broker) >= ROUNDS * KEYS - KEYS
    # Kept records are at the offsets their producers were told.
    for offset, key, value in read_all(broker.bootstrap, topic):
        assert acked[offset] == (key, value)

    # A restart (SIGKILL, so recovery runs) serves the same compacted log.
    broker.kill()
    broker.start()
    assert view() == expected

    # Compacted topics refuse records without a key.
    refused: list[KafkaError] = []
    keyless = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 20000})
    keyless.produce(
        topic, value=b"no key", on_delivery=lambda err, msg: refused.append(err) if err else None
    )
    keyless.flush(30)
    assert [e.code() for e in refused] == [KafkaError.INVALID_RECORD], refused


@pytest.mark.timeout(180)
def test_consumer_offsets_is_compacted_and_commits_survive_it(
    strom_factory: Callable[..., StromProcess], topic: str
) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTP
    from kafka.structs import OffsetAndMetadata

    broker = strom_factory(
        overrides={
            **BROKER_OVERRIDES,
            "offsets.topic.num.partitions": "1",
            "offsets.topic.segment.bytes": "4096",
        }
    )
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id="committer", enable_auto_commit=False
    )
    try:
        for offset in range(1, 301):
            consumer.commit({KafkaTP(topic, 0): OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close(autocommit=False)
    wait_until(
        lambda: records_removed(broker) >= 250,
        60,
        lambda: f"{records_removed(broker)} records removed from __consumer_offsets",
    )
    broker.kill()
    broker.start()
    check = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="committer")
    try:
        assert check.committed(KafkaTP(topic, 0)) == 300
    finally:
        check.close(autocommit=False)
