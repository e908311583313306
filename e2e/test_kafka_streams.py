"""Kafka Streams against Strom: Apache Kafka's WordCountDemo (kafka-streams-examples,
run with kafka-run-class.sh as Kafka's Streams quickstart does) counts the words of
streams-plaintext-input into streams-wordcount-output.

At-least-once, on one broker: Streams makes its repartition and changelog topics, joins a
group with its own assignor, commits, and deletes consumed repartition records, and
restores its state from its changelog after a restart; the final count of every word
equals Python's.

Exactly-once (`processing.guarantee=exactly_once_v2`, issue 18 and
docs/transactions-design.md step 12), on a 3-broker Strom cluster (every topic RF 3 with
min.insync.replicas 2, __transaction_state and __consumer_offsets included), input fed in
three phases: the broker coordinating the app's transactional id is SIGKILLed while the app
counts the second phase and restarted once it is counted. The demo runs without a record
cache, so it writes one update per word it counts: read with isolation.level
read_committed, the updates of each word are exactly 1, 2, ..., its Python count (no
increment lost, none applied twice, nothing of an aborted transaction). A second run
SIGKILLs the app itself while it counts the third phase and starts it again (its new
producer fences the dead one, whose open transaction is aborted, and its dirty store is
restored from the changelog): the same must hold. The app-crash run against the Apache
Kafka node (one broker: no broker kill) is the reference."""

from __future__ import annotations

import asyncio
import random
import re
import shutil
import struct
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import wire_requests
from apache_kafka import ApacheKafka
from e2e_records import read_partition
from kafka_commands import KafkaCommands, Service
from kio.schema.list_transactions.v0.request import ListTransactionsRequest
from strom.network import errors as network_errors
from strom_cluster import StromCluster
from strom_process import StromProcess
from waiting import wait_until

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


# ------------------------------------------------------------------------- exactly once

EOS_APPLICATION_ID = "streams-wordcount-eos"
EOS_PARTITIONS = 3
# Lines of input per phase: counted before any fault, fed while the coordinator dies, fed
# after it is back (or while the app dies).
PHASE_LINES = (150, 300, 150)
# A phase with a fault trickles in (5 lines every 0.1 s: 300 lines in about 6 s) so that
# the app is still at work when the fault comes.
FEED_CHUNK = 5
FEED_PAUSE_S = 0.1
FEED_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 60.0
RESTART_TIMEOUT_S = 60.0
# Phase 3 after the app's crash: its successor waits for the dead member's session (6 s),
# restores its store and counts (against Apache Kafka about 8 s in all).
AFTER_CRASH_TIMEOUT_S = 90.0
LOG_TAIL = 6000
EOS_CLUSTER_OVERRIDES = {
    # the controller fences a dead broker within 3 s and moves its leaderships
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    # every topic (Streams' repartition and changelog topics, __consumer_offsets) RF 3 with
    # min.insync.replicas 2, the coordinator's log too
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    # fewer partitions than Kafka's 50 for each internal topic: a quicker start
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.num.partitions": "10",
    "group.initial.rebalance.delay.ms": "0",
}
# Kafka's tools' WARN level (peers/log4j2.xml), plus the Streams client's and threads' state
# transitions and the transactional producer's producer ids and epochs, at INFO.
STREAMS_LOG4J = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="stderr" target="SYSTEM_ERR">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.kafka.streams.KafkaStreams" level="INFO"/>
    <Logger name="org.apache.kafka.streams.processor.internals.StreamThread" level="INFO"/>
    <Logger name="org.apache.kafka.clients.producer.internals.TransactionManager" level="INFO">
      <!-- while its coordinator is dead but not yet fenced, the producer asks FindCoordinator
           in a loop without back-off (Sender.maybeFindCoordinatorAndRetry), thousands a
           second, each answer logged -->
      <RegexFilter regex=".*Discovered transaction coordinator.*" onMatch="DENY"
                   onMismatch="NEUTRAL"/>
    </Logger>
    <Root level="WARN">
      <AppenderRef ref="stderr"/>
    </Root>
  </Loggers>
</Configuration>
"""


def feed(bootstrap: str, lines: list[str], pause_s: float = 0.0) -> None:
    """Write `lines` to the input topic, FEED_CHUNK at a time `pause_s` apart, idempotent
    and acks=all: each line exactly once whatever the brokers go through meanwhile."""
    from confluent_kafka import KafkaError, Message, Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _: Message) -> None:
        if error is not None:
            failures.append(error)

    for start in range(0, len(lines), FEED_CHUNK):
        for line in lines[start : start + FEED_CHUNK]:
            producer.produce(INPUT_TOPIC, value=line.encode(), on_delivery=delivered)
        producer.poll(0)
        if pause_s:
            time.sleep(pause_s)  # pacing the input, not waiting for anything
    assert producer.flush(FEED_TIMEOUT_S) == 0, "input not delivered in time"
    assert not failures, f"input not delivered: {failures[:5]}"


def output_updates(bootstrap: str, isolation: str = "read_committed") -> dict[str, list[int]]:
    """Every count the output topic holds, per word in offset order (a word's updates all
    go to one partition), read from the start to the end each partition has for
    `isolation` (the last stable offset for read_committed)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "e2e-unused",  # required by librdkafka; unused with assign()
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    updates: dict[str, list[int]] = defaultdict(list)
    at_end: set[int] = set()
    last_error: KafkaError | None = None
    try:
        consumer.assign(
            [TopicPartition(OUTPUT_TOPIC, p, OFFSET_BEGINNING) for p in range(EOS_PARTITIONS)]
        )
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(at_end) < EOS_PARTITIONS:
            assert time.monotonic() < deadline, (
                f"{OUTPUT_TOPIC} ({isolation}): only partitions {sorted(at_end)} read to their "
                f"end in {READ_TIMEOUT_S:.0f}s; last error {last_error}"
            )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())  # type: ignore[arg-type]
                    continue
                assert not error.fatal(), f"reading {OUTPUT_TOPIC}: {error}"
                last_error = error  # a broker down, a leader moving: librdkafka retries
                continue
            key, value = msg.key(), msg.value()
            assert key is not None and value is not None
            (count,) = struct.unpack(">q", value)  # Serdes.Long
            updates[key.decode()].append(count)
    finally:
        consumer.close()
    return dict(updates)


def latest(updates: dict[str, list[int]]) -> dict[str, int]:
    return {word: counts[-1] for word, counts in updates.items()}


def transaction_coordinators(cluster: StromCluster) -> dict[str, int]:
    """Transactional id -> the broker coordinating it: the one whose ListTransactions
    (which lists the ids of the coordinator it is asked) names it."""
    found: dict[str, int] = {}
    for node_id in cluster.running():
        node = cluster.nodes[node_id]
        try:
            answer = asyncio.run(
                wire_requests.send(
                    node.port, ListTransactionsRequest(), host=node.host, timeout_s=5
                )
            )
        except network_errors.NetworkError:
            continue
        for listed in answer.transaction_states:
            found[str(listed.transactional_id)] = node_id
    return found


def leaderships(bootstrap: str) -> Counter[int]:
    """Broker -> how many partitions it leads, internal topics included."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics.values()
    return Counter(p.leader for t in topics for p in t.partitions.values())


def in_sync(bootstrap: str, topics: tuple[str, ...], replicas: int) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics
    return all(
        name in listed
        and len(listed[name].partitions) == EOS_PARTITIONS
        and all(len(p.isrs) == replicas for p in listed[name].partitions.values())
        for name in topics
    )


def create_eos_topics(bootstrap: str, replicas: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    settings = {"min.insync.replicas": str(min(2, replicas))}
    made = admin.create_topics(
        [
            NewTopic(name, EOS_PARTITIONS, replicas, config=settings)
            for name in (INPUT_TOPIC, OUTPUT_TOPIC)  # the output keeps every update
        ],
        request_timeout=REQUEST_TIMEOUT_S,
    )
    for future in made.values():
        future.result(REQUEST_TIMEOUT_S)


def output_end_offsets(bootstrap: str) -> int:
    """The output partitions' high watermarks, summed: records of open transactions count."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "e2e-unused",
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        return sum(
            consumer.get_watermark_offsets(
                TopicPartition(OUTPUT_TOPIC, p), timeout=REQUEST_TIMEOUT_S, cached=False
            )[1]
            for p in range(EOS_PARTITIONS)
        )
    finally:
        consumer.close()


def wait_writing(app: Service, bootstrap: str, baseline: int, feeding: Future[None]) -> int:
    """Wait until the app writes counts of the phase being fed (the output's end offsets
    past `baseline`, where the phase before left them), while that phase is still being
    fed: the app is at work. Returns the output's end offsets then."""
    ends = baseline

    def writing() -> bool:
        nonlocal ends
        ends = output_end_offsets(bootstrap)
        return ends > baseline

    app.wait_for(
        writing,
        COUNT_TIMEOUT_S,
        lambda: f"no output for the phase fed: the output ends at {ends}, {baseline} before it",
    )
    assert not feeding.done(), "the phase was all fed before the app wrote any of it"
    return ends


def streams_coordinator(cluster: StromCluster) -> int:
    """The broker coordinating the app's transactional id (one stream thread: one id)."""

    def coordinator() -> int | None:
        found = transaction_coordinators(cluster)
        return next((b for t, b in found.items() if t.startswith(EOS_APPLICATION_ID)), None)

    found = wait_until(
        coordinator, REQUEST_TIMEOUT_S, "a coordinator listing the app's transactional id"
    )
    assert found is not None
    return found


def run_word_count_exactly_once(
    bootstrap: str,
    kafka_commands: KafkaCommands,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    replicas: int,
    kill_coordinator_of: StromCluster | None = None,
    crash_app: bool = False,
) -> list[str]:
    """WordCountDemo with exactly_once_v2 over three phases of input. With
    `kill_coordinator_of`, the broker coordinating the app's transactional id is SIGKILLed
    while the app counts phase 2 and restarted once phase 2 is counted. With `crash_app`,
    the app itself is SIGKILLed while it counts phase 3 and started again on the same state
    dir (its transactional id fences the dead one's open transaction, which is aborted; its
    store, dirty, is restored from the changelog). Then asserts the read_committed updates
    of every word are 1, 2, ..., its Python count. Returns notes on the run."""
    create_eos_topics(bootstrap, replicas)
    rng = random.Random(18)
    phases = [random_lines(rng, count) for count in PHASE_LINES]
    notes: list[str] = []
    log4j = tmp_path / "streams-log4j2.xml"
    log4j.write_text(STREAMS_LOG4J)
    monkeypatch.setenv("KAFKA_LOG4J_OPTS", f"-Dlog4j2.configurationFile={log4j}")
    config = tmp_path / "streams-eos.properties"
    config.write_text(
        f"bootstrap.servers={bootstrap}\n"
        f"application.id={EOS_APPLICATION_ID}\n"
        f"state.dir={tmp_path / 'state'}\n"
        "processing.guarantee=exactly_once_v2\n"
        # A killed instance does not leave its group: the next one's rebalance waits for
        # its session to expire (Kafka's default 45 s).
        "session.timeout.ms=6000\n"
        "heartbeat.interval.ms=1000\n"
    )
    feed(bootstrap, phases[0])
    began = time.monotonic()

    def note(text: str) -> None:
        notes.append(f"{time.monotonic() - began:5.1f}s {text}")

    app = kafka_commands.start(
        "kafka-run-class.sh",
        WORD_COUNT_DEMO,
        str(config),
        log_path=tmp_path / "wordcount-eos",
        cwd=tmp_path,
    )
    logs: list[str] = []

    def wait_counted(lines: list[str], what: str, timeout: float = COUNT_TIMEOUT_S) -> None:
        expected = dict(word_counts(lines))
        seen: dict[str, int] = {}

        def counted() -> bool:
            nonlocal seen
            seen = latest(output_updates(bootstrap))
            return seen == expected

        app.wait_for(counted, timeout, lambda: f"{what}: counts {seen}, expected {expected}")
        note(f"{what} counted")

    try:
        wait_counted(phases[0], "phase 1")
        baseline = output_end_offsets(bootstrap)
        victim = None
        with ThreadPoolExecutor(1) as pool:
            feeding = pool.submit(feed, bootstrap, phases[1], FEED_PAUSE_S)
            cluster = kill_coordinator_of
            if cluster is not None:
                victim = streams_coordinator(cluster)
                leading = dict(sorted(leaderships(bootstrap).items()))
                ends = wait_writing(app, bootstrap, baseline, feeding)
                cluster.nodes[victim].kill()
                note(
                    f"SIGKILLed broker {victim}, the coordinator of the app's transactional "
                    f"id, the output {ends - baseline} records into phase 2 (partitions led "
                    f"per broker: {leading})"
                )
            feeding.result(FEED_TIMEOUT_S)
        wait_counted(phases[0] + phases[1], "phase 2")
        if kill_coordinator_of is not None and victim is not None:
            kill_coordinator_of.nodes[victim].start()
            topics = (INPUT_TOPIC, OUTPUT_TOPIC)
            wait_until(
                lambda: in_sync(bootstrap, topics, replicas),
                RESTART_TIMEOUT_S,
                f"broker {victim} back in the ISR of every partition of {topics}",
            )
            note(f"broker {victim} restarted, in the ISRs again")
        if crash_app:
            baseline = output_end_offsets(bootstrap)
            with ThreadPoolExecutor(1) as pool:
                feeding = pool.submit(feed, bootstrap, phases[2], FEED_PAUSE_S)
                ends = wait_writing(app, bootstrap, baseline, feeding)
                app.kill()
                logs.append(app.log_text())
                note(f"SIGKILLed the app, the output {ends - baseline} records into phase 3")
                app.start()
                feeding.result(FEED_TIMEOUT_S)
            wait_counted(phases[0] + phases[1] + phases[2], "phase 3", AFTER_CRASH_TIMEOUT_S)
        else:
            feed(bootstrap, phases[2])
            wait_counted(phases[0] + phases[1] + phases[2], "phase 3")
    finally:
        app.stop()
    logs.append(app.log_text())

    expected = word_counts(phases[0] + phases[1] + phases[2])
    committed = output_updates(bootstrap)
    wrong = {
        word: counts
        for word, counts in committed.items()
        if counts != list(range(1, expected[word] + 1))
    }
    assert set(committed) == set(expected) and not wrong, (
        f"read_committed updates that are not 1, 2, ..., the word's count: {wrong}; words "
        f"{sorted(committed)}, expected {sorted(expected)}\n{app.log_tail()}"
    )
    uncommitted = output_updates(bootstrap, "read_uncommitted")
    notes.append(
        f"output updates: {sum(map(len, committed.values()))} read_committed, "
        f"{sum(map(len, uncommitted.values()))} read_uncommitted (the difference: aborted)"
    )
    for number, log in enumerate(logs, 1):
        transitions = re.findall(r"stream-client \[\S+\] State transition from (\w+ to \w+)", log)
        notes.append(f"app run {number}: Streams client states {transitions}")
        assert "to ERROR" not in log and "to PENDING_ERROR" not in log, log[-LOG_TAIL:]
    return notes


@pytest.fixture
def eos_cluster(tmp_path: Path) -> Iterator[StromCluster]:
    with StromCluster(tmp_path / "cluster", overrides=EOS_CLUSTER_OVERRIDES).started() as made:
        yield made


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_word_count_exactly_once_through_a_coordinator_kill(
    eos_cluster: StromCluster,
    kafka_commands: KafkaCommands,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notes = run_word_count_exactly_once(
        eos_cluster.bootstrap,
        kafka_commands,
        tmp_path,
        monkeypatch,
        replicas=3,
        kill_coordinator_of=eos_cluster,
    )
    print("\n".join(["", "Strom, 3 brokers, the coordinator killed:", *notes]))


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_word_count_exactly_once_through_an_app_crash(
    eos_cluster: StromCluster,
    kafka_commands: KafkaCommands,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notes = run_word_count_exactly_once(
        eos_cluster.bootstrap, kafka_commands, tmp_path, monkeypatch, replicas=3, crash_app=True
    )
    print("\n".join(["", "Strom, 3 brokers, the app crashed:", *notes]))


@pytest.mark.timeout(480)
def test_word_count_exactly_once_on_apache_kafka(
    kafka: ApacheKafka,
    kafka_commands: KafkaCommands,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notes = run_word_count_exactly_once(
        kafka.bootstrap, kafka_commands, tmp_path, monkeypatch, replicas=1, crash_app=True
    )
    print("\n".join(["", "Apache Kafka, 1 broker, the app crashed:", *notes]))
