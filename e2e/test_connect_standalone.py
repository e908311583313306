"""Kafka Connect's quickstart against Strom, with Apache Kafka's own jars: a standalone
worker (connect-standalone.sh) runs the file source and file sink connectors of Kafka's
config/ folder; every line of the input file arrives in topic connect-test and in the sink
file, and so do lines appended later."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_records import read_partition
from java_peers import PEERS_DIR
from kafka_commands import KafkaCommands
from strom_process import StromProcess, free_port

CONNECT_FILE_JAR = PEERS_DIR / "lib" / "connect-file-4.3.1.jar"
# A worker's first start loads its plugins and joins nothing: well under a minute on 2 busy
# cores, but allow for a loaded CI box.
ARRIVAL_TIMEOUT_S = 180.0


def write_properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


def quickstart_configs(work: Path, bootstrap: str) -> list[str]:
    """Kafka's config/connect-standalone.properties, connect-file-source.properties and
    connect-file-sink.properties, pointed at this broker, a free REST port and a short
    offset flush interval."""
    worker = write_properties(
        work / "connect-standalone.properties",
        {
            "bootstrap.servers": bootstrap,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "true",
            "value.converter.schemas.enable": "true",
            "offset.storage.file.filename": str(work / "connect.offsets"),
            "offset.flush.interval.ms": "1000",
            "plugin.path": str(CONNECT_FILE_JAR),
            "listeners": f"http://127.0.0.1:{free_port()}",
        },
    )
    source = write_properties(
        work / "connect-file-source.properties",
        {
            "name": "local-file-source",
            "connector.class": "FileStreamSource",
            "tasks.max": "1",
            "file": "test.txt",
            "topic": "connect-test",
        },
    )
    sink = write_properties(
        work / "connect-file-sink.properties",
        {
            "name": "local-file-sink",
            "connector.class": "FileStreamSink",
            "tasks.max": "1",
            "file": "test.sink.txt",
            "topics": "connect-test",
        },
    )
    return [str(worker), str(source), str(sink)]


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def topic_payloads(bootstrap: str) -> list[str]:
    """The payloads of connect-test's records, JsonConverter's envelopes checked."""
    payloads = []
    for _, _, value in read_partition(bootstrap, "connect-test"):
        assert value is not None
        envelope = json.loads(value)
        assert envelope["schema"] == {"type": "string", "optional": False}, envelope
        payloads.append(envelope["payload"])
    return payloads


@pytest.mark.timeout(420)
def test_file_source_to_topic_to_file_sink(
    strom: StromProcess, kafka_commands: KafkaCommands, tmp_path: Path
) -> None:
    source_file = tmp_path / "test.txt"
    sink_file = tmp_path / "test.sink.txt"
    source_file.write_text("foo\nbar\n")  # the quickstart's `echo -e "foo\nbar" > test.txt`

    worker = kafka_commands.start(
        "connect-standalone.sh",
        *quickstart_configs(tmp_path, strom.bootstrap),
        log_path=tmp_path / "connect-standalone",
        cwd=tmp_path,
    )
    try:
        worker.wait_for(
            lambda: lines_of(sink_file) == ["foo", "bar"],
            ARRIVAL_TIMEOUT_S,
            lambda: f"sink file: {lines_of(sink_file)}",
        )
        assert topic_payloads(strom.bootstrap) == ["foo", "bar"]

        # `echo Another line >> test.txt`, and more: each line arrives once, in order.
        appended = ["Another line", *(f"line {i}" for i in range(200))]
        with source_file.open("a") as f:
            f.write("".join(f"{line}\n" for line in appended))
        expected = ["foo", "bar", *appended]
        worker.wait_for(
            lambda: lines_of(sink_file) == expected,
            ARRIVAL_TIMEOUT_S,
            lambda: f"sink file has {len(lines_of(sink_file))} lines",
        )
        assert topic_payloads(strom.bootstrap) == expected
    finally:
        worker.stop()
