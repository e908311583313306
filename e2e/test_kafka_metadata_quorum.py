"""Kafka's own kafka-metadata-quorum.sh (org.apache.kafka.tools.MetadataQuorumCommand)
against a Strom broker: describe --status and --replication show the metadata quorum, a
quorum of one on a single node."""

from __future__ import annotations

from java_peers import JavaPeers
from strom_process import StromProcess

QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"


def describe(java_peers: JavaPeers, broker: StromProcess, what: str) -> str:
    done = java_peers.run(
        QUORUM_COMMAND, "--bootstrap-server", broker.bootstrap, "describe", what, timeout=90
    )
    return done.stdout


def test_status_shows_this_node_leading_a_quorum_of_one(
    java_peers: JavaPeers, strom: StromProcess, topic: str
) -> None:
    java_peers.run(
        "org.apache.kafka.tools.TopicCommand",
        "--bootstrap-server",
        strom.bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "3",
    )
    status = dict(
        line.split(":", 1)
        for line in describe(java_peers, strom, "--status").splitlines()
        if ":" in line
    )
    status = {key.strip(): value.strip() for key, value in status.items()}
    assert status["LeaderId"] == "1"
    assert int(status["LeaderEpoch"]) >= 1
    # The topic's records (TopicRecord, 3 PartitionRecords) are in the metadata log.
    assert int(status["HighWatermark"]) >= 4
    assert status["MaxFollowerLag"] == "0"
    assert (
        status["CurrentVoters"] == f'[{{"id": 1, "endpoints": ["PLAINTEXT://{strom.bootstrap}"]}}]'
    )
    assert status["CurrentObservers"] == "[]"


def test_replication_lists_the_leader_with_its_log_end(
    java_peers: JavaPeers, strom: StromProcess
) -> None:
    lines = [line.split() for line in describe(java_peers, strom, "--replication").splitlines()]
    header, rows = lines[0], lines[1:]
    assert header[:4] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag"]
    (row,) = rows
    assert row[0] == "1" and row[3] == "0" and row[-1] == "Leader"
