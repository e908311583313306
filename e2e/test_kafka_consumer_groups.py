"""Kafka's own group tooling against Strom: the Java AdminClient (listConsumerGroups,
describeConsumerGroups, listConsumerGroupOffsets) and kafka-consumer-groups.sh
(org.apache.kafka.tools.consumer.group.ConsumerGroupCommand from the tools jar): list,
describe with LAG, --members, --state, reset offsets (dry run and execute), delete."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import consumer_group_tool as tool
import group_checks as gc
import pytest
from java_peers import JavaPeers
from strom_process import StromProcess

PARTITIONS = 4
GROUP = "tool-readers"


@pytest.fixture
def broker(strom_factory: Any) -> StromProcess:
    process: StromProcess = strom_factory(overrides=gc.BROKER_OVERRIDES)
    process.start()
    return process


@pytest.fixture
def members(broker: StromProcess, topic: str, tmp_path: Path) -> Iterator[gc.Group]:
    group = gc.Group("confluent", broker.bootstrap, topic, tmp_path)
    yield group
    group.cleanup()


def consumer_groups(java_peers: JavaPeers, broker: StromProcess, *args: str) -> str:
    return tool.consumer_groups(java_peers, broker.bootstrap, *args)


def table(output: str, first_column: str = "GROUP") -> list[dict[str, str]]:
    return tool.table(output, GROUP, first_column)


def admin_view(java_peers: JavaPeers, broker: StromProcess) -> dict[str, Any]:
    [view] = java_peers.run_json_lines(
        "PeerGroupConsumer", "admin", "--bootstrap-server", broker.bootstrap, "--group", GROUP
    )
    return dict(view)


def metric_values(broker: StromProcess, name: str, group: str) -> dict[int, float]:
    """{partition: value} of a per-partition group metric on the broker's /metrics."""
    with urllib.request.urlopen(f"{broker.metrics_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    out = {}
    for labels, value in re.findall(rf"^{name}\{{(.*)\}} (\S+)$", text, re.M):
        parsed = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if parsed.get("group") == group:
            out[int(parsed["partition"])] = float(value)
    return out


def listed(java_peers: JavaPeers, broker: StromProcess) -> set[str]:
    return set(consumer_groups(java_peers, broker, "--list").split())


@pytest.mark.timeout(300)
def test_admin_client_and_kafka_consumer_groups_tool(
    broker: StromProcess, members: gc.Group, java_peers: JavaPeers, topic: str
) -> None:
    gc.create_topic(broker.bootstrap, topic, PARTITIONS)
    produced = gc.produce(broker.bootstrap, topic, [10] * PARTITIONS, "tools")
    a, b = members.start("a", GROUP), members.start("b", GROUP)
    gc.wait_balanced([a, b], PARTITIONS, [2, 2], 60, members.describe)
    gc.wait_until(
        lambda: len(gc.distinct_read([a, b])) == len(produced)
        and {**a.committed(), **b.committed()} == dict.fromkeys(range(PARTITIONS), 10),
        60,
        members.describe,
    )

    # The Java AdminClient sees the live group as Kafka would describe it.
    view = admin_view(java_peers, broker)
    assert {"groupId": GROUP, "state": "Stable", "type": "Classic", "isSimple": False} in view[
        "groups"
    ]
    described = view["described"][GROUP]
    assert described["state"] == "Stable"
    assert described["partitionAssignor"] == "range"
    assert described["coordinator"] == 1
    by_client = {m["clientId"]: m for m in described["members"]}
    assert set(by_client) == {"e2e-confluent-a", "e2e-confluent-b"}
    for name, member in (("a", a), ("b", b)):
        desc = by_client[f"e2e-confluent-{name}"]
        assert desc["host"] == "/127.0.0.1"
        assert {p for t, p in desc["assignment"] if t == topic} == set(member.owned() or ())
    offsets = {o["partition"]: o["offset"] for o in view["offsets"][GROUP]}
    assert offsets == dict.fromkeys(range(PARTITIONS), 10)

    # kafka-consumer-groups.sh: --list, --describe (offsets, lag, owners), --members, --state.
    assert GROUP in listed(java_peers, broker)
    rows = table(consumer_groups(java_peers, broker, "--describe", "--group", GROUP))
    assert sorted(int(r["PARTITION"]) for r in rows) == list(range(PARTITIONS))
    member_ids = {m["memberId"] for m in described["members"]}
    for row in rows:
        assert row["TOPIC"] == topic
        assert (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == ("10", "10", "0")
        assert row["CONSUMER-ID"] in member_ids
        assert row["HOST"] == "/127.0.0.1"
    member_rows = table(
        consumer_groups(java_peers, broker, "--describe", "--group", GROUP, "--members")
    )
    assert sorted(r["#PARTITIONS"] for r in member_rows) == ["2", "2"]
    state = consumer_groups(java_peers, broker, "--describe", "--group", GROUP, "--state")
    assert re.search(rf"^{GROUP}\s+\S+\s+\(1\)\s+range\s+Stable\s+2\s*$", state, re.M), state

    # Members gone and more records: the lag shows, nobody owns the partitions.
    members.stop_all()
    more = gc.produce(broker.bootstrap, topic, [5] * PARTITIONS, "later")
    produced.update(more)
    out = consumer_groups(java_peers, broker, "--describe", "--group", GROUP)
    assert f"Consumer group '{GROUP}' has no active members." in out
    for row in table(out):
        assert (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == ("10", "15", "5")
        assert row["CONSUMER-ID"] == "-"
    # The same lag on the broker's /metrics, for dashboards and alerts.
    scraped = metric_values(broker, "strom_consumer_group_lag", GROUP)
    assert scraped == dict.fromkeys(range(PARTITIONS), 5.0)

    # Reset to earliest: a dry run changes nothing, --execute does.
    reset = ["--reset-offsets", "--group", GROUP, "--topic", topic, "--to-earliest"]
    planned = table(consumer_groups(java_peers, broker, *reset, "--dry-run"))
    assert {r["NEW-OFFSET"] for r in planned} == {"0"} and len(planned) == PARTITIONS
    committed = gc.committed_offsets(broker.bootstrap, GROUP, topic, PARTITIONS)
    assert {p: o for p, (o, _) in committed.items()} == dict.fromkeys(range(PARTITIONS), 10)
    consumer_groups(java_peers, broker, *reset, "--execute")
    committed = gc.committed_offsets(broker.bootstrap, GROUP, topic, PARTITIONS)
    assert {p: o for p, (o, _) in committed.items()} == dict.fromkeys(range(PARTITIONS), 0)

    # A member of the group now reads everything again, from the start.
    again = members.start("again", GROUP)
    gc.wait_until(lambda: len(gc.distinct_read([again])) == len(produced), 60, members.describe)
    members.stop_all([again])
    gc.check_exactly_once([again], produced)
    gc.check_member_errors([a, b, again])

    # --to-offset and --shift-by.
    base = ["--reset-offsets", "--group", GROUP, "--topic", topic, "--execute"]
    consumer_groups(java_peers, broker, *base, "--to-offset", "12")
    consumer_groups(java_peers, broker, *base, "--shift-by", "-2")
    committed = gc.committed_offsets(broker.bootstrap, GROUP, topic, PARTITIONS)
    assert {p: o for p, (o, _) in committed.items()} == dict.fromkeys(range(PARTITIONS), 10)

    # --delete: gone from the listing and from the AdminClient.
    out = consumer_groups(java_peers, broker, "--delete", "--group", GROUP)
    assert f"Deletion of requested consumer groups ('{GROUP}') was successful." in out
    assert GROUP not in listed(java_peers, broker)
    committed = gc.committed_offsets(broker.bootstrap, GROUP, topic, PARTITIONS)
    assert {o for o, _ in committed.values()} == {-1}
