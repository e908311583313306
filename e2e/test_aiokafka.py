"""aiokafka against a real Strom broker: admin, idempotent producer, assign() consumer."""

from __future__ import annotations

import asyncio
import time

import e2e_records
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from e2e_records import CODECS, Consumed, Record
from strom_process import StromProcess


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="e2e-aiokafka-admin")
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)], timeout_ms=30_000
        )
        errors = [t for t in response.topic_errors if t[1] != 0]
        assert not errors, f"CreateTopics failed: {errors}"
    finally:
        await admin.close()


async def produce(
    bootstrap: str, topic: str, records: list[Record], codec: str
) -> dict[int, tuple[int, int]]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="e2e-aiokafka-producer",
        compression_type=None if codec == "none" else codec,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        request_timeout_ms=30_000,
    )
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                key=r.key,
                value=r.value,
                headers=list(r.headers),
                partition=r.partition,
                timestamp_ms=r.timestamp,
            )
            for r in records
        ]
        metadata = await asyncio.wait_for(asyncio.gather(*futures), timeout=60)
        return {i: (md.partition, md.offset) for i, md in enumerate(metadata)}
    finally:
        await producer.stop()


async def consume(
    bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 60.0
) -> list[Consumed]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="e2e-aiokafka-consumer",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        check_crcs=True,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out: list[Consumed] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for tp_records in batches.values():
                for m in tp_records:
                    assert m.timestamp_type == 0, f"expected CreateTime, got {m.timestamp_type}"
                    record = Record(
                        partition=m.partition,
                        key=m.key,
                        value=m.value,
                        headers=e2e_records.headers_of(m.headers),
                        timestamp=m.timestamp,
                    )
                    out.append(Consumed(m.partition, m.offset, record))
        assert len(out) >= count, f"consumed {len(out)} of {count} records within {timeout}s"
        ends = await consumer.end_offsets(tps)
        per_partition = e2e_records.assert_contiguous(out)
        assert {tp.partition: n for tp, n in ends.items()} == {
            p: per_partition.get(p, 0) for p in range(partitions)
        }
        return out
    finally:
        await consumer.stop()


async def round_trip(bootstrap: str, topic: str, codec: str) -> None:
    records = e2e_records.make_records("aiokafka")
    await create_topic(bootstrap, topic, e2e_records.PARTITIONS)
    acked = await produce(bootstrap, topic, records, codec)
    consumed = await consume(bootstrap, topic, e2e_records.PARTITIONS, len(records))
    e2e_records.verify_round_trip(records, acked, consumed)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(strom: StromProcess, topic: str, codec: str) -> None:
    asyncio.run(asyncio.wait_for(round_trip(strom.bootstrap, topic, codec), timeout=150))
