"""A topic's compression.type: the broker rewrites batches into that codec, as Kafka does;
"producer" (the default) keeps what the producer sent. Checked on the stored segment."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import e2e_records
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from strom.records import batches, compression
from strom_process import StromProcess


def stored_codecs(log_dir: Path, topic: str) -> list[int]:
    data = b"".join(p.read_bytes() for p in sorted((log_dir / f"{topic}-0").glob("*.log")))
    return [header.compression for header in batches.iter_batches(data)]


def produce(bootstrap: str, topic: str, codec: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec})
    for value in values:
        producer.produce(topic, key=b"k", value=value)
    assert producer.flush(30) == 0


@pytest.mark.timeout(120)
def test_topic_compression_type_rewrites_batches(
    strom_factory: Callable[..., StromProcess], topic: str
) -> None:
    broker = strom_factory()
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": "zstd"})])[topic].result(
        60
    )
    first = [f"plain-{i}".encode() * 20 for i in range(50)]
    produce(broker.bootstrap, topic, "none", first)
    assert set(stored_codecs(broker.log_dir, topic)) == {compression.ZSTD}

    # Back to "producer": new batches are stored as sent (lz4 here).
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("compression.type", "producer", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(60)
    second = [f"lz4-{i}".encode() * 20 for i in range(50)]
    produce(broker.bootstrap, topic, "lz4", second)
    codecs = stored_codecs(broker.log_dir, topic)
    assert compression.LZ4 in codecs and codecs[0] == compression.ZSTD
    assert [v for _, _, v in e2e_records.read_partition(broker.bootstrap, topic)] == first + second
