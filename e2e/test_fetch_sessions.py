"""Fetch sessions (KIP-227) with real clients over 200 partitions: the Java consumer opens
a session and is then served incremental fetches that leave out the partitions with
nothing new; with one cache slot two Java consumers evict each other's sessions, get
FETCH_SESSION_ID_NOT_FOUND and recover with a full fetch; librdkafka, which does not use
sessions (it always sends session id 0, epoch -1), is served sessionless fetches; followers
of a 3-node cluster fetch from their leaders in sessions and stay in sync. Every consumer
reads every record exactly once. The broker's metrics tell which fetches were which. The
session rules on the wire (a new session, an incremental fetch with nothing new, a stale
epoch, an unknown id, closing) are checked against Apache Kafka too.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import wire_requests
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from java_peers import JavaPeers
from kio.schema.errors import ErrorCode
from prometheus_client.parser import text_string_to_metric_families
from strom_cluster import StromCluster
from strom_process import StromProcess
from waiting import wait_until

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 200
RECORDS = 2_000  # 10 a partition, produced in two halves
HALF = RECORDS // 2
CONSUMER_TIMEOUT_MS = 150_000
JAVA_START_S = 60.0  # a JVM on a busy 2-core machine


def consumer_fetches(broker: StromProcess, context: str) -> float:
    return broker.metric(
        "strom_fetch_requests_by_session_total", context=context, fetcher="consumer"
    )


def create_topic(bootstrap: str, topic: str, replication_factor: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, replication_factor)])[topic].result(60)


def produce(bootstrap: str, topic: str, first: int, count: int, acks: str = "1") -> None:
    """Records first..first+count-1, record i to partition i % PARTITIONS, value "i"."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    for i in range(first, first + count):
        producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def assert_exactly_once(consumed: list[tuple[int, int, bytes]]) -> None:
    """Every record produced, once: offsets 0..9 of each partition, values 0..RECORDS-1."""
    by_partition = Counter(partition for partition, _, _ in consumed)
    assert len(consumed) == RECORDS, f"{len(consumed)} records read"
    assert set(by_partition.values()) == {RECORDS // PARTITIONS}
    assert len({(p, o) for p, o, _ in consumed}) == RECORDS, "a record was read twice"
    assert sorted(int(v) for _, _, v in consumed) == list(range(RECORDS))


class JavaConsumer:
    """e2e/peers' PeerConsumer: assigns every partition, reads `count` records, exits."""

    def __init__(self, java_peers: JavaPeers, bootstrap: str, topic: str, output: Path) -> None:
        argv = java_peers.argv(
            "PeerConsumer",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--count",
            str(RECORDS),
            "--timeout-ms",
            str(CONSUMER_TIMEOUT_MS),
        )
        # Files, not pipes: nobody reads a pipe while the test waits, and a JVM blocked on a
        # full one (its client logs) stops consuming.
        self.out = output / f"consumer-{id(self)}.out"
        self.err = self.out.with_suffix(".err")
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err)

    def records(self) -> list[tuple[int, int, bytes]]:
        self.proc.wait(timeout=CONSUMER_TIMEOUT_MS / 1000 + 30)
        assert self.proc.returncode == 0, (
            f"PeerConsumer exited {self.proc.returncode}: {self.err.read_text()[-3000:]}"
        )
        rows = [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]
        return [(r["partition"], r["offset"], r["value"].encode()) for r in rows]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def java_consumers(
    java_peers: JavaPeers, tmp_path: Path
) -> Iterator[Callable[[str, str], JavaConsumer]]:
    started: list[JavaConsumer] = []

    def start(bootstrap: str, topic: str) -> JavaConsumer:
        started.append(JavaConsumer(java_peers, bootstrap, topic, tmp_path))
        return started[-1]

    yield start
    for consumer in started:
        consumer.kill()


def test_the_java_consumer_is_served_incremental_fetches(
    strom_factory: Callable[..., StromProcess],
    java_consumers: Callable[[str, str], JavaConsumer],
    topic: str,
) -> None:
    broker = strom_factory()
    broker.start()
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, HALF)
    consumer = java_consumers(broker.bootstrap, topic)

    # A full fetch opened the session; then incremental ones, which answer no partition
    # while nothing is produced.
    wait_until(
        lambda: consumer_fetches(broker, "incremental") >= 3,
        JAVA_START_S,
        lambda: f"incremental fetches: {consumer_fetches(broker, 'incremental')}",
    )
    assert broker.metric("strom_fetch_session_creations_total") >= 1
    assert broker.metric("strom_fetch_session_partitions_cached") == PARTITIONS
    answered = broker.metric("strom_fetch_response_partitions_total", context="incremental")
    quiet_from = consumer_fetches(broker, "incremental")
    wait_until(lambda: consumer_fetches(broker, "incremental") >= quiet_from + 2, 10, "quiet")
    assert broker.metric("strom_fetch_response_partitions_total", context="incremental") == (
        answered
    )

    produce(broker.bootstrap, topic, HALF, HALF)
    assert_exactly_once(consumer.records())
    incremental = consumer_fetches(broker, "incremental")
    answered = broker.metric("strom_fetch_response_partitions_total", context="incremental")
    assert 0 < answered < incremental * PARTITIONS
    assert consumer_fetches(broker, "full") >= 1


def test_two_consumers_with_one_slot_evict_each_other_and_read_everything(
    strom_factory: Callable[..., StromProcess],
    java_consumers: Callable[[str, str], JavaConsumer],
    topic: str,
) -> None:
    # One slot, and a session unused for a millisecond may be evicted.
    broker = strom_factory(
        overrides={
            "max.incremental.fetch.session.cache.slots": "1",
            "min.incremental.fetch.session.eviction.ms": "0",
        }
    )
    broker.start()
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, HALF)
    first = java_consumers(broker.bootstrap, topic)
    second = java_consumers(broker.bootstrap, topic)

    def evicted() -> bool:
        return broker.metric("strom_fetch_session_evictions_total") >= 2 and (
            broker.metric("strom_request_errors_total", error="fetch_session_id_not_found") >= 1
        )

    wait_until(
        evicted,
        JAVA_START_S,
        lambda: (
            f"evictions {broker.metric('strom_fetch_session_evictions_total')}, sessions "
            f"created {broker.metric('strom_fetch_session_creations_total')}"
        ),
    )
    produce(broker.bootstrap, topic, HALF, HALF)
    assert_exactly_once(first.records())
    assert_exactly_once(second.records())
    assert broker.metric("strom_fetch_sessions") <= 1


def test_librdkafka_is_served_sessionless_fetches(
    strom_factory: Callable[..., StromProcess], topic: str
) -> None:
    broker = strom_factory()
    broker.start()
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, RECORDS)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "e2e-unused",  # required by librdkafka; unused with assign()
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumed: list[tuple[int, int, bytes]] = []
    at_end: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 90
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_end.add(message.partition())
                continue
            consumed.append((message.partition(), message.offset(), message.value()))
    finally:
        consumer.close()
    assert_exactly_once(consumed)
    assert consumer_fetches(broker, "sessionless") > 0
    assert consumer_fetches(broker, "full") == consumer_fetches(broker, "incremental") == 0
    assert broker.metric("strom_fetch_session_creations_total") == 0


def log_end_offsets(node: StromProcess, topic: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{node.metrics_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        sample.labels["partition"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "strom_log_end_offset" and sample.labels.get("topic") == topic
    }


def follower_fetches(node: StromProcess, context: str) -> float:
    return node.metric("strom_fetch_requests_by_session_total", context=context, fetcher="follower")


def test_followers_fetch_in_sessions_and_stay_in_sync(tmp_path: Path, topic: str) -> None:
    cluster = StromCluster(tmp_path)
    cluster.start()
    try:
        create_topic(cluster.bootstrap, topic, replication_factor=3)
        produce(cluster.bootstrap, topic, 0, RECORDS, acks="all")
        nodes = list(cluster.nodes.values())
        every_record = {str(p): float(RECORDS // PARTITIONS) for p in range(PARTITIONS)}
        wait_until(
            lambda: all(log_end_offsets(node, topic) == every_record for node in nodes),
            60,
            "every replica holds every record",
        )
        wait_until(
            lambda: all(node.metric("strom_under_replicated_partitions") == 0 for node in nodes),
            60,
            "whole ISRs",
        )
        for node in nodes:
            # each node leads some partitions and follows the two others'
            assert node.metric("strom_fetch_sessions") >= 2
            assert follower_fetches(node, "incremental") > 0
        # Idle and in sync: the followers' incremental fetches are answered with nothing
        # (once those in flight, which may carry the last high watermark, are answered).
        leader = nodes[0]

        def answered() -> float:
            return leader.metric(
                "strom_fetch_response_partitions_total",
                context="incremental",
                fetcher="follower",
            )

        def after_fetches(count: int) -> None:
            target = follower_fetches(leader, "incremental") + count
            wait_until(lambda: follower_fetches(leader, "incremental") >= target, 30, "fetches")

        after_fetches(3)
        idle_from = answered()
        after_fetches(6)
        assert answered() == idle_from
        assert all(node.metric("strom_isr_shrinks_total") == 0 for node in nodes)
    finally:
        cluster.stop()


@pytest.mark.parametrize("broker_kind", ["kafka", "strom"])
def test_session_rules_on_the_wire_as_kafka(
    broker_kind: str, request: pytest.FixtureRequest, topic: str
) -> None:
    """The same requests to Apache Kafka and to Strom get the same answers."""
    if broker_kind == "kafka":
        bootstrap = request.getfixturevalue("kafka").bootstrap
    else:
        broker = request.getfixturevalue("strom_factory")()
        broker.start()
        bootstrap = broker.bootstrap
    port = int(bootstrap.rsplit(":", 1)[1])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap})

    def fetch(session_id: int, epoch: int, offsets: dict[int, int]) -> tuple[int, int, list[int]]:
        response = asyncio.run(
            wire_requests.send(
                port,
                wire_requests.consumer_fetch(topic, offsets, session_id=session_id, epoch=epoch),
                12,  # topics by name
            )
        )
        answered = [int(p.partition_index) for t in response.responses for p in t.partitions]
        return ErrorCode(response.error_code), int(response.session_id), answered

    producer.produce(topic, b"first", partition=0)
    assert producer.flush(30) == 0
    error, session_id, answered = fetch(0, 0, {0: 0, 1: 0, 2: 0})
    assert (error, sorted(answered)) == (ErrorCode.none, [0, 1, 2]) and session_id != 0
    # partition 0 read to its end: only its new offset is sent, and nothing is new
    assert fetch(session_id, 1, {0: 1}) == (ErrorCode.none, session_id, [])
    assert fetch(session_id, 1, {}) == (ErrorCode.invalid_fetch_session_epoch, 0, [])
    assert fetch(session_id + 1, 2, {}) == (ErrorCode.fetch_session_id_not_found, 0, [])
    producer.produce(topic, b"second", partition=2)
    assert producer.flush(30) == 0
    assert fetch(session_id, 2, {}) == (ErrorCode.none, session_id, [2])
    # epoch -1 closes the session: a sessionless fetch, and the session is gone
    assert fetch(session_id, -1, {1: 0}) == (ErrorCode.none, 0, [1])
    assert fetch(session_id, 3, {}) == (ErrorCode.fetch_session_id_not_found, 0, [])
