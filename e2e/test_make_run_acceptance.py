"""The README's acceptance check: a plain librdkafka producer with nothing but
bootstrap.servers writes to a topic that does not exist yet (auto-created on Metadata with
the default num.partitions=1), and a consumer group reads the records back."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from strom_process import StromProcess


@pytest.mark.timeout(120)
def test_plain_producer_auto_created_topic(strom: StromProcess, topic: str) -> None:
    producer = Producer({"bootstrap.servers": strom.bootstrap})
    delivered: list[tuple[int, int]] = []
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))

    for i in range(10):
        producer.produce(topic, value=f"hello {i}".encode(), on_delivery=report)
    assert producer.flush(60) == 0, "records still undelivered after 60s"
    assert not errors, errors
    assert sorted(delivered) == [(0, i) for i in range(10)], delivered

    # As in the README: a consumer group with the broker's default settings (so the
    # first rebalance waits group.initial.rebalance.delay.ms = 3 s).
    consumer = Consumer(
        {
            "bootstrap.servers": strom.bootstrap,
            "group.id": f"readers-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        md = consumer.list_topics(topic, timeout=10)
        assert list(md.topics[topic].partitions) == [0], "auto-created with num.partitions=1"
        consumer.subscribe([topic])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
        assert values == [f"hello {i}".encode() for i in range(10)]
    finally:
        consumer.close()
