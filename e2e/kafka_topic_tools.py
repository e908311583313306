"""Kafka's own topic tools run from the Java peers' jars, as a user runs them:
`kafka-topics.sh` (create, with a replica assignment or not, describe) and
`kafka-reassign-partitions.sh`, with their text output parsed as a user reads it."""

from __future__ import annotations

from java_peers import JavaPeers

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def create_topic(
    java_peers: JavaPeers, bootstrap: str, topic: str, *, partitions: int, replication_factor: int
) -> None:
    """`kafka-topics.sh --create --replication-factor R --partitions P --topic T`."""
    created = java_peers.run(
        TOPIC_COMMAND,
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--replication-factor",
        str(replication_factor),
        "--partitions",
        str(partitions),
        "--topic",
        topic,
    )
    assert f"Created topic {topic}." in created.stdout, created.stdout


def create_with_assignment(
    java_peers: JavaPeers, bootstrap: str, topic: str, assignment: str
) -> None:
    """`kafka-topics.sh --create --replica-assignment 1:2,...`."""
    java_peers.run(
        TOPIC_COMMAND,
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--topic",
        topic,
        "--replica-assignment",
        assignment,
    )


def describe_partitions(java_peers: JavaPeers, bootstrap: str, topic: str) -> list[dict[str, str]]:
    """`kafka-topics.sh --describe`'s partition lines as their "Key: value" fields
    (Topic, Partition, Leader, Replicas, Isr, ...)."""
    done = java_peers.run(
        TOPIC_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--topic", topic
    )
    rows = []
    for line in done.stdout.splitlines():
        if "Partition:" in line:
            fields = (f.split(":", 1) for f in line.strip().split("\t") if ":" in f)
            rows.append({key.strip(): value.strip() for key, value in fields})
    return rows


def reassign(java_peers: JavaPeers, bootstrap: str, *args: str) -> str:
    """`kafka-reassign-partitions.sh --bootstrap-server ... <args>`: what it prints."""
    return java_peers.run(REASSIGN_COMMAND, "--bootstrap-server", bootstrap, *args).stdout
