"""Partition leadership on a three-node Strom cluster: Kafka's kafka-leader-election.sh
(ElectLeaders, forwarded to the active controller) and the controlled shutdown of a
broker that leads partitions of an RF 3 topic.

Partitions led by their preferred replica need no election, and an unknown partition is
refused; a leader stopped with SIGTERM (controlled shutdown) hands its partitions to
in-sync followers before it exits.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from java_peers import JavaPeers
from strom_cluster import StromCluster
from waiting import wait_until

pytestmark = pytest.mark.timeout(300)

ELECTION_COMMAND = "org.apache.kafka.tools.LeaderElectionCommand"
REQUEST_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromCluster]:
    made = StromCluster(tmp_path_factory.mktemp("leadership-cluster"))
    made.start()
    try:
        yield made
    finally:
        made.stop()


def create(cluster: StromCluster, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    (future,) = admin.create_topics(
        [NewTopic(name, num_partitions=3, replication_factor=3)]
    ).values()
    future.result(timeout=REQUEST_TIMEOUT_S)


def partitions(bootstrap: str, name: str) -> dict[int, tuple[int, list[int]]]:
    """Partition -> (leader, ISR) as a client's Metadata request sees them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = admin.list_topics(name, timeout=REQUEST_TIMEOUT_S).topics[name]
    return {index: (p.leader, list(p.isrs)) for index, p in topic.partitions.items()}


def test_kafka_leader_election_tool(java_peers: JavaPeers, cluster: StromCluster) -> None:
    create(cluster, "elected")
    wait_until(
        lambda: len(partitions(cluster.nodes[2].bootstrap, "elected")) == 3,
        30,
        "every broker knows the topic",
    )
    bootstrap = cluster.nodes[2].bootstrap
    one = java_peers.run(
        ELECTION_COMMAND,
        "--bootstrap-server",
        bootstrap,
        "--election-type",
        "preferred",
        "--topic",
        "elected",
        "--partition",
        "0",
    )
    assert "Valid replica already elected for partitions elected-0" in one.stdout

    everything = java_peers.run(
        ELECTION_COMMAND,
        "--bootstrap-server",
        bootstrap,
        "--election-type",
        "preferred",
        "--all-topic-partitions",
    )
    # Every partition is led by its preferred replica: the controller reports none.
    assert "Error" not in everything.stdout + everything.stderr

    missing = java_peers.run(
        ELECTION_COMMAND,
        "--bootstrap-server",
        bootstrap,
        "--election-type",
        "preferred",
        "--topic",
        "no-such-topic",
        "--partition",
        "0",
        check=False,
    )
    output = missing.stdout + missing.stderr
    assert missing.returncode != 0
    assert "Error completing leader election (PREFERRED) for partition: no-such-topic-0" in output
    assert "UnknownTopicOrPartitionException" in output


def test_a_stopping_leader_hands_its_partitions_over_before_it_exits(
    cluster: StromCluster,
) -> None:
    create(cluster, "handed-over")
    survivor = cluster.nodes[1]

    def full_isrs() -> bool:
        seen = partitions(survivor.bootstrap, "handed-over")
        return len(seen) == 3 and all(len(isr) == 3 for _, isr in seen.values())

    wait_until(full_isrs, 20, "every replica of handed-over in sync")
    before = partitions(survivor.bootstrap, "handed-over")
    leaving = next(leader for leader, _ in before.values() if leader != 1)
    cluster.nodes[leaving].stop()  # SIGTERM: exits 0 once the controller lets it go

    after = partitions(survivor.bootstrap, "handed-over")
    for index, (leader, isr) in after.items():
        assert leader not in (-1, leaving), (index, leader, isr)
        assert leaving not in isr, (index, isr)
    cluster.nodes[leaving].launch()
    cluster.nodes[leaving].wait_ready(60)
