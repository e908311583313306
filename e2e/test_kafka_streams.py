"""Kafka Streams against Strom: Apache Kafka's WordCountDemo (kafka-streams-examples,
run with kafka-run-class.sh as Kafka's Streams quickstart does) counts the words of
streams-plaintext-input into streams-wordcount-output, at-least-once. Streams makes its
repartition and changelog topics, joins a group with its own assignor, commits, and deletes
consumed repartition records, and restores its state from its changelog after a restart;
the final count of every word equals Python's."""

from __future__ import annotations

import random
import re
import shutil
import struct
from collections import Counter
from pathlib import Path

import pytest
from e2e_records import read_partition
from kafka_commands import KafkaCommands
from strom_process import StromProcess

INPUT_TOPIC = "streams-plaintext-input"  # WordCountDemo's names
OUTPUT_TOPIC = "streams-wordcount-output"
WORD_COUNT_DEMO = "org.apache.kafka.streams.examples.wordcount.WordCountDemo"
PARTITIONS = 2
WORDS = ("kafka", "strom", "streams", "connect", "mirror", "broker", "topic", "log", "offset")
# Streams starts, makes its internal topics and rebalances before it counts anything.
COUNT_TIMEOUT_S = 180.0


def word_counts(lines: list[str]) -> Counter[str]:
    """What WordCountDemo computes: lower-cased, split on runs of non-word characters."""
    return Counter(w for line in lines for w in re.split(r"\W+", line.lower(), flags=re.ASCII))


def random_lines(rng: random.Random, count: int) -> list[str]:
    return [
        " ".join(rng.choice(WORDS).capitalize() for _ in range(rng.randint(1, 8)))
        for _ in range(count)
    ]


def produce_lines(bootstrap: str, lines: list[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for line in lines:
        producer.produce(INPUT_TOPIC, value=line.encode())
    assert producer.flush(60) == 0


def latest_counts(bootstrap: str) -> dict[str, int]:
    """The last count written for each word (a word's updates all go to one partition)."""
    latest: dict[str, int] = {}
    for partition in range(PARTITIONS):
        for _, key, value in read_partition(bootstrap, OUTPUT_TOPIC, partition):
            assert key is not None and value is not None
            (latest[key.decode()],) = struct.unpack(">q", value)  # Serdes.Long
    return latest


@pytest.mark.timeout(480)
def test_word_count_equals_pythons(
    strom: StromProcess, kafka_commands: KafkaCommands, tmp_path: Path
) -> None:
    b = ["--bootstrap-server", strom.bootstrap]
    # As the demo's javadoc says: create both topics first (the output one compacted, as
    # Kafka's Streams quickstart makes it).
    create = ["kafka-topics.sh", *b, "--create", "--partitions", str(PARTITIONS), "--topic"]
    kafka_commands.run(*create, INPUT_TOPIC)
    kafka_commands.run(*create, OUTPUT_TOPIC, "--config", "cleanup.policy=compact")
    rng = random.Random(14)
    lines = random_lines(rng, 300)
    produce_lines(strom.bootstrap, lines)

    config = tmp_path / "streams.properties"
    config.write_text(
        f"bootstrap.servers={strom.bootstrap}\n"
        "application.id=streams-wordcount\n"
        f"state.dir={tmp_path / 'state'}\n"
        "processing.guarantee=at_least_once\n"
        "commit.interval.ms=500\n"
        # Streams does not leave its group on close: the restarted instance's rebalance
        # waits for the old member's session to expire (Kafka's default 45 s).
        "session.timeout.ms=6000\n"
        "heartbeat.interval.ms=1000\n"
    )
    app = kafka_commands.start(
        "kafka-run-class.sh",
        WORD_COUNT_DEMO,
        str(config),
        log_path=tmp_path / "wordcount",
        cwd=tmp_path,
    )
    try:

        def counted(expected: Counter[str]) -> bool:
            return latest_counts(strom.bootstrap) == dict(expected)

        def state(expected: Counter[str]) -> str:
            return f"counts {latest_counts(strom.bootstrap)}, expected {dict(expected)}"

        app.wait_for(
            lambda: counted(word_counts(lines)), COUNT_TIMEOUT_S, lambda: state(word_counts(lines))
        )
        # Stopped (Ctrl-C: Streams commits and closes), its local state wiped, restarted
        # with more input: it restores its counts from the changelog topic on Strom and goes
        # on from its committed input offsets.
        app.stop()
        shutil.rmtree(tmp_path / "state")
        more = random_lines(rng, 200)
        produce_lines(strom.bootstrap, more)
        app.start()
        total = word_counts(lines + more)
        app.wait_for(lambda: counted(total), COUNT_TIMEOUT_S, lambda: state(total))
    finally:
        app.stop()
