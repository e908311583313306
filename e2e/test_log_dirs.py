"""Kafka's own kafka-log-dirs.sh (org.apache.kafka.tools.LogDirsCommand) against a Strom
broker with two log directories: each lists the partitions it holds, with the sizes of
their segment files on disk, and a topic list narrows the output; kafka-reassign-partitions.sh
with "log_dirs" moves replicas between them (AlterReplicaLogDirs)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from group_checks import create_topic, log_end_offsets, produce
from java_peers import JavaPeers
from kafka_topic_tools import reassign
from strom_process import StromProcess
from waiting import wait_until

LOG_DIRS_COMMAND = "org.apache.kafka.tools.LogDirsCommand"
PARTITIONS = 4


def kafka_log_dirs(java_peers: JavaPeers, broker: StromProcess, *args: str) -> dict[str, Any]:
    """The JSON document LogDirsCommand prints after its two progress lines."""
    done = java_peers.run(
        LOG_DIRS_COMMAND, "--bootstrap-server", broker.bootstrap, "--describe", *args, timeout=90
    )
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "Querying brokers for log directories information", done.stdout
    assert lines[1] == "Received log directory information from brokers 1", done.stdout
    document: dict[str, Any] = json.loads(lines[-1])
    return document


def segment_bytes_on_disk(log_dir: Path, topic: str) -> dict[str, int]:
    """ "<topic>-<partition>" -> bytes of its .log files, for the topic's partitions in
    `log_dir`."""
    return {
        entry.name: sum(f.stat().st_size for f in entry.glob("*.log"))
        for entry in log_dir.iterdir()
        if entry.is_dir() and entry.name.rsplit("-", 1)[0] == topic
    }


@pytest.mark.timeout(300)
def test_kafka_log_dirs_lists_each_dir_with_sizes_on_disk(
    strom_factory: Callable[..., StromProcess],
    java_peers: JavaPeers,
    tmp_path: Path,
    topic: str,
) -> None:
    dirs = [tmp_path / "disk-a", tmp_path / "disk-b"]
    broker = strom_factory(overrides={"log.dirs": ",".join(str(d) for d in dirs)})
    broker.start()
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, [10, 20, 30, 40], "log-dirs")
    other = f"{topic}-other"
    create_topic(broker.bootstrap, other, 1)

    document = kafka_log_dirs(java_peers, broker)
    [described] = document["brokers"]
    assert described["broker"] == 1
    by_dir = {entry["logDir"]: entry for entry in described["logDirs"]}
    assert set(by_dir) == {str(d) for d in dirs}
    listed: dict[str, int] = {}
    for log_dir in dirs:
        entry = by_dir[str(log_dir)]
        assert entry["error"] is None, entry
        partitions = {p["partition"]: p for p in entry["partitions"]}
        ours = {name: p["size"] for name, p in partitions.items() if name.startswith(f"{topic}-")}
        ours = {name: size for name, size in ours.items() if not name.startswith(other)}
        assert ours == segment_bytes_on_disk(log_dir, topic)
        assert all((p["offsetLag"], p["isFuture"]) == (0, False) for p in partitions.values())
        listed |= ours
    assert sorted(listed) == [f"{topic}-{p}" for p in range(PARTITIONS)]
    assert all(size > 0 for size in listed.values()), listed
    assert any(f"{other}-0" in {p["partition"] for p in e["partitions"]} for e in by_dir.values())

    # --topic-list: only that topic's partitions, every dir still listed.
    narrowed = kafka_log_dirs(java_peers, broker, "--topic-list", other)
    [described] = narrowed["brokers"]
    assert {e["logDir"] for e in described["logDirs"]} == {str(d) for d in dirs}
    names = [p["partition"] for e in described["logDirs"] for p in e["partitions"]]
    assert names == [f"{other}-0"]


@pytest.mark.timeout(300)
def test_kafka_reassign_partitions_moves_replicas_between_log_dirs(
    strom_factory: Callable[..., StromProcess],
    java_peers: JavaPeers,
    tmp_path: Path,
    topic: str,
) -> None:
    """kafka-reassign-partitions.sh with "log_dirs" (AlterReplicaLogDirs, then --verify):
    every partition ends in the dir asked for, kafka-log-dirs.sh says so, and the records
    are still there."""
    dirs = [tmp_path / "disk-a", tmp_path / "disk-b"]
    broker = strom_factory(overrides={"log.dirs": ",".join(str(d) for d in dirs)})
    broker.start()
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, [10, 20, 30, 40], "log-dirs")
    before = log_end_offsets(broker.bootstrap, topic, PARTITIONS)
    wanted = {p: dirs[p % 2] for p in range(PARTITIONS)}  # some move, some stay
    plan = tmp_path / "reassignment.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": topic, "partition": p, "replicas": [1], "log_dirs": [str(d)]}
                    for p, d in wanted.items()
                ],
            }
        )
    )
    started = reassign(
        java_peers, broker.bootstrap, "--reassignment-json-file", str(plan), "--execute"
    )
    assert "Successfully started partition reassignment" in started, started

    def where() -> dict[int, str]:
        [described] = kafka_log_dirs(java_peers, broker, "--topic-list", topic)["brokers"]
        return {
            int(p["partition"].rsplit("-", 1)[1]): e["logDir"]
            for e in described["logDirs"]
            for p in e["partitions"]
        }

    wait_until(
        lambda: where() == {p: str(d) for p, d in wanted.items()},
        60.0,
        lambda: f"partitions in {where()}, wanted {wanted}",
    )
    verified = reassign(
        java_peers, broker.bootstrap, "--reassignment-json-file", str(plan), "--verify"
    )
    assert "is complete" in verified and "is still in progress" not in verified, verified
    assert log_end_offsets(broker.bootstrap, topic, PARTITIONS) == before
    for p, log_dir in wanted.items():
        assert (log_dir / f"{topic}-{p}").is_dir()
        other = next(d for d in dirs if d != log_dir)
        assert not (other / f"{topic}-{p}").exists()
