"""KIP-848's consumer group protocol with Java consumers (`group.protocol=consumer`): the
broker assigns. One member gets every partition; a second joins and the partitions are
split without any partition owned by both at once; the second leaves and the first gets
them all back; every record is read once and the commits show in
kafka-consumer-groups.sh --describe (and --members). A classic group, consumed and
committed with `group.protocol=classic` and then stopped, becomes a consumer group when a
consumer-protocol member joins, which goes on from the committed offsets; one with a live
classic member converts online, the classic member sharing the partitions, and back to
classic when the consumer-protocol member leaves.

The same scenario runs against Apache Kafka (the expected behaviour) and Strom. Then
Strom's records of such a group in `__consumer_offsets`: a restarted broker carries on
with the member as it was, and Kafka's DumpLogSegments decodes every record."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import consumer_group_tool as tool
import group_checks as gc
import pytest
from apache_kafka import ApacheKafka
from java_peers import JavaPeers
from strom_process import StromProcess

PARTITIONS = 4
GROUP = "kip848-readers"
CLASSIC_GROUP = "kip848-converted"
ONLINE_GROUP = "kip848-online"
HEARTBEAT_INTERVAL_MS = "1000"  # Kafka's 5000 would only make the test slower
WAIT_S = 90
DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"


@pytest.fixture(params=["strom", "kafka"])
def bootstrap(
    request: pytest.FixtureRequest,
    strom_factory: Any,
    java_peers: JavaPeers,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    if request.param == "strom":
        broker = strom_factory(
            overrides={
                **gc.BROKER_OVERRIDES,
                "group.consumer.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            }
        )
        broker.start()
        yield broker.bootstrap
        return
    kafka = ApacheKafka(tmp_path_factory.mktemp("kafka"), java_peers)
    kafka.properties["group.consumer.min.heartbeat.interval.ms"] = HEARTBEAT_INTERVAL_MS
    kafka.properties["group.consumer.heartbeat.interval.ms"] = HEARTBEAT_INTERVAL_MS
    kafka.start()
    try:
        yield kafka.bootstrap
    finally:
        kafka.stop()


@pytest.fixture
def java_members(
    bootstrap: str, topic: str, tmp_path: Path, java_peers: JavaPeers
) -> Iterator[gc.Group]:
    group = gc.Group("java", bootstrap, topic, tmp_path, java_argv=java_peers.argv)
    yield group
    group.cleanup()


def group_type(java_peers: JavaPeers, bootstrap: str, group: str) -> str:
    """The group's type as the Java admin client lists it (Admin.listConsumerGroups)."""
    [view] = java_peers.run_json_lines(
        "PeerGroupConsumer", "admin", "--bootstrap-server", bootstrap
    )
    types = {g["groupId"]: g["type"] for g in view["groups"]}
    return str(types[group])


def committed(members: list[gc.Member]) -> dict[int, int]:
    merged: dict[int, int] = {}
    for member in members:
        for partition, offset in member.committed().items():
            merged[partition] = max(offset, merged.get(partition, 0))
    return merged


@pytest.mark.timeout(600)
def test_java_consumers_share_partitions_through_the_broker(
    bootstrap: str, java_members: gc.Group, java_peers: JavaPeers, topic: str
) -> None:
    gc.create_topic(bootstrap, topic, PARTITIONS)
    produced = gc.produce(bootstrap, topic, [10] * PARTITIONS, "first")

    a = java_members.start("a", GROUP, group_protocol="consumer")
    gc.wait_balanced([a], PARTITIONS, [PARTITIONS], WAIT_S, java_members.describe)
    b = java_members.start("b", GROUP, group_protocol="consumer")
    gc.wait_balanced([a, b], PARTITIONS, [2, 2], WAIT_S, java_members.describe)
    gc.wait_until(
        lambda: committed([a, b]) == dict.fromkeys(range(PARTITIONS), 10),
        WAIT_S,
        java_members.describe,
    )

    # kafka-consumer-groups.sh sees the group, its members and their commits.
    out = tool.consumer_groups(java_peers, bootstrap, "--describe", "--group", GROUP)
    rows = tool.table(out, GROUP)
    assert sorted(int(r["PARTITION"]) for r in rows) == list(range(PARTITIONS)), out
    for row in rows:
        assert (row["TOPIC"], row["CURRENT-OFFSET"], row["LAG"]) == (topic, "10", "0"), out
    assert len({r["CONSUMER-ID"] for r in rows}) == 2, out
    members_out = tool.consumer_groups(
        java_peers, bootstrap, "--describe", "--group", GROUP, "--members"
    )
    member_rows = tool.table(members_out, GROUP)
    assert sorted(r["#PARTITIONS"] for r in member_rows) == ["2", "2"], members_out
    assert {r["CLIENT-ID"] for r in member_rows} == {"e2e-java-a", "e2e-java-b"}, members_out
    state_out = tool.consumer_groups(
        java_peers, bootstrap, "--describe", "--group", GROUP, "--state", "--verbose"
    )
    (state,) = tool.table(state_out, GROUP)
    assert (state["ASSIGNMENT-STRATEGY"], state["STATE"], state["#MEMBERS"]) == (
        "uniform",
        "Stable",
        "2",
    ), state_out
    assert state["GROUP-EPOCH"] == state["TARGET-ASSIGNMENT-EPOCH"], state_out
    verbose_out = tool.consumer_groups(
        java_peers, bootstrap, "--describe", "--group", GROUP, "--members", "--verbose"
    )
    for row in tool.table(verbose_out, GROUP):  # every member reconciled to its target
        assert row["CURRENT-EPOCH"] == row["TARGET-EPOCH"] == state["GROUP-EPOCH"], verbose_out
        assert row["CURRENT-ASSIGNMENT"] == row["TARGET-ASSIGNMENT"], verbose_out

    # b leaves: a gets every partition back and reads what comes next.
    java_members.stop_all([b])
    produced.update(gc.produce(bootstrap, topic, [5] * PARTITIONS, "second"))
    gc.wait_balanced([a], PARTITIONS, [PARTITIONS], WAIT_S, java_members.describe)
    gc.wait_until(
        lambda: committed([a, b]) == dict.fromkeys(range(PARTITIONS), 15),
        WAIT_S,
        java_members.describe,
    )
    java_members.stop_all([a])
    gc.check_no_shared_reads([a, b])
    gc.check_exactly_once([a, b], produced)
    gc.check_member_errors([a, b])

    # A classic group, stopped with its offsets committed, converts and keeps them.
    c = java_members.start("c", CLASSIC_GROUP)
    gc.wait_until(
        lambda: committed([c]) == dict.fromkeys(range(PARTITIONS), 15),
        WAIT_S,
        java_members.describe,
    )
    java_members.stop_all([c])
    later = gc.produce(bootstrap, topic, [3] * PARTITIONS, "third")
    d = java_members.start("d", CLASSIC_GROUP, group_protocol="consumer")
    gc.wait_until(
        lambda: committed([d]) == dict.fromkeys(range(PARTITIONS), 18),
        WAIT_S,
        java_members.describe,
    )
    gc.check_exactly_once([d], later)  # from the classic group's offsets, nothing again
    out = tool.consumer_groups(
        java_peers, bootstrap, "--describe", "--group", CLASSIC_GROUP, "--members"
    )
    assert [r["CLIENT-ID"] for r in tool.table(out, CLASSIC_GROUP)] == ["e2e-java-d"], out
    java_members.stop_all([d])
    gc.check_member_errors([c, d])

    # A classic group with a live member converts online: the classic member keeps
    # heartbeating with the classic protocol and gives up half its partitions.
    everything = {**produced, **later}
    e = java_members.start("e", ONLINE_GROUP)
    gc.wait_balanced([e], PARTITIONS, [PARTITIONS], WAIT_S, java_members.describe)
    f = java_members.start("f", ONLINE_GROUP, group_protocol="consumer")
    gc.wait_balanced([e, f], PARTITIONS, [2, 2], WAIT_S, java_members.describe)
    out = tool.consumer_groups(
        java_peers, bootstrap, "--describe", "--group", ONLINE_GROUP, "--members"
    )
    assert sorted(r["CLIENT-ID"] for r in tool.table(out, ONLINE_GROUP)) == [
        "e2e-java-e",
        "e2e-java-f",
    ], out
    assert group_type(java_peers, bootstrap, ONLINE_GROUP) == "Consumer"
    # The consumer-protocol member leaves: the group is classic again, e gets everything.
    java_members.stop_all([f])
    gc.wait_balanced([e], PARTITIONS, [PARTITIONS], WAIT_S, java_members.describe)
    everything.update(gc.produce(bootstrap, topic, [2] * PARTITIONS, "fourth"))
    gc.wait_until(
        lambda: committed([e, f]) == dict.fromkeys(range(PARTITIONS), 20),
        WAIT_S,
        java_members.describe,
    )
    assert group_type(java_peers, bootstrap, ONLINE_GROUP) == "Classic"
    java_members.stop_all([e])
    gc.check_no_shared_reads([e, f])
    gc.check_exactly_once([e, f], everything)
    gc.check_member_errors([e, f])


@pytest.mark.timeout(300)
def test_a_restarted_broker_carries_on_with_the_group_and_kafka_reads_its_records(
    strom_factory: Any, java_peers: JavaPeers, topic: str, tmp_path: Path
) -> None:
    broker: StromProcess = strom_factory(
        overrides={
            **gc.BROKER_OVERRIDES,
            "group.consumer.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "offsets.topic.num.partitions": "1",
        }
    )
    broker.start()
    members = gc.Group("java", broker.bootstrap, topic, tmp_path, java_argv=java_peers.argv)
    try:
        gc.create_topic(broker.bootstrap, topic, 2)
        a = members.start("a", GROUP, group_protocol="consumer")
        gc.wait_balanced([a], 2, [2], WAIT_S, members.describe)
        before = tool.table(
            tool.consumer_groups(
                java_peers, broker.bootstrap, "--describe", "--group", GROUP, "--members"
            ),
            GROUP,
        )

        broker.restart(graceful=True)
        # The member goes on: same member id and partitions, nothing lost or reassigned
        # (a coordinator that forgot the group would fence it and it would rejoin).
        produced = gc.produce(broker.bootstrap, topic, [3, 3], "after-restart")
        gc.wait_until(lambda: committed([a]) == {0: 3, 1: 3}, WAIT_S, members.describe)
        after = tool.table(
            tool.consumer_groups(
                java_peers, broker.bootstrap, "--describe", "--group", GROUP, "--members"
            ),
            GROUP,
        )
        assert [(r["CONSUMER-ID"], r["#PARTITIONS"]) for r in after] == [
            (r["CONSUMER-ID"], "2") for r in before
        ]
        assert not a.of("lost") and len(a.of("assigned")) == 1, members.describe()
        members.stop_all()
        gc.check_exactly_once([a], produced)
        gc.check_member_errors([a])
    finally:
        members.cleanup()
    broker.stop()

    segments = sorted((broker.log_dir / "__consumer_offsets-0").glob("*.log"))
    dumped = java_peers.run(
        DUMP_LOG_SEGMENTS, "--offsets-decoder", "--files", ",".join(map(str, segments))
    ).stdout
    records = [
        (json.loads(key), payload)
        for key, payload in re.findall(r" key: (\{.*?\}) payload: (.*)$", dumped, re.M)
    ]
    types = {int(key["type"]) for key, _ in records}
    # group epoch, topics, member, target epoch, member target, member assignment
    assert {3, 4, 5, 6, 7, 8} <= types, dumped
    member_epochs = [
        json.loads(payload)["data"]["memberEpoch"]
        for key, payload in records
        if key["type"] == "8" and payload != "<DELETE>"
    ]
    assert member_epochs and member_epochs[0] == 1, dumped
    # the member left: its three records are tombstoned
    tombstoned = {int(key["type"]) for key, payload in records if payload == "<DELETE>"}
    assert {5, 7, 8} <= tombstoned, dumped


@pytest.mark.timeout(300)
def test_librdkafka_consumers_with_a_topic_and_a_regex_subscription(
    bootstrap: str, topic: str
) -> None:
    """librdkafka (confluent-kafka) with group.protocol=consumer: one member names the
    topic, the other subscribes with a regex the broker resolves; they split the
    partitions, and the first gets them all back when the other leaves."""
    from confluent_kafka import Consumer

    gc.create_topic(bootstrap, topic, PARTITIONS)
    produced = gc.produce(bootstrap, topic, [5] * PARTITIONS, "rk")

    def member(name: str, subscription: str) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{GROUP}-rdkafka",
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "client.id": name,
            }
        )
        consumer.subscribe([subscription])
        return consumer

    def owned(consumer: Consumer) -> set[int]:
        return {tp.partition for tp in consumer.assignment()}

    read: set[tuple[int, int]] = set()

    def poll_until(condition: Callable[[], bool], *consumers: Consumer) -> None:
        """Keep the consumers polling (that is what moves librdkafka's group state on)
        until `condition` holds."""

        def polled() -> bool:
            for consumer in consumers:
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    read.add((message.partition(), message.offset()))
            return condition()

        gc.wait_until(polled, WAIT_S, lambda: f"read {len(read)}: {[owned(c) for c in consumers]}")

    first = member("rk-first", topic)
    second = None
    try:
        poll_until(lambda: len(read) == len(produced), first)
        assert owned(first) == set(range(PARTITIONS))
        first.commit(asynchronous=False)
        second = member("rk-second", f"^{re.escape(topic)}$")
        both = (first, second)
        poll_until(lambda: [len(owned(c)) for c in both] == [2, 2], *both)
        assert not owned(first) & owned(second)
        second.close()
        second = None
        poll_until(lambda: owned(first) == set(range(PARTITIONS)), first)
    finally:
        first.close()
        if second is not None:
            second.close()
    assert read == set(produced)
