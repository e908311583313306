"""Requests that ask for absurd numbers of partitions are refused at once, as Kafka refuses
them, and leave the broker serving and able to restart.

A CreatePartitions asking for 16 million partitions used to be recorded in the metadata,
then created partition by partition on the event loop: no client was served for minutes
and the broker could never start again on that data directory ("Too many open files").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import e2e_records
import pytest
import wire_requests
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kio.schema.errors import ErrorCode
from strom.protocol import apis, outbound
from strom_process import StromProcess


async def create_partitions(port: int, topic: str, count: int) -> Any:
    request = outbound.Draft(
        apis.ApiKey.CREATE_PARTITIONS,
        {
            "topics": [{"name": topic, "count": count, "assignments": None}],
            "timeout": 60_000,
            "validate_only": False,
        },
    )
    return (await wire_requests.send(port, request)).results[0]


def error_of(future: object) -> KafkaError:
    with pytest.raises(KafkaException) as refused:
        future.result(60)  # type: ignore[attr-defined]
    error: KafkaError = refused.value.args[0]
    return error


@pytest.mark.timeout(300)
async def test_absurd_partition_counts_are_refused_and_the_broker_keeps_serving(
    strom_factory: Callable[..., StromProcess], topic: str
) -> None:
    broker = strom_factory(overrides={"max.partitions.per.broker": "2000"})
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)

    started = time.monotonic()
    # librdkafka refuses to ask for more than 100,000; the wire does not.
    grow = await create_partitions(broker.port, topic, 16_000_000)
    assert grow.error_code == ErrorCode.policy_violation
    assert grow.error_message == "Excessively large number of partitions per request."
    huge = error_of(admin.create_topics([NewTopic("huge", 10_001, 1)])["huge"])
    assert huge.code() == KafkaError.POLICY_VIOLATION
    # Within this broker's own bound (max.partitions.per.broker).
    crowded = error_of(admin.create_topics([NewTopic("crowded", 2_000, 1)])["crowded"])
    assert crowded.code() == KafkaError.POLICY_VIOLATION
    assert "max.partitions.per.broker" in crowded.str()
    assert time.monotonic() - started < 30, "refusals must not create anything first"

    metadata = admin.list_topics(timeout=30)
    assert len(metadata.topics[topic].partitions) == 1
    assert "huge" not in metadata.topics and "crowded" not in metadata.topics
    made = sorted(p.name for p in broker.log_dir.iterdir() if p.name.startswith(topic))
    assert made == [f"{topic}-0"]

    # Still serving, and a restart finds the same single partition.
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"still here")
    assert producer.flush(30) == 0
    broker.stop()
    broker.start()
    assert [v for _, _, v in e2e_records.read_partition(broker.bootstrap, topic)] == [b"still here"]
    # A large but legal request is served, its logs made off the event loop.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(topic, 1_500)])[topic].result(120)
    assert len(admin.list_topics(timeout=30).topics[topic].partitions) == 1_500
