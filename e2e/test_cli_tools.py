"""Strom's command-line tools (strom-topics, strom-console-producer, strom-console-consumer,
strom-consumer-groups, strom-configs) against a real broker, walking the seed tutorials'
sequence, and compared field by field with Kafka's own tools (TopicCommand,
ConsumerGroupCommand, ConsoleConsumer from the tools jar) run against the same broker."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import group_checks as gc
import pytest
from confluent_kafka import Consumer
from java_peers import JavaPeers
from strom_process import StromProcess, free_port
from waiting import wait_until

TOOL_TIMEOUT_S = 60.0
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"  # kafka-configs.sh; Kafka 4.x keeps it in core
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
TOOLS = {
    "strom-topics": "topics",
    "strom-console-producer": "console_producer",
    "strom-console-consumer": "console_consumer",
    "strom-consumer-groups": "consumer_groups",
    "strom-configs": "configs",
}


@dataclasses.dataclass
class Done:
    argv: list[str]
    rc: int
    out: str
    err: str

    def __str__(self) -> str:
        return (
            f"argv: {self.argv}\nexit status {self.rc}\n--- stdout ---\n{self.out[-4000:]}\n"
            f"--- stderr ---\n{self.err[-4000:]}"
        )


def tool_argv(name: str) -> list[str]:
    """Our console script from the venv running the tests (`python -m` if not installed)."""
    script = Path(sys.executable).parent / name
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", f"strom.cli.{TOOLS[name]}"]


def run(name: str, *args: str, stdin: str | None = None, check: bool = True) -> Done:
    argv = [*tool_argv(name), *args]
    done = subprocess.run(
        argv,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        check=False,
    )
    result = Done(argv, done.returncode, done.stdout, done.stderr)
    if check:
        assert result.rc == 0, str(result)
    return result


def kafka(java_peers: JavaPeers, main: str, *args: str, check: bool = True) -> Done:
    """One of Kafka's tools (C1-only JIT: these short runs start faster on a busy box)."""
    argv = java_peers.argv(main, *args)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    result = Done([main, *args], done.returncode, done.stdout, done.stderr)
    if check:
        assert result.rc == 0, str(result)
    return result


def kafka_in_parallel(java_peers: JavaPeers, *calls: Sequence[str]) -> list[Done]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(kafka, java_peers, *call) for call in calls]
        return [f.result() for f in futures]


# --- parsing what the tools print (the same parser for ours and Kafka's) -----------------


def cells(line: str) -> dict[str, str]:
    """'\\tTopic: t\\tPartition: 0\\tLeader: 1' -> {'Topic': 't', 'Partition': '0', ...}."""
    out = {}
    for cell in line.strip("\t").split("\t"):
        name, _, value = cell.partition(": ")
        out[name.strip()] = value.strip()
    return out


def described_topics(out: str) -> dict[str, dict[str, object]]:
    """--describe output: {topic: {"head": fields, "partitions": [fields, ...]}}."""
    topics: dict[str, dict[str, object]] = {}
    for line in out.splitlines():
        if line.startswith("Topic: "):
            head = cells(line)
            topics[head["Topic"]] = {"head": head, "partitions": []}
        elif line.startswith("\tTopic: "):
            part = cells(line)
            partitions = topics[part["Topic"]]["partitions"]
            assert isinstance(partitions, list)
            partitions.append(part)
    return topics


def table(out: str) -> list[dict[str, str]]:
    """Rows of the tool's whitespace-aligned table, keyed by its header (the first line
    starting with GROUP)."""
    lines = [line.split() for line in out.splitlines() if line.strip()]
    at = next(i for i, words in enumerate(lines) if words[:1] == ["GROUP"])
    header = lines[at]
    rows = [dict(zip(header, words, strict=True)) for words in lines[at + 1 :]]
    return rows


def key_of(row: dict[str, str]) -> tuple[str, ...]:
    return tuple(sorted(row.items()))


def same_table(ours: Done, theirs: Done) -> list[dict[str, str]]:
    """Our table equals Kafka's, row by row and field by field (rows in any order), and the
    lines are padded identically."""
    our_rows, their_rows = table(ours.out), table(theirs.out)
    assert sorted(map(key_of, our_rows)) == sorted(map(key_of, their_rows)), (
        f"--- ours ---\n{ours}\n--- Kafka's ---\n{theirs}"
    )
    assert sorted(line for line in ours.out.splitlines() if line.strip()) == sorted(
        line for line in theirs.out.splitlines() if line.strip()
    ), f"same fields, different padding\n--- ours ---\n{ours}\n--- Kafka's ---\n{theirs}"
    return our_rows


# --- the broker --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromProcess]:
    process = StromProcess(tmp_path_factory.mktemp("strom"), overrides=gc.BROKER_OVERRIDES)
    process.start()
    try:
        yield process
    finally:
        process.stop()


# --- the tutorial ------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_seed_tutorial_sequence_with_strom_tools_matches_kafkas_tools(
    broker: StromProcess, java_peers: JavaPeers
) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    topic, group = "testABC", "tutorial-group"

    # kafka-topics.sh --create --replication-factor 1 --partitions 1 --topic testABC
    created = run(
        "strom-topics",
        *b,
        "--create",
        "--replication-factor",
        "1",
        "--partitions",
        "1",
        "--topic",
        topic,
    )
    assert created.out == f"Created topic {topic}.\n"

    # kafka-topics.sh --list
    listed = run("strom-topics", *b, "--list")
    assert topic in listed.out.splitlines()
    assert listed.out == kafka(java_peers, TOPIC_COMMAND, *b, "--list").out

    # kafka-console-producer.sh --broker-list ... --topic testABC  (two lines typed)
    run(
        "strom-console-producer",
        "--broker-list",
        broker.bootstrap,
        "--topic",
        topic,
        stdin="This is a message\nThis is another message\n",
    )

    # kafka-console-consumer.sh --bootstrap-server ... --topic testABC --from-beginning
    consumed = run(
        "strom-console-consumer",
        *b,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "2",
        "--timeout-ms",
        "30000",
    )
    assert consumed.out == "This is a message\nThis is another message\n"
    assert "Processed a total of 2 messages" in consumed.err

    # kafka-topics.sh --describe --topic testABC
    described = run("strom-topics", *b, "--describe", "--topic", topic)
    theirs = kafka(java_peers, TOPIC_COMMAND, *b, "--describe", "--topic", topic)
    assert described_topics(described.out) == described_topics(theirs.out)
    assert described.out == theirs.out
    head = described_topics(described.out)[topic]["head"]
    assert isinstance(head, dict)
    assert (head["PartitionCount"], head["ReplicationFactor"], head["Configs"]) == ("1", "1", "")

    # kafka-topics.sh --alter --topic testABC --partitions 3, and describe again
    altered = run("strom-topics", *b, "--alter", "--topic", topic, "--partitions", "3")
    assert altered.out == ""
    described = run("strom-topics", *b, "--describe", "--topic", topic)
    theirs = kafka(java_peers, TOPIC_COMMAND, *b, "--describe", "--topic", topic)
    assert described.out == theirs.out
    parsed = described_topics(described.out)[topic]
    assert parsed["head"]["PartitionCount"] == "3"  # type: ignore[index]
    partitions = parsed["partitions"]
    assert isinstance(partitions, list)
    assert [p["Partition"] for p in partitions] == ["0", "1", "2"]
    assert all(p["Leader"] == p["Replicas"] == p["Isr"] == "1" for p in partitions)

    # keyed lines: --property parse.key=true --property key.separator=:
    run(
        "strom-console-producer",
        *b,
        "--topic",
        topic,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        stdin="k1:v1\nk2:v2\nk3:v3\nk4:v4\n",
    )
    keyed = run(
        "strom-console-consumer",
        *b,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "6",
        "--timeout-ms",
        "30000",
        "--property",
        "print.key=true",
        "--property",
        "print.partition=true",
    )
    lines = keyed.out.splitlines()
    assert sorted(line.split("\t", 1)[1] for line in lines) == sorted(
        ["null\tThis is a message", "null\tThis is another message"]
        + [f"k{i}\tv{i}" for i in range(1, 5)]
    )
    # murmur2, as the Java producer partitions keys (kafka-console-producer put them there)
    placed = {line.split("\t")[1]: line.split("\t")[0] for line in lines if "\tk" in line}
    assert placed == {
        "k1": "Partition:2",
        "k2": "Partition:0",
        "k3": "Partition:1",
        "k4": "Partition:1",
    }

    # a consumer group: kafka-console-consumer.sh --group tutorial-group --from-beginning
    read = run(
        "strom-console-consumer",
        *b,
        "--topic",
        topic,
        "--group",
        group,
        "--from-beginning",
        "--max-messages",
        "6",
        "--timeout-ms",
        "30000",
    )
    assert len(read.out.splitlines()) == 6
    run("strom-console-producer", *b, "--topic", topic, stdin="late-1\nlate-2\n")

    # kafka-consumer-groups.sh --list / --describe --group (lag of the two late records)
    ours = run("strom-consumer-groups", *b, "--list")
    theirs = kafka(java_peers, GROUP_COMMAND, *b, "--list")
    assert group in ours.out.splitlines()
    assert sorted(ours.out.splitlines()) == sorted(theirs.out.splitlines())
    ours = run("strom-consumer-groups", *b, "--describe", "--group", group)
    theirs = kafka(java_peers, GROUP_COMMAND, *b, "--describe", "--group", group)
    rows = same_table(ours, theirs)
    message = f"Consumer group '{group}' has no active members."
    assert message in ours.err and message in theirs.err
    assert sorted(int(r["PARTITION"]) for r in rows) == [0, 1, 2]
    assert {r["TOPIC"] for r in rows} == {topic}
    assert sum(int(r["CURRENT-OFFSET"]) for r in rows) == 6
    assert sum(int(r["LOG-END-OFFSET"]) for r in rows) == 8
    assert sum(int(r["LAG"]) for r in rows) == 2
    assert {(r["CONSUMER-ID"], r["HOST"], r["CLIENT-ID"]) for r in rows} == {("-", "-", "-")}

    # kafka-consumer-groups.sh --reset-offsets --to-earliest: planned alike, then executed
    reset = ["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest"]
    planned = same_table(
        run("strom-consumer-groups", *b, *reset, "--dry-run"),
        kafka(java_peers, GROUP_COMMAND, *b, *reset, "--dry-run"),
    )
    assert {(r["PARTITION"], r["NEW-OFFSET"]) for r in planned} == {
        ("0", "0"),
        ("1", "0"),
        ("2", "0"),
    }
    run("strom-consumer-groups", *b, *reset, "--execute")
    rows = table(run("strom-consumer-groups", *b, "--describe", "--group", group).out)
    assert {r["CURRENT-OFFSET"] for r in rows} == {"0"}
    assert sum(int(r["LAG"]) for r in rows) == 8

    # the group reads everything again
    again = run(
        "strom-console-consumer",
        *b,
        "--topic",
        topic,
        "--group",
        group,
        "--max-messages",
        "8",
        "--timeout-ms",
        "30000",
    )
    assert sorted(again.out.splitlines()) == sorted(
        ["This is a message", "This is another message", "late-1", "late-2"]
        + [f"v{i}" for i in range(1, 5)]
    )
    rows = table(run("strom-consumer-groups", *b, "--describe", "--group", group).out)
    assert sum(int(r["LAG"]) for r in rows) == 0

    # kafka-topics.sh --delete --topic testABC
    deleted = run("strom-topics", *b, "--delete", "--topic", topic)
    assert deleted.out == ""
    assert topic not in run("strom-topics", *b, "--list").out.splitlines()
    gone = run("strom-topics", *b, "--describe", "--topic", topic, check=False)
    assert gone.rc == 1, str(gone)
    assert f"Topic '{topic}' does not exist as expected" in gone.err


# --- a live group, described by both tools ---------------------------------------------


@pytest.mark.timeout(240)
def test_active_group_views_match_kafkas(
    broker: StromProcess, java_peers: JavaPeers, tmp_path: Path
) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    topic, group = "live-topic", "live-group"
    run("strom-topics", *b, "--create", "--topic", topic, "--partitions", "3")
    run("strom-console-producer", *b, "--topic", topic, stdin="".join(f"r{i}\n" for i in range(9)))
    members = []
    for client_id in ("console-consumer", "second-reader"):
        with (tmp_path / f"{client_id}.err").open("w") as err:
            members.append(
                subprocess.Popen(
                    [
                        *tool_argv("strom-console-consumer"),
                        *b,
                        "--topic",
                        topic,
                        "--group",
                        group,
                        "--from-beginning",
                        "--consumer-property",
                        f"client.id={client_id}",
                        "--consumer-property",
                        "auto.commit.interval.ms=100",
                        "--timeout-ms",
                        "120000",
                    ],
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                )
            )
    try:

        def settled() -> bool:
            """Both members own partitions and have committed all 9 records (so the
            views below cannot change between our tool's run and Kafka's), wherever the
            producer's partitioner put them."""
            done = run(
                "strom-consumer-groups",
                *b,
                "--describe",
                "--group",
                group,
                "--members",
                check=False,
            )
            if done.rc != 0 or "rebalancing" in done.err:
                return False
            members_rows = table(done.out)
            if len(members_rows) != 2 or sum(int(r["#PARTITIONS"]) for r in members_rows) != 3:
                return False
            done = run("strom-consumer-groups", *b, "--describe", "--group", group, check=False)
            rows = table(done.out) if done.rc == 0 else []
            # A partition the producer left empty has no commit: LAG "-" there.
            return len(rows) == 3 and all(
                r["LAG"] == "0" or r["LOG-END-OFFSET"] == "0" for r in rows
            )

        gc.wait_until(
            settled,
            60,
            lambda: run(
                "strom-consumer-groups", *b, "--describe", "--group", group, check=False
            ).out,
        )
        views = [
            ["--describe", "--group", group],
            ["--describe", "--group", group, "--members"],
            ["--describe", "--group", group, "--members", "--verbose"],
            ["--describe", "--group", group, "--state"],
        ]
        ours = [run("strom-consumer-groups", *b, *view) for view in views]
        theirs = kafka_in_parallel(java_peers, *([GROUP_COMMAND, *b, *view] for view in views))
        offsets, members_rows, _, state = (
            same_table(o, t) for o, t in zip(ours, theirs, strict=True)
        )
        assert {r["CLIENT-ID"] for r in offsets} == {"console-consumer", "second-reader"}
        assert {r["HOST"] for r in offsets} == {"/127.0.0.1"}
        assert sorted(r["#PARTITIONS"] for r in members_rows) == ["1", "2"]
        [state_row] = state
        assert (state_row["STATE"], state_row["#MEMBERS"], state_row["ASSIGNMENT-STRATEGY"]) == (
            "Stable",
            "2",
            "range",
        )

        # offsets of an active group cannot be reset
        refused = run(
            "strom-consumer-groups",
            *b,
            "--reset-offsets",
            "--group",
            group,
            "--all-topics",
            "--to-earliest",
            "--execute",
            check=False,
        )
        assert refused.rc == 1, str(refused)
        assert (
            f"Assignments can only be reset if the group '{group}' is inactive, but the current "
            "state is Stable." in refused.err
        )
    finally:
        for member in members:
            member.send_signal(signal.SIGTERM)
        outputs = [member.communicate(timeout=TOOL_TIMEOUT_S)[0] for member in members]
    # SIGTERM ends a console consumer as Ctrl-C does: exit 0 and the count on stderr
    assert [m.returncode for m in members] == [0, 0]
    assert sorted(line for out in outputs for line in out.splitlines()) == [
        f"r{i}" for i in range(9)
    ]
    for client_id in ("console-consumer", "second-reader"):
        assert "Processed a total of" in (tmp_path / f"{client_id}.err").read_text()
    rows = table(run("strom-consumer-groups", *b, "--describe", "--group", group).out)
    assert sum(int(r["LAG"]) for r in rows) == 0  # what was printed was committed
    deleted = run("strom-consumer-groups", *b, "--delete", "--group", group)
    assert deleted.out == f"Deletion of requested consumer groups ('{group}') was successful.\n"


# --- the formatter ---------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_console_consumer_prints_what_kafkas_prints(
    broker: StromProcess, java_peers: JavaPeers
) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    topic = "formatted"
    run("strom-topics", *b, "--create", "--topic", topic, "--partitions", "2")
    run(
        "strom-console-producer",
        *b,
        "--topic",
        topic,
        "--property",
        "parse.key=true",
        "--property",
        "parse.headers=true",
        "--property",
        "null.marker=NULL",
        stdin="h1:v1,h2:v2\tk1\tvalue one\nNO:x\tNULL\tkeyless\n\tk3\tno headers\n",
    )
    props = [
        "print.timestamp=true",
        "print.partition=true",
        "print.offset=true",
        "print.headers=true",
        "print.key=true",
        "key.separator= | ",
    ]
    common = ["--topic", topic, "--from-beginning", "--max-messages", "3", "--timeout-ms", "30000"]
    ours = run(
        "strom-console-consumer", *b, *common, *(arg for p in props for arg in ("--property", p))
    )
    theirs = kafka(
        java_peers,
        CONSOLE_CONSUMER,
        *b,
        *common,
        *(arg for p in props for arg in ("--formatter-property", p)),
    )
    assert sorted(ours.out.splitlines()) == sorted(theirs.out.splitlines()), (
        f"--- ours ---\n{ours}\n--- Kafka's ---\n{theirs}"
    )
    assert any(" | h1:v1,h2:v2 | k1 | value one" in line for line in ours.out.splitlines())
    assert any(" | NO:x | null | keyless" in line for line in ours.out.splitlines())
    assert any(" | NO_HEADERS | k3 | no headers" in line for line in ours.out.splitlines())


# --- configs -----------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_topic_configs_described_as_kafka_describes_them(
    broker: StromProcess, java_peers: JavaPeers, tmp_path: Path
) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    topic = "with-configs"
    run(
        "strom-topics",
        *b,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "1",
        "--config",
        "retention.ms=1000",
        "--config",
        "cleanup.policy=compact",
    )
    ours = run("strom-topics", *b, "--describe", "--topic", topic)
    theirs = kafka(java_peers, TOPIC_COMMAND, *b, "--describe", "--topic", topic)
    assert described_topics(ours.out) == described_topics(theirs.out)
    head = described_topics(ours.out)[topic]["head"]
    assert isinstance(head, dict)
    assert sorted(head["Configs"].split(",")) == ["cleanup.policy=compact", "retention.ms=1000"]

    described = run(
        "strom-configs", *b, "--describe", "--entity-type", "topics", "--entity-name", topic
    )
    lines = described.out.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert lines[1].startswith(
        "  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy="
        "compact, "
    )
    assert lines[2].startswith(
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
    )
    assert len(lines) == 3
    everything = run("strom-configs", *b, "--describe", "--topic", topic, "--all").out
    assert everything.splitlines()[0] == f"All configs for topic {topic} are:"
    assert "  segment.bytes=" in everything

    # kafka-configs.sh --alter: set a list value and a plain one, remove another
    altered = run(
        "strom-configs",
        *b,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--add-config",
        "cleanup.policy=[compact,delete],segment.ms=60000",
        "--delete-config",
        "retention.ms",
    )
    assert altered.out == f"Completed updating config for topic {topic}.\n"
    ours_after = run("strom-configs", *b, "--describe", "--topic", topic).out
    assert [line.split(" sensitive=")[0] for line in ours_after.splitlines()[1:]] == [
        "  cleanup.policy=compact,delete",
        "  segment.ms=60000",
    ]
    theirs_after = kafka(
        java_peers,
        CONFIG_COMMAND,
        *b,
        "--describe",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
    )
    assert ours_after == theirs_after.out
    bad = run(
        "strom-configs",
        *b,
        "--alter",
        "--topic",
        topic,
        "--add-config",
        "retention.ms=soon",
        check=False,
    )
    assert bad.rc == 1 and "retention.ms" in bad.err, str(bad)

    # --command-config: client properties from a file, refused by name when unknown
    good = tmp_path / "client.properties"
    good.write_text("client.id=from-a-file\n# a comment\nsocket.timeout.ms=30000\n")
    assert topic in run("strom-topics", *b, "--command-config", str(good), "--list").out
    bad = tmp_path / "bad.properties"
    bad.write_text("no.such.property=1\n")
    refused = run("strom-topics", *b, "--command-config", str(bad), "--list", check=False)
    assert refused.rc == 1 and "no.such.property" in refused.err, str(refused)


@pytest.mark.timeout(180)
def test_configs_entity_default_and_unknown_brokers(
    broker: StromProcess, java_peers: JavaPeers
) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    defaults = ("--entity-type", "brokers", "--entity-default")
    altered = run(
        "strom-configs", *b, "--alter", *defaults, "--add-config", "log.cleaner.backoff.ms=16000"
    )
    assert altered.out == "Completed updating default config for brokers in the cluster.\n"
    ours = run("strom-configs", *b, "--describe", *defaults).out
    theirs = kafka(java_peers, CONFIG_COMMAND, *b, "--describe", *defaults).out
    assert ours == theirs
    assert (
        "log.cleaner.backoff.ms=16000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
        in ours
    )
    run("strom-configs", *b, "--alter", *defaults, "--delete-config", "log.cleaner.backoff.ms")
    assert "log.cleaner.backoff.ms" not in run("strom-configs", *b, "--describe", *defaults).out

    # an unknown broker id: at once, not after librdkafka's request time-out
    started = time.monotonic()
    unknown = ("--entity-type", "brokers", "--entity-name", "99")
    described = run("strom-configs", *b, "--describe", *unknown)
    assert described.out == kafka(java_peers, CONFIG_COMMAND, *b, "--describe", *unknown).out
    assert described.out == "The broker '99' doesn't exist and doesn't have dynamic config.\n"
    refused = run(
        "strom-configs",
        *b,
        "--alter",
        *unknown,
        "--add-config",
        "log.cleaner.backoff.ms=1",
        check=False,
    )
    assert refused.rc == 1 and "Broker 99 is not in the cluster" in refused.err, str(refused)
    assert time.monotonic() - started < 20.0


@pytest.mark.timeout(240)
def test_delete_offsets_reports_as_kafkas_tool(broker: StromProcess, java_peers: JavaPeers) -> None:
    """--delete-offsets (OffsetDelete) of a subscribed topic, of one partition, of unknown
    topics and partitions and of an unknown group: our report is Kafka's, line for line."""
    b = ["--bootstrap-server", broker.bootstrap]
    topic, group = "offsets-to-delete", "deleting-group"
    run("strom-topics", *b, "--create", "--topic", topic, "--partitions", "3")
    run(
        "strom-console-producer",
        *b,
        "--topic",
        topic,
        "--property",
        "parse.key=true",
        stdin="".join(f"{k}\tv\n" for k in "abcdefghij"),
    )

    def both(*args: str) -> str:
        ours = run("strom-consumer-groups", *b, "--delete-offsets", *args, check=False)
        theirs = kafka(java_peers, GROUP_COMMAND, *b, "--delete-offsets", *args)
        assert ours.out == theirs.out, f"--- ours ---\n{ours}\n--- Kafka's ---\n{theirs}"
        return ours.out

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    try:
        read = wait_until(
            lambda: consumer.poll(0.5) is not None and len(consumer.assignment()) == 3,
            60.0,
            "the consumer owns the topic's 3 partitions",
        )
        assert read
        consumer.commit(asynchronous=False)  # offsets for the partitions read so far
        subscribed = both("--group", group, "--topic", topic)
        assert "Encountered some partition-level error" in subscribed
        assert subscribed.count("GroupSubscribedToTopicException") == 3
    finally:
        consumer.close()
    assert "Successful" in both("--group", group, "--topic", f"{topic}:1")
    unknown_topic = both("--group", group, "--topic", "no-such-topic")
    assert unknown_topic.startswith("Request succeeded for deleting offsets from group")
    assert "no-such-topic   -          Error: " in unknown_topic
    assert "UnknownTopicOrPartitionException" in both("--group", group, "--topic", f"{topic}:7")
    assert "Error: The group id does not exist." in both("--group", "nobody", "--topic", topic)
    # ours alone: Strom forgets a group with neither members nor offsets at once, Kafka at
    # its next offsets cleanup, so a second run would find no group here
    done = run("strom-consumer-groups", *b, "--delete-offsets", "--group", group, "--topic", topic)
    assert done.out.count("Successful") == 3
    committed = run("strom-consumer-groups", *b, "--describe", "--group", group, check=False)
    assert topic not in committed.out


# --- DescribeTopicPartitions ------------------------------------------------------------


def requests_of(broker: StromProcess, api: str) -> float:
    """How many requests of `api` the broker handled, from its /metrics."""
    prefix = f'strom_requests_total{{api="{api}"'
    with urllib.request.urlopen(f"{broker.metrics_url}/metrics", timeout=10) as response:
        lines = response.read().decode().splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith(prefix))


@pytest.mark.timeout(240)
def test_kafka_topics_describe_pages_through_describe_topic_partitions(
    strom_factory: Callable[..., StromProcess], java_peers: JavaPeers
) -> None:
    """Kafka 4's TopicCommand describes topics with DescribeTopicPartitions; a broker limit
    of 3 partitions a response makes it follow next_cursor through 4 pages for 7+2+1
    partitions, and what it prints is what strom-topics prints."""
    broker = strom_factory(overrides={"max.request.partition.size.limit": "3"})
    broker.start()
    b = ["--bootstrap-server", broker.bootstrap]
    for name, count in (("paged-a", 7), ("paged-b", 2), ("paged-c", 1)):
        run("strom-topics", *b, "--create", "--topic", name, "--partitions", str(count))
    before = requests_of(broker, "DESCRIBE_TOPIC_PARTITIONS")
    theirs = kafka(java_peers, TOPIC_COMMAND, *b, "--describe", "--topic", "paged-.*")
    pages = requests_of(broker, "DESCRIBE_TOPIC_PARTITIONS") - before
    assert pages >= 4, f"{pages} DescribeTopicPartitions requests\n{theirs}"
    described = described_topics(theirs.out)
    assert {name: len(t["partitions"]) for name, t in described.items()} == {  # type: ignore[arg-type]
        "paged-a": 7,
        "paged-b": 2,
        "paged-c": 1,
    }
    ours = run("strom-topics", *b, "--describe", "--topic", "paged-.*")
    assert sorted(ours.out.splitlines()) == sorted(theirs.out.splitlines())  # topics in any order
    # the client's own limit, lower than the broker's, pages too
    small = kafka(
        java_peers,
        TOPIC_COMMAND,
        *b,
        "--describe",
        "--topic",
        "paged-a",
        "--partition-size-limit-per-response",
        "2",
    )
    assert small.out == run("strom-topics", *b, "--describe", "--topic", "paged-a").out


# --- errors ------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_errors_name_the_problem_and_exit_non_zero(broker: StromProcess) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    nowhere = ["--bootstrap-server", f"127.0.0.1:{free_port()}"]
    unreachable = [
        ("strom-topics", ["--list"], None),
        ("strom-console-producer", ["--topic", "t"], "a line\n"),
        ("strom-console-consumer", ["--topic", "t", "--timeout-ms", "30000"], None),
        ("strom-consumer-groups", ["--list"], None),
        ("strom-configs", ["--describe", "--topic", "t"], None),
    ]
    for name, args, stdin in unreachable:
        done = run(name, *nowhere, *args, stdin=stdin, check=False)
        assert done.rc != 0 and "cannot connect to bootstrap server" in done.err, str(done)
        assert "Connection refused" in done.err, str(done)
        assert "Traceback" not in done.err, str(done)

    for name in TOOLS:
        helped = run(name, "--help")
        assert helped.out.startswith(f"usage: {name}"), str(helped)

    missing = run("strom-topics", *b, "--describe", "--topic", "no-such-topic", check=False)
    assert missing.rc == 1, str(missing)
    assert missing.err == (
        "Error while executing topic command : Topic 'no-such-topic' does not exist as expected\n"
    )
    assert "no-such-topic" not in run("strom-topics", *b, "--list").out  # not auto-created

    zero = run("strom-topics", *b, "--create", "--topic", "z", "--partitions", "0", check=False)
    assert zero.rc != 0 and "The partitions must be greater than 0" in zero.err, str(zero)
    run("strom-topics", *b, "--create", "--topic", "two", "--partitions", "2")
    fewer = run("strom-topics", *b, "--alter", "--topic", "two", "--partitions", "1", check=False)
    assert fewer.rc == 1 and "higher than the requested 1" in fewer.err, str(fewer)
    again = run("strom-topics", *b, "--create", "--topic", "two", check=False)
    assert again.rc == 1 and "Topic 'two' already exists." in again.err, str(again)
    run("strom-topics", *b, "--create", "--topic", "two", "--if-not-exists")
    internal = run("strom-topics", *b, "--delete", "--topic", "__consumer_offsets", check=False)
    assert internal.rc == 1 and "internal topic" in internal.err, str(internal)

    no_group = run("strom-consumer-groups", *b, "--describe", "--group", "nobody", check=False)
    assert no_group.rc == 1 and "Consumer group 'nobody' does not exist." in no_group.err
    bad_partition = run(
        "strom-consumer-groups",
        *b,
        "--reset-offsets",
        "--group",
        "g",
        "--topic",
        "two:7",
        "--to-earliest",
        check=False,
    )
    assert bad_partition.rc == 1 and 'The partitions "two-7" do not exist' in bad_partition.err
    started = time.monotonic()
    no_partition = run(
        "strom-console-consumer",
        *b,
        "--topic",
        "two",
        "--partition",
        "7",
        "--timeout-ms",
        "30000",
        check=False,
    )
    assert no_partition.rc == 1, str(no_partition)
    assert "Partition 7 of topic 'two' does not exist" in no_partition.err
    assert time.monotonic() - started < 20.0  # at once, not after --timeout-ms

    bad_line = run(
        "strom-console-producer",
        *b,
        "--topic",
        "two",
        "--property",
        "parse.key=true",
        stdin="no separator here\n",
        check=False,
    )
    assert bad_line.rc == 1, str(bad_line)
    assert "No key separator found on line number 1: 'no separator here'" in bad_line.err
    zk = run("strom-topics", "--zookeeper", "localhost:2181", "--list", check=False)
    assert zk.rc != 0 and "use --bootstrap-server" in zk.err
