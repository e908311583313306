"""Kafka's kafka-reassign-partitions.sh against a three-node Strom cluster.

A replication-factor-2 topic on brokers 1 and 2 with data: `--generate` for brokers 2 and
3 proposes moving it off broker 1, `--execute` starts that, `--verify` reports it complete
once broker 3 has caught up, and the records are all readable with broker 1 (which no
longer holds the partition) killed. A reassignment to a broker that is down cannot
complete: `--verify` says it is still in progress and `--cancel` puts the partition back
on its original replicas.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from java_peers import JavaPeers
from kafka_topic_tools import create_with_assignment, describe_partitions, reassign
from strom_cluster import StromCluster
from waiting import wait_until

pytestmark = pytest.mark.timeout(420)

RECORDS = 2_000
VERIFY_TIMEOUT_S = 90


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromCluster]:
    made = StromCluster(tmp_path_factory.mktemp("reassign-cluster"))
    made.start()
    try:
        yield made
    finally:
        made.stop()


def produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for n in range(RECORDS):
        producer.produce(topic, value=b"record-%d" % n, partition=0)
    assert producer.flush(60) == 0


def consume_all(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < RECORDS and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    got.append(message.value())
        return got
    finally:
        consumer.close()


def test_generate_execute_verify_moves_the_data(
    java_peers: JavaPeers, cluster: StromCluster, tmp_path: Path
) -> None:
    bootstrap = cluster.nodes[2].bootstrap
    create_with_assignment(java_peers, bootstrap, "moving", "1:2")
    produce(cluster.bootstrap, "moving")

    to_move = tmp_path / "topics-to-move.json"
    to_move.write_text(json.dumps({"topics": [{"topic": "moving"}], "version": 1}))
    generated = reassign(
        java_peers,
        bootstrap,
        "--generate",
        "--topics-to-move-json-file",
        str(to_move),
        "--broker-list",
        "2,3",
    )
    current_text, proposed_text = generated.split("Proposed partition reassignment configuration")
    current = json.loads(current_text.split("Current partition replica assignment")[1])
    assert current["partitions"][0]["replicas"] == [1, 2]
    plan = json.loads(proposed_text)
    (proposed,) = plan["partitions"]
    assert sorted(proposed["replicas"]) == [2, 3]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))

    executed = reassign(
        java_peers, bootstrap, "--execute", "--reassignment-json-file", str(plan_file)
    )
    assert "Successfully started partition reassignment for moving-0" in executed

    # a completed --verify also clears the throttle configs of every broker (each sent to
    # its broker, forwarded to the active controller)
    verify = ("--verify", "--reassignment-json-file", str(plan_file))
    wait_until(
        lambda: "Reassignment of partition moving-0 is completed."
        in reassign(java_peers, bootstrap, *verify),
        VERIFY_TIMEOUT_S,
        "kafka-reassign-partitions.sh --verify reports moving-0 completed",
    )
    (row,) = describe_partitions(java_peers, bootstrap, "moving")
    assert row["Replicas"] == ",".join(str(r) for r in proposed["replicas"])
    assert sorted(int(r) for r in row["Isr"].split(",")) == [2, 3]
    assert row["Leader"] in ("2", "3")

    # Broker 1 holds nothing of the topic any more: with it gone, everything is still read.
    cluster.nodes[1].kill()
    survivors = f"{cluster.nodes[2].bootstrap},{cluster.nodes[3].bootstrap}"
    values = consume_all(survivors, "moving")
    assert values == [b"record-%d" % n for n in range(RECORDS)]


def test_a_reassignment_that_cannot_finish_is_cancelled(
    java_peers: JavaPeers, cluster: StromCluster, tmp_path: Path
) -> None:
    bootstrap = cluster.nodes[1].bootstrap
    create_with_assignment(java_peers, bootstrap, "stuck", "1:2")
    produce(cluster.bootstrap, "stuck")
    # Broker 3 is down (still registered): a replica added there never catches up.
    cluster.nodes[3].kill()
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": "stuck", "partition": 0, "replicas": [1, 3]}],
            }
        )
    )
    executed = reassign(
        java_peers, bootstrap, "--execute", "--reassignment-json-file", str(plan_file)
    )
    assert "Successfully started partition reassignment for stuck-0" in executed
    verified = reassign(
        java_peers, bootstrap, "--verify", "--reassignment-json-file", str(plan_file)
    )
    assert "Reassignment of partition stuck-0 is still in progress." in verified
    (row,) = describe_partitions(java_peers, bootstrap, "stuck")
    assert row["Replicas"] == "1,3,2"  # the union while it runs, as Kafka shows it
    assert row["Isr"] == "1,2"

    cancelled = reassign(
        java_peers,
        bootstrap,
        "--cancel",
        # broker 3 is down: clearing its throttle configs would wait for it (as on Kafka)
        "--preserve-throttles",
        "--reassignment-json-file",
        str(plan_file),
    )
    assert "Successfully cancelled partition reassignment for: stuck-0" in cancelled
    assert "None of the specified partition moves are active." in cancelled
    (row,) = describe_partitions(java_peers, bootstrap, "stuck")
    assert (row["Replicas"], row["Isr"], row["Leader"]) == ("1,2", "1,2", "1")
    assert consume_all(bootstrap, "stuck") == [b"record-%d" % n for n in range(RECORDS)]
