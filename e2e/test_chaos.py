"""Chaos test (issue 13): a 3-broker cluster, one RF=3 topic with min.insync.replicas=2,
idempotent acks=all producers (confluent-kafka and the Java client) writing
sequence-numbered values to every partition and a consumer group committing as it reads,
while a nemesis, one broker at a time (the active controller, partition leaders, any),
SIGKILLs and restarts it, SIGSTOPs and resumes it, or cuts it off from the other brokers.

Afterwards, with every fault healed, the whole topic is read back: no acknowledged record
lost, none duplicated, each at the offset it was acknowledged at and in each producer's
acknowledgement order, and the group's committed offsets never behind what it was told was
committed (chaos_checker.py). It prints the seed, the faults, the counts and the verdict.

CHAOS_SECONDS (default 90: the whole test stays under 3 minutes) sets how long the
clients write; CHAOS_SEED replays a nemesis schedule (else a fresh one, printed). Not
STROM_*: strom-server takes STROM_* variables as its configuration.
`make chaos MINUTES=30 [SEED=n]` runs it long. The network cuts need root (network
namespaces); without root the nemesis kills and pauses only.
"""

from __future__ import annotations

import os
import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import netns
import pytest
from chaos_checker import check
from chaos_nemesis import HEALTHY_TIMEOUT_S, Nemesis, wait_healthy
from chaos_workload import (
    DRAIN_S,
    Clock,
    GroupConsumer,
    JavaProducer,
    PythonProducer,
    committed_offsets,
    read_all,
)
from confluent_kafka.admin import AdminClient, NewTopic
from java_peers import JavaPeers
from strom_cluster import StromCluster
from waiting import wait_until

SECONDS = float(os.environ.get("CHAOS_SECONDS", "90"))
PARTITIONS = 6
# CHAOS_TOPIC_CONFIGS="key=value,...": topic configs on top of these, for experiments
# (e.g. min.insync.replicas=1,unclean.leader.election.enable=true loses acknowledged
# records by design: the checker must say so)
TOPIC_CONFIGS = {
    "min.insync.replicas": "2",
    **dict(
        item.split("=", 1) for item in os.environ.get("CHAOS_TOPIC_CONFIGS", "").split(",") if item
    ),
}
RATE = 40.0  # records a second, per producer
QUIET_S = 15.0  # no new fault this close to the end: the clients finish on a healed cluster
TOPIC = "chaos"
GROUP = "chaos-group"
SETTLE_S = 30.0  # the final reads

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(SECONDS + 3 * DRAIN_S + 2 * HEALTHY_TIMEOUT_S + 120),
]


@pytest.fixture
def hosts() -> Iterator[netns.Hosts | None]:
    """The brokers' network namespaces, or None (no network cuts) without root."""
    reason = netns.unavailable_reason()
    if reason is not None:
        print(f"chaos: no network cuts ({reason})")
        yield None
        return
    with netns.Hosts(3) as made:
        yield made


def seed() -> int:
    given = os.environ.get("CHAOS_SEED", "")
    return int(given) if given else secrets.randbelow(2**32)


def test_acknowledged_records_survive_broker_faults(
    tmp_path: Path, hosts: netns.Hosts | None, java_peers: JavaPeers
) -> None:
    chosen = seed()
    print(
        f"\nchaos seed {chosen}, {SECONDS:.0f} s, topic configs {TOPIC_CONFIGS} (replay: "
        f"make chaos SEED={chosen}, or CHAOS_SEED={chosen} pytest e2e/test_chaos.py)",
        flush=True,
    )
    placement: dict[str, object] = {}
    if hosts is not None:
        placement = {"hosts": [str(h.address) for h in hosts], "wraps": [h.prefix for h in hosts]}
    cluster = StromCluster(
        tmp_path,
        overrides={
            # fenced (and its partitions' leadership moved) within the faults' few seconds
            "broker.session.timeout.ms": "4000",
            "broker.heartbeat.interval.ms": "1000",
        },
        **placement,  # type: ignore[arg-type]
    )
    clock = Clock()
    nemesis = Nemesis(cluster, hosts, TOPIC, PARTITIONS, clock, chosen)
    nemesis.stop_at = max(0.0, SECONDS - QUIET_S)
    python = PythonProducer(cluster.bootstrap, TOPIC, PARTITIONS, clock, name="py", rate=RATE)
    python.stop_at = SECONDS
    java = JavaProducer(
        java_peers.argv("PeerSequenceProducer"),
        cluster.bootstrap,
        TOPIC,
        PARTITIONS,
        clock,
        name="java",
        rate=RATE,
        seconds=SECONDS,
        stderr_path=tmp_path / "java-producer.stderr.txt",
    )
    group = GroupConsumer(cluster.bootstrap, TOPIC, GROUP, clock)
    group.stop_at = SECONDS
    cleanups: list[Callable[[], object]] = [cluster.stop]  # run last to first
    try:
        cluster.start()
        create_topic(cluster.bootstrap)
        wait_healthy(cluster, TOPIC, PARTITIONS, "before the run")
        clock.reset()  # time 0: the clients and the nemesis start
        nemesis.start()
        cleanups.append(lambda: nemesis.join(2 * HEALTHY_TIMEOUT_S))
        cleanups.append(nemesis.stop)  # heals whatever is broken, then ends
        java.start()
        cleanups.append(java.kill)
        python.start()
        cleanups.append(lambda: python.join(10))
        group.start()
        cleanups.append(lambda: group.join(10))

        # the run ends with the Java producer (the last to drain), or at once if the
        # nemesis fails (an unhealthy cluster): no point writing on for the rest of it
        wait_until(
            lambda: not java.running or nemesis.error is not None,
            SECONDS + DRAIN_S + 20,
            "the Java producer ends after its deadline and drain",
        )
        if nemesis.error is not None:
            raise nemesis.error
        java.wait(10)
        python.join(SECONDS + DRAIN_S + 20)
        assert not python.is_alive(), "the Python producer did not end after its drain"
        group.join(SECONDS + 60)
        assert not group.is_alive(), "the group consumer did not end"
        nemesis.stop()
        nemesis.join(2 * HEALTHY_TIMEOUT_S)
        assert not nemesis.is_alive(), "the nemesis did not heal within its deadline"
        for failed in (python.error, group.error, nemesis.error):
            if failed is not None:
                raise failed

        wait_healthy(cluster, TOPIC, PARTITIONS, "after the run")
        acks = python.acks + java.acks
        records = read_all(cluster.bootstrap, TOPIC, PARTITIONS, acks, SETTLE_S)
        final = committed_offsets(cluster.bootstrap, TOPIC, GROUP, PARTITIONS, SETTLE_S)
    except BaseException:
        python.abort()
        group.stop_at = 0.0
        raise
    finally:
        for cleanup in reversed(cleanups):
            cleanup()

    verdict = check(acks, records, group.commits, final)
    kinds = Counter(fault.kind for fault in nemesis.faults)
    roles = Counter(fault.role.split(" of ")[0] for fault in nemesis.faults)
    print(f"chaos seed {chosen}: {len(nemesis.faults)} faults {dict(kinds)} of {dict(roles)}")
    for fault in nemesis.faults:
        print(f"  {fault}")
    print(
        f"operations: sent py={python.sent} java={java.sent}; not acknowledged "
        f"py={len(python.failed)} java={len(java.failed)}; fatal producer errors "
        f"py={len(python.fatal)} java={len(java.fatal)}; consumed {group.consumed}, "
        f"commits {len(group.commits)} (failed {len(group.failed_commits)}); "
        f"final commits {final}"
    )
    for producer in (python, java):
        for line in producer.fatal[:3]:
            print(f"  {producer.producer_name} fatal: {line}")
        for line in producer.failed[:3]:
            print(f"  {producer.producer_name} not acknowledged: {line}")
    print(verdict.summary(), flush=True)

    assert verdict.ok, f"chaos seed {chosen}:\n{verdict.summary()}"
    for name, producer_acks in (("py", python.acks), ("java", java.acks)):
        written = {ack.partition for ack in producer_acks}
        assert written == set(range(PARTITIONS)), (
            f"chaos seed {chosen}: producer {name} got acknowledgements in partitions "
            f"{sorted(written)} only (of {PARTITIONS}): the run proves nothing"
        )
    assert group.commits, f"chaos seed {chosen}: the group never committed"


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(
        TOPIC,
        num_partitions=PARTITIONS,
        replication_factor=3,
        config=TOPIC_CONFIGS,
    )
    admin.create_topics([topic])[TOPIC].result(30)
