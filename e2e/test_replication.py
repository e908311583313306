"""Replication across three Strom processes (issue 13): followers copy their leaders,
acks=all waits for the in-sync replicas, and a leader's death loses no acknowledged
record; min.insync.replicas refuses acks=all writes the ISR cannot cover.
"""

from __future__ import annotations

import asyncio
import collections
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import wire_requests
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.static.primitive import i8
from strom_cluster import StromCluster
from waiting import wait_until

pytestmark = pytest.mark.timeout(300)

REQUEST_TIMEOUT_S = 30
TOPIC = "replicated"
PARTITIONS = 3
RECORDS = 300
# A short session so that the controller fences a dead broker quickly.
FAST_FENCING = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[StromCluster]:
    with StromCluster(tmp_path, overrides=FAST_FENCING).started() as made:
        yield made


def admin(cluster: StromCluster, node_id: int | None = None) -> AdminClient:
    where = cluster.bootstrap if node_id is None else cluster.nodes[node_id].bootstrap
    return AdminClient({"bootstrap.servers": where})


def create(cluster: StromCluster, topic: NewTopic) -> None:
    client = admin(cluster)  # kept alive until the answer is in
    client.create_topics([topic], request_timeout=REQUEST_TIMEOUT_S)[topic.topic].result(
        REQUEST_TIMEOUT_S
    )


def partition_states(
    cluster: StromCluster, node_id: int, topic: str
) -> dict[int, tuple[int, list[int]]]:
    """index -> (leader, ISR) as broker `node_id`'s Metadata answers."""
    described = admin(cluster, node_id).list_topics(topic, timeout=REQUEST_TIMEOUT_S)
    return {i: (p.leader, sorted(p.isrs)) for i, p in described.topics[topic].partitions.items()}


def scraped(cluster: StromCluster, name: str, labels: str = "") -> float:
    """The sum over the running nodes of a /metrics sample, with exactly these labels as
    the exposition writes them (`state="leader"`), or none."""
    sample = f"{name}{{{labels}}} " if labels else f"{name} "
    total = 0.0
    for node in cluster.nodes.values():
        if not node.running:
            continue
        with urllib.request.urlopen(f"{node.metrics_url}/metrics", timeout=10) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(sample):
                    total += float(line.split()[-1])
    return total


def produce(cluster: StromCluster, topic: str, count: int) -> dict[int, list[bytes]]:
    """Idempotent acks=all writes of `count` numbered records; partition -> values acked
    in order."""
    acked: dict[int, list[bytes]] = collections.defaultdict(list)
    errors: list[str] = []

    def delivered(error: KafkaError | None, message: object) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            acked[message.partition()].append(message.value())  # type: ignore[attr-defined]

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    for n in range(count):
        producer.produce(topic, value=b"v%05d" % n, partition=n % PARTITIONS, on_delivery=delivered)
    assert producer.flush(REQUEST_TIMEOUT_S) == 0
    assert errors == []
    return acked


def read_all(
    cluster: StromCluster, topic: str, expected: dict[int, list[bytes]]
) -> dict[int, list[bytes]]:
    """Every partition from its start, until it holds as many records as `expected`
    (a new leader's high watermark catches up once its followers fetch) or the deadline."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"check-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        seen: dict[int, list[bytes]] = {}
        for index, wanted in expected.items():
            consumer.assign([TopicPartition(topic, index, 0)])
            values: list[bytes] = []
            deadline = time.monotonic() + REQUEST_TIMEOUT_S
            while len(values) < len(wanted) and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    values.append(message.value())
            seen[index] = values
        return seen
    finally:
        consumer.close()


def test_acknowledged_records_survive_the_leaders_death(cluster: StromCluster) -> None:
    create(cluster, NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"}))
    wait_until(
        lambda: all(len(isr) == 3 for _, isr in partition_states(cluster, 1, TOPIC).values()),
        REQUEST_TIMEOUT_S,
        "every partition has its three replicas in sync",
    )
    acked = produce(cluster, TOPIC, RECORDS)
    before = partition_states(cluster, 1, TOPIC)
    dead = before[0][0]
    cluster.nodes[dead].kill()
    survivor = next(n for n in cluster.nodes if n != dead)
    wait_until(
        lambda: all(
            leader not in (dead, -1) and dead not in isr
            for leader, isr in partition_states(cluster, survivor, TOPIC).values()
        ),
        REQUEST_TIMEOUT_S,
        f"new leaders and ISRs without broker {dead}",
    )
    assert read_all(cluster, TOPIC, acked) == acked
    assert scraped(cluster, "strom_under_replicated_partitions") == PARTITIONS
    assert scraped(cluster, "strom_leader_partitions") == PARTITIONS
    # each survivor's image: two brokers online, the dead one fenced
    wait_until(
        lambda: (scraped(cluster, "strom_brokers_online"), scraped(cluster, "strom_fenced_brokers"))
        == (4, 2),
        REQUEST_TIMEOUT_S,
        f"both survivors see broker {dead} fenced",
    )
    # one quorum leader, the active controller; it counts what moved off the dead broker
    wait_until(
        lambda: (
            scraped(cluster, "strom_raft_state", 'state="leader"'),
            scraped(cluster, "strom_raft_state", 'state="follower"'),
            scraped(cluster, "strom_active_controller"),
        )
        == (1, 1, 1),
        REQUEST_TIMEOUT_S,
        "one survivor leads the quorum as the active controller, the other follows",
    )
    assert scraped(cluster, "strom_partition_leaders", f'broker="{dead}"') == 0
    # partition 0 was led by its preferred replica, the broker that died
    assert scraped(cluster, "strom_preferred_replica_imbalance") >= 1
    # writes go on with two in sync (min.insync.replicas=2)
    more = produce(cluster, TOPIC, PARTITIONS * 10)
    assert all(len(values) == 10 for values in more.values())
    # the dead broker comes back, catches up and rejoins every ISR
    cluster.nodes[dead].start()
    wait_until(
        lambda: all(
            len(isr) == 3 for _, isr in partition_states(cluster, survivor, TOPIC).values()
        ),
        REQUEST_TIMEOUT_S,
        f"broker {dead} back in every ISR",
    )
    # each leader proposed it back through AlterPartition, and counted that
    wait_until(
        lambda: scraped(cluster, "strom_under_replicated_partitions") == 0,
        REQUEST_TIMEOUT_S,
        "no under-replicated partition left",
    )
    assert scraped(cluster, "strom_isr_expands_total") >= PARTITIONS


def test_min_insync_replicas_refuses_what_the_isr_cannot_cover(cluster: StromCluster) -> None:
    create(cluster, NewTopic("strict", 1, 3, config={"min.insync.replicas": "3"}))
    produce_one = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 5000}
    )
    errors: list[KafkaError] = []
    produce_one.produce("strict", b"all three", on_delivery=lambda e, m: errors.append(e))
    produce_one.flush(REQUEST_TIMEOUT_S)
    assert errors == [None]
    ((leader, _),) = partition_states(cluster, 1, "strict").values()
    victim = next(n for n in cluster.nodes if n != leader)
    cluster.nodes[victim].kill()
    wait_until(
        lambda: victim not in partition_states(cluster, leader, "strict")[0][1],
        REQUEST_TIMEOUT_S,
        f"broker {victim} leaves the ISR",
    )
    errors.clear()
    produce_one.produce("strict", b"two of three", on_delivery=lambda e, m: errors.append(e))
    produce_one.flush(REQUEST_TIMEOUT_S)
    (error,) = errors
    assert error is not None and error.code() in (
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError._MSG_TIMED_OUT,
    ), error
    # acks=1 still works
    acks_one = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1"})
    acks_one.produce("strict", b"leader only")
    assert acks_one.flush(REQUEST_TIMEOUT_S) == 0


def committed(client: AdminClient, group: str, topic: str) -> dict[int, int]:
    request = [
        ConsumerGroupTopicPartitions(group, [TopicPartition(topic, i) for i in range(PARTITIONS)])
    ]
    (future,) = client.list_consumer_group_offsets(request, request_timeout=10).values()
    return {tp.partition: tp.offset for tp in future.result(REQUEST_TIMEOUT_S).topic_partitions}


def coordinator(cluster: StromCluster, group: str) -> int | None:
    """The group's coordinator as a running broker's FindCoordinator names it (None: none
    yet). Asked on the wire: librdkafka 2.x's admin client can abort the process
    (rd_kafka_enq_once_del_source_return: eonce->refcnt > 0) when it looks a coordinator
    up while that broker is dead."""
    node = next(n for n in cluster.nodes.values() if n.running)
    request = FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,))
    try:
        answer = asyncio.run(wire_requests.send(node.port, request, host=node.host))
    except Exception:
        return None
    (entry,) = answer.coordinators
    return int(entry.node_id) if entry.error_code == ErrorCode.none else None


def test_a_groups_coordinator_moves_with_its_offsets_partition(cluster: StromCluster) -> None:
    create(cluster, NewTopic("grouped", PARTITIONS, 3))
    produce(cluster, "grouped", 30)
    settings = {
        "bootstrap.servers": cluster.bootstrap,
        "group.id": "movers",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    consumer = Consumer(settings)
    consumer.subscribe(["grouped"])
    read = 0
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while read < 30 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read += 1
    assert read == 30
    consumer.commit(asynchronous=False)
    consumer.close()
    client = admin(cluster)
    before = committed(client, "movers", "grouped")
    assert sum(before.values()) == 30
    old = coordinator(cluster, "movers")
    assert old is not None
    cluster.nodes[old].kill()
    survivor = next(n for n in cluster.nodes if n != old)

    wait_until(
        lambda: coordinator(cluster, "movers") not in (old, None),
        REQUEST_TIMEOUT_S,
        f"another coordinator than broker {old}",
    )

    # the new coordinator loaded the group's offsets from its replica (asked the way a
    # consumer asks, not through librdkafka's admin client: see `coordinator`)
    reader = Consumer(settings)
    wanted = [TopicPartition("grouped", i) for i in range(PARTITIONS)]

    def offsets_or_none() -> dict[int, int] | None:
        try:
            found = reader.committed(wanted, timeout=10)
        except Exception:
            return None
        return {tp.partition: tp.offset for tp in found}

    try:
        wait_until(
            lambda: offsets_or_none() == before,
            REQUEST_TIMEOUT_S,
            f"the committed offsets through the new coordinator (was broker {old})",
        )
    finally:
        reader.close()
    produce(cluster, "grouped", PARTITIONS)
    consumer = Consumer(settings)
    consumer.subscribe(["grouped"])
    fresh: list[bytes] = []
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while len(fresh) < PARTITIONS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            fresh.append(message.value())
    consumer.close()
    assert sorted(fresh) == [b"v%05d" % n for n in range(PARTITIONS)], survivor
