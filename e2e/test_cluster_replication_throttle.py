"""A throttled reassignment (`kafka-reassign-partitions.sh --throttle`) on a three-node
Strom cluster moves its data no faster than the throttle allows, while an unthrottled
topic's producers and consumers carry on; `--verify` completes it and lifts the throttle.

A replication quota is checked before each fetch, so a fetch may overshoot it by up to
replica.fetch.max.bytes (Kafka's as well as Strom's): with the default 1 MiB the whole
partition would move in one fetch. The cluster fetches 64 KiB at a time (of batches of
16 KiB), so that the throttle shows within a megabyte.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from java_peers import JavaPeers
from kafka_topic_tools import create_with_assignment, reassign
from strom_cluster import StromCluster
from strom_process import StromProcess
from waiting import wait_until

pytestmark = pytest.mark.timeout(180)

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
THROTTLE = 50_000  # bytes/s
RECORD_BYTES = 1_000
MOVED_RECORDS = 1_000  # a megabyte of values
STEADY_RECORDS = 200


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromCluster]:
    made = StromCluster(
        tmp_path_factory.mktemp("throttle-cluster"),
        overrides={"replica.fetch.max.bytes": "65536"},
    )
    made.start()
    try:
        yield made
    finally:
        made.stop()


def produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    # Small batches: a fetch returns at least one whole batch, whatever its size.
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 16384}
    )
    for _ in range(count):
        producer.produce(topic, value=os.urandom(size), partition=0)
    assert producer.flush(60) == 0


def consume(bootstrap: str, topic: str, count: int) -> int:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = 0
        deadline = time.monotonic() + 30
        while got < count and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(500, 1.0) if m.error() is None)
        return got
    finally:
        consumer.close()


def throttled_byte_rate(node: StromProcess, side: str) -> float:
    with urllib.request.urlopen(f"{node.metrics_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(
        rf'^strom_replication_throttled_byte_rate{{side="{side}"}} (\S+)$', text, re.MULTILINE
    )
    assert found is not None, text[-2000:]
    return float(found.group(1))


def test_a_throttled_reassignment_moves_no_faster_than_the_throttle(
    java_peers: JavaPeers, cluster: StromCluster, tmp_path: Path
) -> None:
    bootstrap = cluster.nodes[1].bootstrap
    for topic, assignment in (("moving", "1:2"), ("steady", "3:1")):
        create_with_assignment(java_peers, bootstrap, topic, assignment)
    produce(cluster.bootstrap, "moving", MOVED_RECORDS, RECORD_BYTES)

    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": "moving", "partition": 0, "replicas": [2, 3]}],
            }
        )
    )

    started = time.monotonic()
    executed = reassign(
        java_peers,
        bootstrap,
        "--execute",
        "--reassignment-json-file",
        str(plan_file),
        "--throttle",
        str(THROTTLE),
    )
    assert "Successfully started partition reassignment for moving-0" in executed
    assert f"The inter-broker throttle limit was set to {THROTTLE} B/s" in executed

    # Meanwhile an unthrottled topic, replicated between brokers 3 and 1, is written with
    # acks=all and read back as usual.
    produce(cluster.bootstrap, "steady", STEADY_RECORDS, 100)
    assert consume(cluster.bootstrap, "steady", STEADY_RECORDS) == STEADY_RECORDS
    # The leader (1) and the new follower (3) measure what the throttle holds back.
    wait_until(
        lambda: throttled_byte_rate(cluster.nodes[1], "leader") > 0
        and throttled_byte_rate(cluster.nodes[3], "follower") > 0,
        20,
        "brokers 1 and 3 report a throttled replication byte rate",
    )

    verify = ("--verify", "--reassignment-json-file", str(plan_file))
    wait_until(
        lambda: "Reassignment of partition moving-0 is completed."
        in reassign(java_peers, bootstrap, *verify),
        60,
        "kafka-reassign-partitions.sh --verify reports moving-0 completed",
    )
    elapsed = time.monotonic() - started
    least = MOVED_RECORDS * RECORD_BYTES / THROTTLE * 0.7
    assert elapsed >= least, f"a megabyte moved in {elapsed:.1f} s at {THROTTLE} B/s"

    # The completed --verify lifted the throttle: no rates, no throttled replicas.
    for entity in (("brokers", "3"), ("topics", "moving")):
        described = java_peers.run(
            CONFIG_COMMAND,
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--entity-type",
            entity[0],
            "--entity-name",
            entity[1],
        ).stdout
        assert "throttled" not in described, described
    assert consume(cluster.nodes[3].bootstrap, "moving", MOVED_RECORDS) == MOVED_RECORDS
