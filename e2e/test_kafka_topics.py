"""Kafka's own kafka-topics.sh (org.apache.kafka.tools.TopicCommand, from Maven Central)
against a real Strom broker: create, list, describe, alter partitions, delete."""

from __future__ import annotations

import re

import pytest
from java_peers import JavaPeers
from strom_process import StromProcess

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"


def kafka_topics(
    java_peers: JavaPeers, broker: StromProcess, *args: str, check: bool = True
) -> tuple[int, str, str]:
    done = java_peers.run(
        TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap, *args, timeout=90, check=check
    )
    return done.returncode, done.stdout, done.stderr


def describe_lines(out: str, topic: str) -> tuple[str, list[str]]:
    """The topic line and the partition lines of `--describe --topic`'s output."""
    lines = [line for line in out.splitlines() if line.strip()]
    heads = [line for line in lines if line.startswith(f"Topic: {topic}\t")]
    assert len(heads) == 1, f"expected one topic line for {topic}:\n{out}"
    parts = [line for line in lines if line.startswith(f"\tTopic: {topic}\tPartition: ")]
    return heads[0], parts


def fields(line: str) -> dict[str, str]:
    """'\\tTopic: t\\tPartition: 0\\tLeader: 1' -> {'Topic': 't', 'Partition': '0', ...}."""
    out = {}
    for cell in line.strip("\t").split("\t"):
        name, _, value = cell.partition(": ")
        out[name] = value.strip()
    return out


@pytest.mark.timeout(300)
def test_create_list_describe_alter_delete(
    strom: StromProcess, java_peers: JavaPeers, topic: str
) -> None:
    rc, out, err = kafka_topics(
        java_peers,
        strom,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "3",
        "--replication-factor",
        "1",
    )
    assert f"Created topic {topic}." in out, (out, err)

    # Creating it again fails with TopicExistsException (and --if-not-exists makes it a no-op).
    rc, out, err = kafka_topics(
        java_peers, strom, "--create", "--topic", topic, "--partitions", "3", check=False
    )
    assert rc != 0, (out, err)
    assert "already exists" in out + err, (out, err)
    kafka_topics(
        java_peers, strom, "--create", "--if-not-exists", "--topic", topic, "--partitions", "3"
    )

    rc, out, err = kafka_topics(java_peers, strom, "--list")
    assert topic in out.splitlines(), (out, err)

    rc, out, err = kafka_topics(java_peers, strom, "--describe", "--topic", topic)
    head, parts = describe_lines(out, topic)
    head_fields = fields(head)
    assert head_fields["PartitionCount"] == "3", head
    assert head_fields["ReplicationFactor"] == "1", head
    assert "Configs" in head_fields, head
    if "TopicId" in head_fields:
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", head_fields["TopicId"]), head
    assert [fields(p)["Partition"] for p in parts] == ["0", "1", "2"], out
    for p in parts:
        f = fields(p)
        assert re.fullmatch(r"\d+", f["Leader"]), p
        assert f["Replicas"] == f["Leader"], p
        assert f["Isr"] == f["Leader"], p

    # --alter --partitions goes through CreatePartitions.
    kafka_topics(java_peers, strom, "--alter", "--topic", topic, "--partitions", "5")
    rc, out, err = kafka_topics(java_peers, strom, "--describe", "--topic", topic)
    head, parts = describe_lines(out, topic)
    assert fields(head)["PartitionCount"] == "5", head
    assert [fields(p)["Partition"] for p in parts] == ["0", "1", "2", "3", "4"], out

    kafka_topics(java_peers, strom, "--delete", "--topic", topic)
    rc, out, err = kafka_topics(java_peers, strom, "--list")
    assert topic not in out.splitlines(), (out, err)

    rc, out, err = kafka_topics(java_peers, strom, "--describe", "--topic", topic, check=False)
    assert rc != 0, (out, err)
    assert "does not exist" in out + err, (out, err)
    # ... and describing it must not have auto-created it again.
    rc, out, err = kafka_topics(java_peers, strom, "--list")
    assert topic not in out.splitlines(), (out, err)


@pytest.mark.timeout(120)
def test_describe_all_topics(strom: StromProcess, java_peers: JavaPeers, topic: str) -> None:
    for i, partitions in enumerate((1, 2)):
        kafka_topics(
            java_peers,
            strom,
            "--create",
            "--topic",
            f"{topic}-{i}",
            "--partitions",
            str(partitions),
            "--replication-factor",
            "1",
        )
    _, out, _ = kafka_topics(java_peers, strom, "--describe")
    for i, partitions in enumerate((1, 2)):
        head, parts = describe_lines(out, f"{topic}-{i}")
        assert fields(head)["PartitionCount"] == str(partitions), head
        assert len(parts) == partitions, out
