"""The quickstart's multi-broker walk-through, as our users know it, with Kafka's own tools
against a three-node Strom cluster:

    kafka-topics.sh --create --replication-factor 3 --partitions 1 --topic my-replicated-topic
    kafka-topics.sh --describe --topic my-replicated-topic      (Leader, Replicas, Isr)
    kafka-console-producer.sh --topic my-replicated-topic       (a few messages typed)
    kill -9 <the leader>
    kafka-topics.sh --describe ...   a new leader; the dead broker is out of the Isr
    kafka-console-consumer.sh --from-beginning ...   every message is still there
    (restart the dead broker)        it is back in the Isr
    kafka-leader-election.sh --election-type preferred --all-topic-partitions
                                     the first replica leads again

The tools' text output is read as a user reads it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from java_peers import JavaPeers
from kafka_topic_tools import create_topic, describe_partitions
from strom_cluster import StromCluster
from waiting import wait_until

pytestmark = pytest.mark.timeout(420)

CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
ELECTION_COMMAND = "org.apache.kafka.tools.LeaderElectionCommand"
TOPIC = "my-replicated-topic"
MESSAGES = [f"my test message {n}" for n in range(1, 6)]
TOOL_TIMEOUT_S = 90
# the dead broker's session expires (broker.session.timeout.ms) before it is fenced
FAILOVER_TIMEOUT_S = 60
REJOIN_TIMEOUT_S = 120


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromCluster]:
    made = StromCluster(tmp_path_factory.mktemp("walkthrough-cluster"))
    made.start()
    try:
        yield made
    finally:
        made.stop()


def describe(java_peers: JavaPeers, bootstrap: str) -> dict[str, str]:
    """The partition line of `kafka-topics.sh --describe`, as its "Key: value" fields."""
    (row,) = describe_partitions(java_peers, bootstrap, TOPIC)
    return row


def consume(java_peers: JavaPeers, bootstrap: str) -> list[str]:
    """`kafka-console-consumer.sh --from-beginning --max-messages N`: the lines it prints."""
    consumed = subprocess.run(
        java_peers.argv(
            CONSOLE_CONSUMER,
            "--bootstrap-server",
            bootstrap,
            "--topic",
            TOPIC,
            "--from-beginning",
            "--max-messages",
            str(len(MESSAGES)),
        ),
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        check=False,
    )
    assert consumed.returncode == 0, consumed.stderr[-4000:]
    return consumed.stdout.splitlines()


def brokers(value: str) -> list[int]:
    return [int(node) for node in value.split(",") if node]


def test_the_multi_broker_walkthrough(java_peers: JavaPeers, cluster: StromCluster) -> None:
    first = cluster.nodes[1].bootstrap
    create_topic(java_peers, first, TOPIC, partitions=1, replication_factor=3)

    described = describe(java_peers, first)
    replicas = brokers(described["Replicas"])
    assert sorted(replicas) == [1, 2, 3]
    leader = int(described["Leader"])
    assert leader == replicas[0]
    assert sorted(brokers(described["Isr"])) == [1, 2, 3]

    produced = subprocess.run(
        java_peers.argv(CONSOLE_PRODUCER, "--bootstrap-server", first, "--topic", TOPIC),
        input="".join(f"{message}\n" for message in MESSAGES),
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr[-4000:]

    # "Now let's use these messages" (this also makes __consumer_offsets, RF 3, while
    # every broker is up: the consumer after the failover needs it).
    assert consume(java_peers, first) == MESSAGES

    # Kill the leader, as the walk-through does (here without a chance to shut down).
    cluster.nodes[leader].kill()
    survivor = cluster.nodes[next(n for n in (1, 2, 3) if n != leader)].bootstrap

    def failed_over() -> dict[str, str] | None:
        now = describe(java_peers, survivor)
        moved = now["Leader"] not in ("none", str(leader))
        return now if moved and leader not in brokers(now["Isr"]) else None

    after = wait_until(failed_over, FAILOVER_TIMEOUT_S, "a new leader, the dead one out of the Isr")
    assert brokers(after["Replicas"]) == replicas  # the replicas stay what they were
    assert sorted(brokers(after["Isr"])) == sorted(r for r in replicas if r != leader)

    # "Even if the initially elected leader for writing has failed, these messages are
    # still available for consumption"
    assert consume(java_peers, survivor) == MESSAGES

    cluster.nodes[leader].start()
    rejoined = wait_until(
        lambda: (now := describe(java_peers, survivor))
        and sorted(brokers(now["Isr"])) == [1, 2, 3]
        and now,
        REJOIN_TIMEOUT_S,
        f"broker {leader} back in the Isr",
    )
    assert int(rejoined["Leader"]) != leader  # it came back as a follower

    elected = java_peers.run(
        ELECTION_COMMAND,
        "--bootstrap-server",
        survivor,
        "--election-type",
        "preferred",
        "--all-topic-partitions",
    )
    assert "Successfully completed leader election (PREFERRED) for partitions" in elected.stdout
    assert f"{TOPIC}-0" in elected.stdout
    final = describe(java_peers, survivor)
    assert int(final["Leader"]) == brokers(final["Replicas"])[0] == leader
    assert sorted(brokers(final["Isr"])) == [1, 2, 3]
