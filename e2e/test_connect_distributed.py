"""Distributed Kafka Connect against Strom, with Apache Kafka's own jars: a
connect-distributed.sh worker keeps its connector configs, source offsets and statuses in
compacted topics on Strom, runs connectors created over its REST API, and after a restart
(SIGTERM, then start again) resumes from the offsets it committed: no line of the source
file is delivered twice, to the topic or to the sink file."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from group_checks import committed_offsets
from kafka_commands import (
    CONNECT_FILE_JAR,
    KafkaCommands,
    connect_payloads,
    file_lines,
    shipped_properties,
    write_properties,
)
from strom_process import StromProcess, free_port

TOPIC = "connect-distributed-test"
SINK_GROUP = "connect-local-file-sink"  # Connect's group of a sink connector: connect-<name>
# Connect's internal topics, their partition counts by default and the cleanup policy it
# asks for (and checks, refusing to start on a deleting one).
INTERNAL_TOPICS = {"connect-configs": 1, "connect-offsets": 25, "connect-status": 5}
START_TIMEOUT_S = 180.0
ARRIVAL_TIMEOUT_S = 180.0


class ConnectRest:
    """Connect's REST API on one worker."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: object = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def answers(self) -> bool:
        try:
            return "version" in self.call("GET", "/")
        except (OSError, urllib.error.URLError):
            return False

    def put_connector(self, name: str, config: dict[str, str]) -> bool:
        """Create (or update: PUT is idempotent, so a retry is safe) a connector. False
        while the worker cannot take it yet: starting (503), or its group rebalancing or
        its config topic being read (409), as happens right after a start."""
        try:
            self.call("PUT", f"/connectors/{name}/config", config)
        except urllib.error.HTTPError as e:
            if e.code in (409, 503):
                return False
            raise
        return True

    def task_states(self, connector: str) -> list[str]:
        try:
            status = self.call("GET", f"/connectors/{connector}/status")
        except urllib.error.HTTPError:
            return []
        return [task["state"] for task in status["tasks"]]


def worker_properties(work: Path, bootstrap: str, port: int) -> Path:
    """config/connect-distributed.properties as the project ships it (Kafka's, replication
    factor 1), pointed at this broker and a free REST port, with a short flush interval."""
    settings = shipped_properties(
        "connect-distributed.properties",
        **{
            "bootstrap.servers": bootstrap,
            "offset.flush.interval.ms": "1000",
            "plugin.path": str(CONNECT_FILE_JAR),  # shipped relative to the project's root
            "listeners": f"http://127.0.0.1:{port}",
        },
    )
    return write_properties(work / "connect-distributed.properties", settings)


@pytest.mark.timeout(540)
def test_worker_restart_resumes_without_redelivery(
    strom: StromProcess, kafka_commands: KafkaCommands, tmp_path: Path
) -> None:
    source_file = tmp_path / "source.txt"
    sink_file = tmp_path / "sink.txt"
    first = [f"first {i}" for i in range(300)]
    source_file.write_text("".join(f"{line}\n" for line in first))

    port = free_port()
    rest = ConnectRest(port)
    worker = kafka_commands.start(
        "connect-distributed.sh",
        str(worker_properties(tmp_path, strom.bootstrap, port)),
        log_path=tmp_path / "connect-distributed",
        cwd=tmp_path,
    )
    try:
        worker.wait_for(rest.answers, START_TIMEOUT_S, lambda: "no REST answer")

        def run_connector(name: str, config: dict[str, str]) -> None:
            config = {**config, "name": name, "tasks.max": "1"}
            worker.wait_for(
                lambda: rest.put_connector(name, config), START_TIMEOUT_S, lambda: "not taken"
            )
            worker.wait_for(
                lambda: rest.task_states(name) == ["RUNNING"],
                START_TIMEOUT_S,
                lambda: f"{name}: tasks {rest.task_states(name)}",
            )

        run_connector(
            "local-file-source",
            {"connector.class": "FileStreamSource", "topic": TOPIC, "file": str(source_file)},
        )
        run_connector(
            "local-file-sink",
            {"connector.class": "FileStreamSink", "topics": TOPIC, "file": str(sink_file)},
        )

        # Connect made its three topics on Strom, compacted as it asks.
        for topic, partitions in INTERNAL_TOPICS.items():
            described = kafka_commands.run(
                "kafka-configs.sh", "--bootstrap-server", strom.bootstrap, "--describe",
                "--entity-type", "topics", "--entity-name", topic, "--all",
            ).stdout  # fmt: skip
            assert "\n  cleanup.policy=compact " in described, described
            offsets = kafka_commands.run(
                "kafka-get-offsets.sh", "--bootstrap-server", strom.bootstrap, "--topic", topic
            ).stdout.split()
            assert len(offsets) == partitions, offsets

        worker.wait_for(
            lambda: file_lines(sink_file) == first,
            ARRIVAL_TIMEOUT_S,
            lambda: f"sink has {len(file_lines(sink_file))} lines",
        )
        assert connect_payloads(strom.bootstrap, TOPIC) == first

        # The source task's offset (its position in the file) is committed to
        # connect-offsets, and the sink's consumer offset to its group: then stop.
        def source_position() -> int | None:
            try:
                offsets = rest.call("GET", "/connectors/local-file-source/offsets")["offsets"]
            except urllib.error.HTTPError:  # 409 while the worker rebalances
                return None
            return offsets[0]["offset"]["position"] if offsets else None

        def sink_committed() -> int:
            return committed_offsets(strom.bootstrap, SINK_GROUP, TOPIC, 1)[0][0]

        size = source_file.stat().st_size
        worker.wait_for(
            lambda: source_position() == size,
            ARRIVAL_TIMEOUT_S,
            lambda: f"source offset {source_position()}, file size {size}",
        )
        worker.wait_for(
            lambda: sink_committed() == len(first),
            ARRIVAL_TIMEOUT_S,
            lambda: f"sink group offset {sink_committed()}",
        )
        worker.stop()

        # Lines written while the worker is down arrive after the restart, and only they:
        # re-delivered ones would come before the last of them.
        second = [f"second {i}" for i in range(200)]
        with source_file.open("a") as f:
            f.write("".join(f"{line}\n" for line in second))
        worker.start()
        worker.wait_for(
            lambda: second[-1] in file_lines(sink_file),
            START_TIMEOUT_S + ARRIVAL_TIMEOUT_S,
            lambda: f"sink has {len(file_lines(sink_file))} lines",
        )
        assert file_lines(sink_file) == first + second
        assert connect_payloads(strom.bootstrap, TOPIC) == first + second
        assert rest.task_states("local-file-source") == ["RUNNING"]
    finally:
        worker.stop()
