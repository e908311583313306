"""Kafka transactions end to end (issue 18): what a user of the Java client and of
confluent-kafka (librdkafka) relies on, proven against Apache Kafka and ready for Strom.

- Committed records are read exactly once by read_committed consumers, aborted ones
  never; read_uncommitted sees both; each commit or abort leaves one control record (an
  offset) per partition; the end offsets under read_committed are the last stable offset.
- An open transaction holds read_committed consumers back at its first offset until it
  ends (the broker aborts it after the producer's transaction.timeout.ms).
- A second producer with the same transactional.id fences the first: the zombie's
  transaction is aborted, its late writes refused, and it gets ProducerFencedException
  (Java) or the fatal _FENCED error (librdkafka); the survivor's records are all there.
- Consume-transform-produce with sendOffsetsToTransaction: the output equals the Python
  transform of the committed input exactly once, aborted attempts and a crash in the
  middle of a transaction included, and the group's committed offsets equal the input's
  end offsets.

Every test runs against each broker of BROKERS: Apache Kafka 4.3.1 as it starts
(transaction.version 2: KIP-890's transactions V2, which the Java client uses when the
broker finalizes it), the same with transaction.version downgraded to 1 (the classic
protocol, AddPartitionsToTxn and all, which Strom serves first: docs/transactions-design.md)
and Strom. The Java side is e2e/peers/src/PeerTxn.java.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import strom_process
from apache_kafka import ApacheKafka
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from java_peers import JavaPeers
from strom_process import StromProcess
from waiting import wait_until

PEER = "PeerTxn"
FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"
PARTITIONS = 3
# The producers' transaction.timeout.ms: a transaction a failed test leaves open is aborted
# within seconds (Kafka looks for expired ones every 10 s:
# transaction.abort.timed.out.transaction.cleanup.interval.ms).
TRANSACTION_TIMEOUT_MS = 10_000
# The open-transaction test's: its checks (three JVMs) must finish while it is still open,
# with room for a loaded 2-core machine; the broker aborts it 15 to 25 s after it began.
HANG_TIMEOUT_MS = 15_000

BROKERS = [
    pytest.param("kafka", id="kafka"),
    pytest.param("kafka_tv1", id="kafka-tv1"),
    pytest.param("strom", id="strom"),
]


@pytest.fixture(scope="module")
def strom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromProcess]:
    """conftest's broker, with the Kafka node's group.initial.rebalance.delay.ms=0."""
    broker = StromProcess(
        tmp_path_factory.mktemp("strom"),
        overrides={
            **strom_process.SHARED_BROKER_OVERRIDES,
            "group.initial.rebalance.delay.ms": "0",
        },
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def kafka_tv1(
    tmp_path_factory: pytest.TempPathFactory, java_peers: JavaPeers
) -> Iterator[ApacheKafka]:
    """A second Kafka node with transaction.version downgraded from 2 to 1
    (`kafka-features.sh downgrade`): its clients speak transactions V1, as to Strom."""
    node = ApacheKafka(tmp_path_factory.mktemp("kafka-tv1"), java_peers)
    try:
        node.start()
        java_peers.run(
            FEATURE_COMMAND,
            *("--bootstrap-server", node.bootstrap, "downgrade"),
            *("--feature", "transaction.version=1"),
        )
        described = java_peers.run(
            FEATURE_COMMAND, "--bootstrap-server", node.bootstrap, "describe"
        ).stdout
        line = next(x for x in described.splitlines() if "transaction.version" in x)
        assert re.search(r"FinalizedVersionLevel:\s*1\s", line), line
        yield node
    finally:
        node.stop()


@pytest.fixture(params=BROKERS)
def bootstrap(request: pytest.FixtureRequest) -> str:
    node: ApacheKafka | StromProcess = request.getfixturevalue(request.param)
    return node.bootstrap


# ------------------------------------------------------------------------------ helpers


@dataclass(frozen=True, order=True)
class Rec:
    """A record as the tests compare them: where it is and what it holds."""

    partition: int
    offset: int
    key: str
    value: str


def create_topics(bootstrap: str, *names: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "e2e-txn-admin"})
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    for name in names:
        futures[name].result(timeout=60)


def recs(items: list[dict[str, Any]]) -> list[Rec]:
    return [Rec(r["partition"], r["offset"], r["key"], r["value"]) for r in items]


def java_read(
    java_peers: JavaPeers, bootstrap: str, topic: str, isolation: str
) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """PeerTxn read: every record up to the end offsets at `isolation`, and those offsets."""
    lines = java_peers.run_json_lines(
        PEER, "read", "--bootstrap-server", bootstrap, "--topic", topic, "--isolation", isolation
    )
    *records, last = lines
    end = {int(p): o for p, o in last["end_offsets"].items()}
    assert {int(p): o for p, o in last["positions"].items()} == end
    return records, end


def per_transaction(lines: list[dict[str, Any]], result: str) -> list[Rec]:
    return [r for line in lines if line["result"] == result for r in recs(line["records"])]


def assert_one_marker_after_each_transaction(
    transactions: list[list[Rec]], end_offsets: dict[int, int]
) -> None:
    """One producer's transactions, in order: in every partition each transaction's records
    take consecutive offsets and its commit or abort marker the next one, so the end offset
    is one past the last marker."""
    expected_next = dict.fromkeys(end_offsets, 0)
    for records in transactions:
        touched: dict[int, list[int]] = {}
        for r in records:
            touched.setdefault(r.partition, []).append(r.offset)
        for p, offsets in touched.items():
            start = expected_next[p]
            assert sorted(offsets) == list(range(start, start + len(offsets))), (p, offsets)
            expected_next[p] = start + len(offsets) + 1
    assert end_offsets == expected_next


def watermarks(bootstrap: str, topic: str, isolation: str) -> dict[int, int]:
    """ListOffsets LATEST at `isolation` (librdkafka's query_watermark_offsets): the high
    watermark under read_uncommitted, the last stable offset under read_committed."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "e2e-txn-offsets",
            "isolation.level": isolation,
        }
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def committed_offsets(
    bootstrap: str, group: str, topic: str, isolation: str = "read_committed"
) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch); -1001 where none. librdkafka asks for
    stable offsets (KIP-447's require_stable) under read_committed: it waits while a
    transaction holds offsets of the group pending; under read_uncommitted it does not."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation}
    )
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 30)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def after_last(records: list[dict[str, Any]]) -> dict[int, int]:
    """Per partition, the offset after its last record: what a consumer that processed them
    commits. Not the end offset: read_committed consumers never see the markers and aborted
    records beyond it (the input topics end with an aborted transaction)."""
    return {
        p: 1 + max(r["offset"] for r in records if r["partition"] == p) for p in range(PARTITIONS)
    }


def transform(records: list[dict[str, Any]]) -> list[tuple[int, int, str, str]]:
    """What consume-transform-produce must write for these input records:
    (partition, source offset, key, upper-cased value)."""
    return sorted((r["partition"], r["offset"], r["key"], r["value"].upper()) for r in records)


def transformed(output: list[dict[str, Any]]) -> list[tuple[int, int, str, str]]:
    """The output records as transform() describes them, checking the source headers name
    their own partition and that each partition's output keeps its input's order."""
    for r in output:
        assert int(r["headers"]["source-partition"]) == r["partition"], r
    for p in range(PARTITIONS):
        sources = [int(r["headers"]["source-offset"]) for r in output if r["partition"] == p]
        assert sources == sorted(sources), f"partition {p}: output out of input order"
    return sorted(
        (r["partition"], int(r["headers"]["source-offset"]), r["key"], r["value"]) for r in output
    )


# ------------------------------------------------------------------------- Java client


@pytest.mark.timeout(180)
def test_java_commit_and_abort(bootstrap: str, java_peers: JavaPeers, topic: str) -> None:
    """6 transactions of 9 records over 3 partitions, the 3rd and 6th aborted: read_committed
    reads the committed ones exactly once, read_uncommitted all, and each transaction's
    marker takes one offset per partition."""
    create_topics(bootstrap, topic)
    lines = java_peers.run_json_lines(
        PEER,
        *("produce", "--bootstrap-server", bootstrap, "--topic", topic),
        *("--transactional-id", f"{topic}-tx", "--transactions", "6", "--records", "9"),
        *("--abort-every", "3"),
    )
    assert [line["result"] for line in lines] == ["committed", "committed", "aborted"] * 2
    committed = per_transaction(lines, "committed")
    aborted = per_transaction(lines, "aborted")
    assert len(committed) == 36 and len(aborted) == 18

    records, end_committed = java_read(java_peers, bootstrap, topic, "read_committed")
    assert sorted(recs(records)) == sorted(committed)
    for r in records:
        t, j = r["key"][1:].split("-r")
        assert r["headers"] == {"txn": t, "record": j}
    everything, end_uncommitted = java_read(java_peers, bootstrap, topic, "read_uncommitted")
    assert sorted(recs(everything)) == sorted(committed + aborted)
    # Nothing open: the last stable offset is the high watermark, past the last marker.
    assert end_committed == end_uncommitted
    assert_one_marker_after_each_transaction([recs(x["records"]) for x in lines], end_committed)


@pytest.mark.timeout(180)
def test_java_open_transaction_holds_back_read_committed(
    bootstrap: str, java_peers: JavaPeers, topic: str
) -> None:
    """A producer that dies with a transaction open: read_committed stops at the open
    transaction's first offsets (the last stable offset) while read_uncommitted reads on;
    after the transaction timeout the broker aborts it and its records stay invisible."""
    create_topics(bootstrap, topic)
    lines = java_peers.run_json_lines(
        PEER,
        *("produce", "--bootstrap-server", bootstrap, "--topic", topic),
        *("--transactional-id", f"{topic}-tx", "--transactions", "2", "--records", "6"),
        *("--hang", "--transaction-timeout-ms", str(HANG_TIMEOUT_MS)),
    )
    assert [line["result"] for line in lines] == ["committed", "open"]
    first, hanging = recs(lines[0]["records"]), recs(lines[1]["records"])
    lso = {p: min(r.offset for r in hanging if r.partition == p) for p in range(PARTITIONS)}
    high_watermark = {p: max(r.offset for r in hanging if r.partition == p) + 1 for p in lso}
    assert lso == {p: 3 for p in range(PARTITIONS)}  # 2 records and a commit marker

    records, end = java_read(java_peers, bootstrap, topic, "read_committed")
    assert (sorted(recs(records)), end) == (sorted(first), lso)
    everything, end = java_read(java_peers, bootstrap, topic, "read_uncommitted")
    assert (sorted(recs(everything)), end) == (sorted(first + hanging), high_watermark)
    assert watermarks(bootstrap, topic, "read_committed") == lso

    # The broker aborts it: one marker more, and the last stable offset catches up.
    after_abort = {p: o + 1 for p, o in high_watermark.items()}
    wait_until(
        lambda: watermarks(bootstrap, topic, "read_committed") == after_abort,
        60,
        lambda: f"LSO {watermarks(bootstrap, topic, 'read_committed')}, not {after_abort}",
    )
    records, end = java_read(java_peers, bootstrap, topic, "read_committed")
    assert (sorted(recs(records)), end) == (sorted(first), after_abort)
    assert watermarks(bootstrap, topic, "read_uncommitted") == after_abort


@pytest.mark.timeout(180)
@pytest.mark.parametrize("zombie_next", ["send", "commit"])
def test_java_zombie_is_fenced(
    bootstrap: str, java_peers: JavaPeers, topic: str, zombie_next: str
) -> None:
    """A second producer with the same transactional.id fences the first (the zombie): the
    zombie's open transaction is aborted, its later sends and its commit fail as Kafka's
    client reports them, and the survivor's transaction commits in full."""
    create_topics(bootstrap, topic)
    lines = java_peers.run_json_lines(
        PEER,
        *("fence", "--bootstrap-server", bootstrap, "--topic", topic),
        *("--transactional-id", f"{topic}-tx", "--zombie-next", zombie_next),
    )
    events = {line["event"]: line for line in lines}
    assert list(events) == [
        "zombie_sent",
        "survivor_initialized",
        "zombie_fenced",
        "survivor_committed",
    ]
    fenced = events["zombie_fenced"]
    if zombie_next == "send":
        # Its produce requests carry the fenced epoch: INVALID_PRODUCER_EPOCH (abortable,
        # KIP-588), which the commit reports; its EndTxn(abort) then PRODUCER_FENCED.
        assert fenced["send_errors"] == [["InvalidProducerEpochException"]] * 6
        assert fenced["commit_error"] == ["InvalidProducerEpochException"]
    else:
        assert fenced["send_errors"] == []
        assert fenced["commit_error"] == ["ProducerFencedException"]
    assert fenced["abort_error"] == ["ProducerFencedException"]

    zombie = recs(events["zombie_sent"]["records"])
    survivor = recs(events["survivor_committed"]["records"])
    records, end = java_read(java_peers, bootstrap, topic, "read_committed")
    assert sorted(recs(records)) == sorted(survivor)
    everything, end_uncommitted = java_read(java_peers, bootstrap, topic, "read_uncommitted")
    # The zombie's first records were aborted by the survivor's initTransactions; its
    # records after the fencing never reached the log.
    assert sorted(recs(everything)) == sorted(zombie + survivor)
    assert end == end_uncommitted
    assert_one_marker_after_each_transaction([zombie, survivor], end)


def java_ctp(java_peers: JavaPeers, bootstrap: str, topic: str, *args: str) -> list[dict[str, Any]]:
    return java_peers.run_json_lines(
        PEER,
        *("ctp", "--bootstrap-server", bootstrap, "--input", f"{topic}-in"),
        *("--output", f"{topic}-out", "--group", f"{topic}-group"),
        *("--transactional-id", f"{topic}-ctp", "--consumer-prop", "max.poll.records=7"),
        *("--consumer-prop", "session.timeout.ms=6000"),
        *args,
        timeout=150,
    )


def java_input(java_peers: JavaPeers, bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """The input topic: 6 transactions of 10 records, the 3rd and 6th aborted. Its
    committed records as PeerTxn read prints them (headers included)."""
    create_topics(bootstrap, f"{topic}-in", f"{topic}-out")
    lines = java_peers.run_json_lines(
        PEER,
        *("produce", "--bootstrap-server", bootstrap, "--topic", f"{topic}-in"),
        *("--transactional-id", f"{topic}-in-tx", "--transactions", "6", "--records", "10"),
        *("--abort-every", "3"),
    )
    records, _ = java_read(java_peers, bootstrap, f"{topic}-in", "read_committed")
    assert sorted(recs(records)) == sorted(per_transaction(lines, "committed"))
    assert len(records) == 40
    return records


def assert_exactly_once(
    java_peers: JavaPeers,
    bootstrap: str,
    topic: str,
    inputs: list[dict[str, Any]],
    uncommitted_attempts: int,
) -> None:
    """The output topic holds transform(inputs) exactly once under read_committed and the
    aborted attempts too under read_uncommitted; the group's committed offsets are those
    after the last input record of each partition."""
    output, _ = java_read(java_peers, bootstrap, f"{topic}-out", "read_committed")
    assert transformed(output) == transform(inputs)
    everything, _ = java_read(java_peers, bootstrap, f"{topic}-out", "read_uncommitted")
    assert len(everything) == len(inputs) + uncommitted_attempts
    assert committed_offsets(bootstrap, f"{topic}-group", f"{topic}-in") == after_last(inputs)


@pytest.mark.timeout(240)
def test_java_consume_transform_produce(bootstrap: str, java_peers: JavaPeers, topic: str) -> None:
    """A read_committed group member transforms `in` into `out`, one transaction per poll
    with sendOffsetsToTransaction, every 3rd aborted and its input re-read from the
    committed offsets: `out` is the transform of `in`'s committed records exactly once."""
    inputs = java_input(java_peers, bootstrap, topic)
    lines = java_ctp(java_peers, bootstrap, topic, "--abort-every", "3", "--max-records", "40")
    *transactions, stopped = lines
    assert stopped == {"event": "stopped", "reason": "max-records", "committed_records": 40}
    results = Counter(t["result"] for t in transactions)
    assert results["aborted"] == len(transactions) // 3 >= 2, results
    aborted_records = sum(t["records"] for t in transactions if t["result"] == "aborted")
    assert_exactly_once(java_peers, bootstrap, topic, inputs, aborted_records)


@pytest.mark.timeout(240)
def test_java_consume_transform_produce_survives_a_crash(
    bootstrap: str, java_peers: JavaPeers, topic: str
) -> None:
    """The transformer halts in its 3rd transaction, after sending its records and offsets;
    a new one with the same transactional.id and group fences it (its transaction aborted)
    and carries on from the committed offsets: still exactly once."""
    inputs = java_input(java_peers, bootstrap, topic)
    *transactions, halted = java_ctp(java_peers, bootstrap, topic, "--halt-in", "3")
    assert [t["result"] for t in transactions] == ["committed", "committed"]
    assert halted["result"] == "halted"
    done = sum(t["records"] for t in transactions)
    # The offsets of the committed transactions only: the halted one's are pending.
    offsets = dict.fromkeys(range(PARTITIONS), -1001)
    for t in transactions:
        offsets.update({int(p): o for p, o in t["offsets"].items()})
    group, source = f"{topic}-group", f"{topic}-in"
    assert committed_offsets(bootstrap, group, source, "read_uncommitted") == offsets

    *transactions, stopped = java_ctp(java_peers, bootstrap, topic, "--max-records", str(40 - done))
    assert stopped["reason"] == "max-records"
    assert {t["result"] for t in transactions} == {"committed"}
    assert_exactly_once(java_peers, bootstrap, topic, inputs, halted["records"])


# ----------------------------------------------------------------- confluent-kafka


def txn_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "e2e-txn-confluent",
            "transactional.id": transactional_id,
            "enable.idempotence": True,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(60)
    return producer


def send_all(producer: Producer, topic: str, items: list[tuple[int, str, str]]) -> list[Rec]:
    """Produce (partition, key, value) items and flush: the acknowledged records."""
    acked: list[Rec] = []
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
            return
        partition, offset, key, value = msg.partition(), msg.offset(), msg.key(), msg.value()
        assert partition is not None and offset is not None
        assert isinstance(key, bytes) and isinstance(value, bytes)
        acked.append(Rec(partition, offset, key.decode(), value.decode()))

    for partition, key, value in items:
        producer.produce(topic, key=key, value=value, partition=partition, on_delivery=report)
    assert producer.flush(60) == 0
    assert not errors, errors
    return sorted(acked)


def batch(t: int, records: int) -> list[tuple[int, str, str]]:
    """Transaction t's records, as PeerTxn produce makes them."""
    return [
        ((j - 1) % PARTITIONS, f"t{t}-r{j}", f"txn-{t}-record-{j}") for j in range(1, records + 1)
    ]


def confluent_read(bootstrap: str, topic: str, isolation: str) -> list[Rec]:
    """Every record up to the end offsets at `isolation`, by an assign()ed consumer whose
    positions must reach them (past any final marker)."""
    end = watermarks(bootstrap, topic, isolation)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "e2e-txn-confluent-reader",
            "group.id": "e2e-unused",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    try:
        tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
        consumer.assign(tps)
        out: list[Rec] = []

        def reached() -> bool:
            for msg in consumer.consume(100, 0.2):
                assert msg.error() is None, msg.error()
                partition, offset, key, value = (
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                )
                assert partition is not None and offset is not None
                assert isinstance(key, bytes) and isinstance(value, bytes)
                out.append(Rec(partition, offset, key.decode(), value.decode()))
            positions = consumer.position([TopicPartition(topic, p) for p in range(PARTITIONS)])
            return all(tp.offset >= end[tp.partition] for tp in positions)

        wait_until(reached, 60, lambda: f"{topic} read to {end} at {isolation}: {len(out)} so far")
        return sorted(out)
    finally:
        consumer.close()


@pytest.mark.timeout(180)
def test_confluent_commit_and_abort(bootstrap: str, topic: str) -> None:
    """librdkafka's transactional producer and read_committed consumer: 6 transactions of
    9 records, the 3rd and 6th aborted (after their records were acknowledged)."""
    create_topics(bootstrap, topic)
    producer = txn_producer(bootstrap, f"{topic}-tx")
    committed: list[Rec] = []
    aborted: list[Rec] = []
    transactions: list[list[Rec]] = []
    for t in range(1, 7):
        producer.begin_transaction()
        acked = send_all(producer, topic, batch(t, 9))
        transactions.append(acked)
        if t % 3 == 0:
            producer.abort_transaction(60)
            aborted += acked
        else:
            producer.commit_transaction(60)
            committed += acked

    assert confluent_read(bootstrap, topic, "read_committed") == sorted(committed)
    assert confluent_read(bootstrap, topic, "read_uncommitted") == sorted(committed + aborted)
    end = watermarks(bootstrap, topic, "read_committed")
    assert end == watermarks(bootstrap, topic, "read_uncommitted")
    assert_one_marker_after_each_transaction(transactions, end)


@pytest.mark.timeout(180)
def test_confluent_open_transaction_holds_back_read_committed(bootstrap: str, topic: str) -> None:
    """While a transaction is open, read_committed end offsets are its first offsets and a
    read_committed consumer stops there; its commit releases the records."""
    create_topics(bootstrap, topic)
    producer = txn_producer(bootstrap, f"{topic}-tx")
    producer.begin_transaction()
    first = send_all(producer, topic, batch(1, 6))
    producer.commit_transaction(60)
    producer.begin_transaction()
    second = send_all(producer, topic, batch(2, 6))

    lso = dict.fromkeys(range(PARTITIONS), 3)  # 2 records and a commit marker
    high_watermark = dict.fromkeys(range(PARTITIONS), 5)
    assert watermarks(bootstrap, topic, "read_committed") == lso
    assert watermarks(bootstrap, topic, "read_uncommitted") == high_watermark
    assert confluent_read(bootstrap, topic, "read_committed") == first
    assert confluent_read(bootstrap, topic, "read_uncommitted") == sorted(first + second)

    producer.commit_transaction(60)
    after = dict.fromkeys(range(PARTITIONS), 6)
    assert watermarks(bootstrap, topic, "read_committed") == after
    assert confluent_read(bootstrap, topic, "read_committed") == sorted(first + second)


@pytest.mark.timeout(180)
def test_confluent_zombie_is_fenced(bootstrap: str, topic: str) -> None:
    """A second librdkafka producer with the same transactional.id fences the first: the
    zombie's commit fails with the fatal _FENCED error, its transaction is aborted, and the
    survivor's commits."""
    create_topics(bootstrap, topic)
    zombie = txn_producer(bootstrap, f"{topic}-tx")
    zombie.begin_transaction()
    zombie_records = send_all(
        zombie, topic, [(p % PARTITIONS, f"zombie-{p}", "z") for p in range(6)]
    )
    survivor = txn_producer(bootstrap, f"{topic}-tx")

    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(60)
    error = raised.value.args[0]
    assert isinstance(error, KafkaError)
    assert (error.code(), error.fatal()) == (KafkaError._FENCED, True), error

    survivor.begin_transaction()
    survivor_records = send_all(
        survivor, topic, [(p % PARTITIONS, f"survivor-{p}", "s") for p in range(6)]
    )
    survivor.commit_transaction(60)
    assert confluent_read(bootstrap, topic, "read_committed") == survivor_records
    assert confluent_read(bootstrap, topic, "read_uncommitted") == sorted(
        zombie_records + survivor_records
    )
    end = watermarks(bootstrap, topic, "read_committed")
    assert_one_marker_after_each_transaction([zombie_records, survivor_records], end)


@pytest.mark.timeout(240)
def test_confluent_consume_transform_produce(bootstrap: str, topic: str) -> None:
    """librdkafka's consume-transform-produce: a read_committed group member, one
    transaction per batch with send_offsets_to_transaction, every 3rd aborted and rewound
    to the committed offsets; the output is the transform of the committed input exactly
    once and the group committed the input's end offsets."""
    source, sink, group = f"{topic}-in", f"{topic}-out", f"{topic}-group"
    create_topics(bootstrap, source, sink)
    producer = txn_producer(bootstrap, f"{topic}-in-tx")
    for t in range(1, 7):
        producer.begin_transaction()
        send_all(producer, source, batch(t, 10))
        if t % 3 == 0:
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
    inputs = confluent_read(bootstrap, source, "read_committed")
    assert len(inputs) == 40

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "e2e-txn-confluent-ctp",
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    transformer = txn_producer(bootstrap, f"{topic}-ctp")
    done = 0
    transactions: list[tuple[str, int]] = []
    try:
        consumer.subscribe([source])

        def transform_a_batch() -> bool:
            nonlocal done
            messages = consumer.consume(7, 0.5)
            if not messages:
                return False
            transformer.begin_transaction()
            next_offsets: dict[int, int] = {}
            items: list[tuple[int, str, str]] = []
            for msg in messages:
                assert msg.error() is None, msg.error()
                partition, offset, key, value = (
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                )
                assert partition is not None and offset is not None
                assert isinstance(key, bytes) and isinstance(value, bytes)
                items.append((partition, key.decode(), value.decode().upper()))
                next_offsets[partition] = offset + 1
            send_all(transformer, sink, items)
            transformer.send_offsets_to_transaction(
                [TopicPartition(source, p, o) for p, o in next_offsets.items()],
                consumer.consumer_group_metadata(),
                60,
            )
            if len(transactions) % 3 == 2:
                transformer.abort_transaction(60)
                transactions.append(("aborted", len(items)))
                for tp in consumer.committed(consumer.assignment(), 30):
                    offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                    consumer.seek(TopicPartition(source, tp.partition, offset))
            else:
                transformer.commit_transaction(60)
                transactions.append(("committed", len(items)))
                done += len(items)
            return done >= len(inputs)

        wait_until(transform_a_batch, 120, lambda: f"{done} of 40 transformed: {transactions}")
    finally:
        consumer.close()

    aborted = [n for result, n in transactions if result == "aborted"]
    assert len(aborted) >= 2, transactions
    output = confluent_read(bootstrap, sink, "read_committed")
    expected = sorted((r.partition, r.key, r.value.upper()) for r in inputs)
    assert sorted((r.partition, r.key, r.value) for r in output) == expected
    for p in range(PARTITIONS):  # each partition's output in its input's order
        keys = [r.key for r in sorted(output) if r.partition == p]
        assert keys == [r.key for r in inputs if r.partition == p]
    everything = confluent_read(bootstrap, sink, "read_uncommitted")
    assert len(everything) == len(inputs) + sum(aborted)
    assert committed_offsets(bootstrap, group, source) == after_last(
        [{"partition": r.partition, "offset": r.offset} for r in inputs]
    )
