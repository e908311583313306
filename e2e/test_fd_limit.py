"""Thousands of partitions under a descriptor limit of 1,024 (a CreatePartitions of 16
million partitions once left a broker unable to start: "Too many open files").

The broker opens segment files through a bounded handle cache (half of RLIMIT_NOFILE), so
it creates, serves, stops and starts again with 3,000 partitions under `prlimit
--nofile=1024`. One consumer fetching every partition gets responses holding more file
ranges than the cache keeps open: handles evicted while a response is in flight must stay
readable until it is sent.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from strom_process import StromProcess, server_command

PARTITIONS = 3000
TOPIC = "many-partitions"
LIMIT = 1024
BIG = bytes(range(256)) * 400  # 100 KiB


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def nofile_limit(pid: int) -> tuple[int, int]:
    text = Path(f"/proc/{pid}/limits").read_text()
    match = re.search(r"^Max open files\s+(\d+)\s+(\d+)", text, re.MULTILINE)
    assert match, text
    return int(match[1]), int(match[2])


def consume_all(bootstrap: str) -> dict[int, list[bytes]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="e2e-fd-limit",
        enable_auto_commit=False,
        consumer_timeout_ms=20_000,
        fetch_max_bytes=64 * 1024 * 1024,
    )
    try:
        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        seen: dict[int, list[bytes]] = {}
        for count, message in enumerate(consumer, start=1):
            seen.setdefault(message.partition, []).append(message.value)
            if count == PARTITIONS + 8:
                break
        return seen
    finally:
        consumer.close()


def test_thousands_of_partitions_under_a_1024_descriptor_limit(tmp_path: Path) -> None:
    broker = StromProcess(
        tmp_path, command=["prlimit", f"--nofile={LIMIT}:{LIMIT}", "--", *server_command()]
    )
    broker.start(timeout=60)
    try:
        assert broker.proc is not None
        assert nofile_limit(broker.proc.pid) == (LIMIT, LIMIT)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=120_000)
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)], timeout_ms=120_000)
        finally:
            admin.close()
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5, request_timeout_ms=60_000
        )
        try:
            for p in range(PARTITIONS):
                producer.send(TOPIC, value=f"record {p}".encode(), partition=p)
            for _ in range(5):
                producer.send(TOPIC, value=b"extra", partition=7)
            for _ in range(3):  # a range big enough to go out with sendfile, not a copy
                producer.send(TOPIC, value=BIG, partition=11)
            producer.flush(timeout=120)
        finally:
            producer.close()
        expected = {p: [f"record {p}".encode()] for p in range(PARTITIONS)}
        expected[7] += [b"extra"] * 5
        expected[11] += [BIG] * 3
        assert consume_all(broker.bootstrap) == expected
        assert open_files(broker.proc.pid) < LIMIT

        broker.stop()
        broker.start(timeout=60)
        assert broker.proc is not None
        assert nofile_limit(broker.proc.pid) == (LIMIT, LIMIT)
        assert consume_all(broker.bootstrap) == expected
        assert open_files(broker.proc.pid) < LIMIT
    finally:
        broker.stop()
