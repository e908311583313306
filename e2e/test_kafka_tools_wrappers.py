"""`make kafka-tools`: Kafka's commands by their own names (kafka-topics.sh, ...,
connect-mirror-maker.sh) run Apache Kafka's jars, quietly, so a tutorial's lines paste as
is against a Strom broker. `make peers`, which resolves those jars, prints plain text."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from java_peers import PEERS_DIR
from kafka_commands import KafkaCommands
from strom.protocol import apis
from strom_process import StromProcess

KAFKA_VERSION = "4.3.1"  # e2e/peers/pom.xml

# The tools that print Kafka's release for --version, and those that print usage for --help.
VERSIONED = (
    "kafka-topics.sh",
    "kafka-console-producer.sh",
    "kafka-console-consumer.sh",
    "kafka-consumer-groups.sh",
    "kafka-configs.sh",
    "kafka-get-offsets.sh",
    "kafka-consumer-perf-test.sh",
    "kafka-leader-election.sh",
    "kafka-reassign-partitions.sh",
    "kafka-log-dirs.sh",
    "kafka-delete-records.sh",
    "kafka-broker-api-versions.sh",
    "kafka-acls.sh",
    "kafka-streams-application-reset.sh",
)
HELPED = {
    "kafka-producer-perf-test.sh": "usage: kafka-producer-perf-test",
    "kafka-metadata-quorum.sh": "usage: kafka-metadata-quorum",
    "connect-standalone.sh": "connect-standalone.properties [connector1.properties",
    "connect-distributed.sh": "connect-distributed.properties",
    "connect-mirror-maker.sh": "usage: connect-mirror-maker",
}


def test_every_command_is_there_and_runs_kafka(kafka_commands: KafkaCommands) -> None:
    names = sorted(p.name for p in kafka_commands.bin_dir.iterdir())
    assert set(VERSIONED) | set(HELPED) | {"kafka-run-class.sh"} == set(names)
    for name in names:
        assert os.access(kafka_commands.bin_dir / name, os.X_OK), name
    for name in VERSIONED:
        done = kafka_commands.run(name, "--version", timeout=60)
        assert done.stdout.strip() == KAFKA_VERSION, (name, done.stdout, done.stderr)
        assert done.stderr == "", (name, done.stderr)
    for name, usage in HELPED.items():
        # argparse4j exits 0 for --help; MirrorMaker's driver is argparse4j too (-h).
        flag = "-h" if name == "connect-mirror-maker.sh" else "--help"
        done = kafka_commands.run(name, flag, timeout=60, check=False)
        assert usage in done.stdout, (name, done.returncode, done.stdout, done.stderr)
    # Without arguments the Connect scripts print their usage and fail, as Kafka's do.
    for name in ("connect-standalone.sh", "connect-distributed.sh", "connect-mirror-maker.sh"):
        done = kafka_commands.run(name, check=False)
        assert done.returncode == 1 and done.stderr.startswith("USAGE: "), (name, done)


@pytest.mark.timeout(300)
def test_the_quickstart_round_trip_pastes_as_is(
    strom: StromProcess, kafka_commands: KafkaCommands, topic: str
) -> None:
    """The tutorial's create, produce (one record per line of stdin) and consume, with
    nothing on stderr: the tools log at WARN, and all went well."""
    topic = topic.replace("_", "-")  # else kafka-topics.sh warns of metric name collisions
    b = ["--bootstrap-server", strom.bootstrap]
    created = kafka_commands.run(
        "kafka-topics.sh", *b, "--create", "--topic", topic, "--partitions", "1"
    )
    assert created.stdout.strip() == f"Created topic {topic}."
    assert created.stderr == ""

    lines = ["This is a message", "This is another message", "and a third"]
    produced = kafka_commands.run(
        "kafka-console-producer.sh", *b, "--topic", topic, stdin="\n".join(lines) + "\n"
    )
    assert produced.stderr == ""

    consumed = kafka_commands.run(
        "kafka-console-consumer.sh",
        *b,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        str(len(lines)),
    )
    assert consumed.stdout.splitlines() == lines
    # (above it, Kafka 4.3's console consumer prints a note on the KIP-848 protocol)
    assert consumed.stderr.splitlines()[-1] == f"Processed a total of {len(lines)} messages"
    assert "WARN" not in consumed.stderr and "ERROR" not in consumed.stderr

    offsets = kafka_commands.run("kafka-get-offsets.sh", *b, "--topic", topic)
    assert offsets.stdout.strip() == f"{topic}:0:{len(lines)}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("broker", ["kafka", "strom"])
def test_kafka_acls_finds_no_authorizer(
    request: pytest.FixtureRequest, kafka_commands: KafkaCommands, broker: str
) -> None:
    """kafka-acls.sh --list on a broker without an authorizer: Apache Kafka's answer (no
    authorizer.class.name), and Strom's, which has none."""
    bootstrap = request.getfixturevalue(broker).bootstrap
    listed = kafka_commands.run(
        "kafka-acls.sh", "--bootstrap-server", bootstrap, "--list", check=False
    )
    assert listed.returncode == 1
    assert listed.stdout.startswith(
        "Error while executing ACL command: org.apache.kafka.common.errors."
        "SecurityDisabledException: No Authorizer is configured on the broker\n"
    ), listed.stdout


@pytest.mark.timeout(300)
def test_kafka_broker_api_versions_reads_stroms_table(
    strom: StromProcess, kafka_commands: KafkaCommands
) -> None:
    printed = kafka_commands.run(
        "kafka-broker-api-versions.sh", "--bootstrap-server", strom.bootstrap
    ).stdout
    usable = {
        int(key): (int(low), int(high or low))
        for key, low, high in re.findall(r"\((\d+)\): (\d+)(?: to (\d+))? \[usable", printed)
    }
    assert usable == {int(key): versions for key, versions in apis.SUPPORTED_VERSIONS.items()}


def test_the_peers_maven_prints_no_escape_codes() -> None:
    """e2e/peers/install.sh runs Maven as `maven` (java_peer.sh): Debian's Maven 3.8
    otherwise prints bold and reset escape codes even in batch mode."""
    if shutil.which("mvn") is None:
        pytest.skip("Maven is not installed")
    done = subprocess.run(
        ["bash", "-c", 'source "$0" && maven --version', str(PEERS_DIR / "java_peer.sh")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    printed = done.stdout + done.stderr
    assert done.returncode == 0, printed
    assert printed.startswith("Apache Maven "), printed
    assert "\x1b" not in printed, repr(printed)
