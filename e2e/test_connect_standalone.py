"""Kafka Connect's quickstart against Strom, with Apache Kafka's own jars: a standalone
worker (connect-standalone.sh) runs the file source and file sink connectors with the
config/ files the project ships (Kafka's); every line of the input file arrives in topic
connect-test and in the sink file, and so do lines appended later."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_commands import (
    CONFIG_DIR,
    CONNECT_FILE_JAR,
    KafkaCommands,
    connect_payloads,
    file_lines,
    shipped_properties,
    write_properties,
)
from strom_process import StromProcess, free_port

# A worker's first start loads its plugins and joins nothing: well under a minute on 2 busy
# cores, but allow for a loaded CI box.
ARRIVAL_TIMEOUT_S = 180.0


def quickstart_configs(work: Path, bootstrap: str) -> list[str]:
    """config/connect-standalone.properties, connect-file-source.properties and
    connect-file-sink.properties as the project ships them (Kafka's), the worker's pointed
    at this broker, a free REST port, its own offsets file and a short flush interval."""
    worker = shipped_properties(
        "connect-standalone.properties",
        **{
            "bootstrap.servers": bootstrap,
            "offset.storage.file.filename": str(work / "connect.offsets"),
            "offset.flush.interval.ms": "1000",
            "plugin.path": str(CONNECT_FILE_JAR),  # shipped relative to the project's root
            "listeners": f"http://127.0.0.1:{free_port()}",
        },
    )
    return [
        str(write_properties(work / "connect-standalone.properties", worker)),
        str(CONFIG_DIR / "connect-file-source.properties"),
        str(CONFIG_DIR / "connect-file-sink.properties"),
    ]


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
            lambda: file_lines(sink_file) == ["foo", "bar"],
            ARRIVAL_TIMEOUT_S,
            lambda: f"sink file: {file_lines(sink_file)}",
        )
        assert connect_payloads(strom.bootstrap, "connect-test") == ["foo", "bar"]

        # `echo Another line >> test.txt`, and more: each line arrives once, in order.
        appended = ["Another line", *(f"line {i}" for i in range(200))]
        with source_file.open("a") as f:
            f.write("".join(f"{line}\n" for line in appended))
        expected = ["foo", "bar", *appended]
        worker.wait_for(
            lambda: file_lines(sink_file) == expected,
            ARRIVAL_TIMEOUT_S,
            lambda: f"sink file has {len(file_lines(sink_file))} lines",
        )
        assert connect_payloads(strom.bootstrap, "connect-test") == expected
    finally:
        worker.stop()
