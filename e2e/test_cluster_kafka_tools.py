"""Kafka's own tools against a three-node Strom cluster, through any of its brokers.

kafka-metadata-quorum.sh shows one leader and three voters at their controller endpoints
(with --bootstrap-server on every broker, and with --bootstrap-controller on the
controller listener); kafka-topics.sh, kafka-configs.sh and kafka-consumer-groups.sh give
the same answers whichever broker they are pointed at.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from java_peers import JavaPeers
from strom_cluster import CONTROLLER_LISTENER, StromCluster
from waiting import wait_until

pytestmark = pytest.mark.timeout(300)

QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromCluster]:
    made = StromCluster(tmp_path_factory.mktemp("tools-cluster"))
    made.start()
    try:
        yield made
    finally:
        made.stop()


def status(java_peers: JavaPeers, *bootstrap: str) -> dict[str, str]:
    done = java_peers.run(QUORUM_COMMAND, *bootstrap, "describe", "--status", timeout=90)
    pairs = (line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def test_metadata_quorum_status_is_the_same_through_every_broker(
    java_peers: JavaPeers, cluster: StromCluster
) -> None:
    seen = [status(java_peers, "--bootstrap-server", cluster.nodes[n].bootstrap) for n in (1, 2, 3)]
    leaders = {answer["LeaderId"] for answer in seen}
    assert len(leaders) == 1 and leaders.pop() in {"1", "2", "3"}
    expected_voters = ", ".join(
        f'{{"id": {n}, "endpoints": ["{CONTROLLER_LISTENER}://{cluster.controller_bootstrap(n)}"]}}'
        for n in (1, 2, 3)
    )
    for answer in seen:
        assert answer["CurrentVoters"] == f"[{expected_voters}]"
        assert int(answer["HighWatermark"]) > 0
        assert answer["CurrentObservers"] == "[]"


def test_metadata_quorum_through_the_controller_listener(
    java_peers: JavaPeers, cluster: StromCluster
) -> None:
    answer = status(java_peers, "--bootstrap-controller", cluster.controller_bootstrap(2))
    assert answer["LeaderId"] in {"1", "2", "3"}
    done = java_peers.run(
        QUORUM_COMMAND,
        "--bootstrap-controller",
        cluster.controller_bootstrap(3),
        "describe",
        "--replication",
        timeout=90,
    )
    rows = [line.split() for line in done.stdout.splitlines()[1:] if line.strip()]
    assert sorted(row[0] for row in rows) == ["1", "2", "3"]
    assert sorted(row[-1] for row in rows) == ["Follower", "Follower", "Leader"]


def test_topics_configs_and_groups_through_any_broker(
    java_peers: JavaPeers, cluster: StromCluster
) -> None:
    first, second, third = (cluster.nodes[n].bootstrap for n in (1, 2, 3))
    java_peers.run(
        TOPIC_COMMAND,
        "--bootstrap-server",
        second,
        "--create",
        "--topic",
        "my-replicated-topic",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
    )
    described = java_peers.run(
        TOPIC_COMMAND, "--bootstrap-server", third, "--describe", "--topic", "my-replicated-topic"
    ).stdout
    assert "ReplicationFactor: 3" in described
    partition_lines = [line for line in described.splitlines() if "Partition:" in line]
    assert len(partition_lines) == 3
    assert {line.split("Leader:")[1].split()[0] for line in partition_lines} == {"1", "2", "3"}

    java_peers.run(
        CONFIG_COMMAND,
        "--bootstrap-server",
        third,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "my-replicated-topic",
        "--add-config",
        "retention.ms=123456",
    )
    wait_until(
        lambda: "retention.ms=123456"
        in java_peers.run(
            CONFIG_COMMAND,
            "--bootstrap-server",
            first,
            "--describe",
            "--entity-type",
            "topics",
            "--entity-name",
            "my-replicated-topic",
        ).stdout,
        60,
        "broker 1 describes the config set through broker 3",
    )

    producer = Producer({"bootstrap.servers": first})
    for n in range(30):
        producer.produce("my-replicated-topic", value=b"v%d" % n, partition=n % 3)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": second,
            "group.id": "tools-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["my-replicated-topic"])
        got = 0
        deadline = time.monotonic() + 60
        while got < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        assert got == 30
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    for bootstrap in (first, second, third):
        listed = java_peers.run(GROUP_COMMAND, "--bootstrap-server", bootstrap, "--list").stdout
        assert "tools-group" in listed.split()
        described = java_peers.run(
            GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", "tools-group"
        ).stdout
        rows = [line.split() for line in described.splitlines() if "my-replicated-topic" in line]
        assert len(rows) == 3
        assert sum(int(row[3]) for row in rows) == 30  # CURRENT-OFFSET
        assert all(row[5] == "0" for row in rows)  # LAG
