"""Three Strom processes in combined mode share one metadata quorum (issue 12).

Topics made through any broker are seen by every broker; leaders are spread evenly; the
active controller can be killed and another takes over within seconds; a restarted node
catches up; a rolling restart loses nothing; consumer groups land on the broker that
leads their `__consumer_offsets` partition, and the others answer NOT_COORDINATOR.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import wire_requests
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.types import GroupId
from kio.static.primitive import i8, i32
from strom_cluster import StromCluster, describe_quorum
from waiting import wait_until

pytestmark = pytest.mark.timeout(300)

REQUEST_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromCluster]:
    made = StromCluster(tmp_path_factory.mktemp("cluster"))
    made.start()
    try:
        yield made
    finally:
        made.stop()


def admin(cluster: StromCluster, node_id: int) -> AdminClient:
    """An admin client that knows only this node (so its requests go through it)."""
    return AdminClient({"bootstrap.servers": cluster.nodes[node_id].bootstrap})


def metadata(cluster: StromCluster, node_id: int) -> ClusterMetadata:
    return admin(cluster, node_id).list_topics(timeout=REQUEST_TIMEOUT_S)


def leaders(described: ClusterMetadata, topic: str) -> dict[int, int]:
    return {index: p.leader for index, p in described.topics[topic].partitions.items()}


def active_controller(cluster: StromCluster, among: list[int]) -> int:
    def known() -> int | None:
        for node_id in among:
            try:
                leader = describe_quorum(cluster.nodes[node_id]).leader
            except Exception:
                continue
            if leader in among:
                return leader
        return None

    found = wait_until(known, 30, "a quorum leader among the running nodes")
    assert found is not None
    return found


def create(cluster: StromCluster, node_id: int, topic: NewTopic) -> float:
    """Create through `node_id`; the seconds it took."""
    started = time.monotonic()
    client = admin(cluster, node_id)  # kept alive until the answer is in
    client.create_topics([topic], request_timeout=REQUEST_TIMEOUT_S)[topic.topic].result(
        REQUEST_TIMEOUT_S
    )
    return time.monotonic() - started


def everyone_sees(cluster: StromCluster, topic: str, partitions: int) -> None:
    for node_id in cluster.running():
        wait_until(
            lambda node_id=node_id: topic in metadata(cluster, node_id).topics
            and len(metadata(cluster, node_id).topics[topic].partitions) == partitions,
            30,
            f"broker {node_id} lists {topic} with {partitions} partitions",
        )


def test_topics_made_through_any_broker_are_seen_by_all_with_leaders_spread(
    cluster: StromCluster,
) -> None:
    for node_id in (1, 2, 3):
        create(cluster, node_id, NewTopic(f"spread-{node_id}", 300, 1))
    for node_id in (1, 2, 3):
        everyone_sees(cluster, f"spread-{node_id}", 300)
    views = [metadata(cluster, node_id) for node_id in (1, 2, 3)]
    for view in views:
        assert sorted(view.brokers) == [1, 2, 3]
        assert view.controller_id in (1, 2, 3)
    for node_id in (1, 2, 3):
        topic = f"spread-{node_id}"
        first = leaders(views[0], topic)
        assert all(leaders(view, topic) == first for view in views[1:])
        per_broker = collections.Counter(first.values())
        assert sorted(per_broker) == [1, 2, 3]
        assert max(per_broker.values()) - min(per_broker.values()) <= 1, per_broker


def test_replication_factor_three_places_a_replica_on_every_broker(
    cluster: StromCluster,
) -> None:
    create(cluster, 2, NewTopic("rf3", 6, 3))
    everyone_sees(cluster, "rf3", 6)
    described = metadata(cluster, 3).topics["rf3"]
    lead = collections.Counter(p.leader for p in described.partitions.values())
    assert sorted(lead.values()) == [2, 2, 2]
    for partition in described.partitions.values():
        assert sorted(partition.replicas) == [1, 2, 3]
        # nothing written yet: every replica is in sync from the start
        assert sorted(partition.isrs) == [1, 2, 3]
    for node_id in (1, 2, 3):
        hosted = sorted(Path(cluster.nodes[node_id].log_dir).glob("rf3-*"))
        assert len(hosted) == 6, f"broker {node_id} hosts {hosted}"


def test_records_go_to_each_partitions_leader_and_come_back(cluster: StromCluster) -> None:
    create(cluster, 1, NewTopic("round-trip", 6, 1))
    everyone_sees(cluster, "round-trip", 6)
    producer = Producer({"bootstrap.servers": cluster.nodes[3].bootstrap, "acks": "all"})
    for n in range(60):
        producer.produce("round-trip", key=str(n).encode(), value=f"v{n}".encode(), partition=n % 6)
    assert producer.flush(REQUEST_TIMEOUT_S) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.nodes[2].bootstrap,
            "group.id": "round-trip-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["round-trip"])
        seen: dict[bytes, bytes] = {}
        deadline = time.monotonic() + 60
        while len(seen) < 60 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen[message.key()] = message.value()
        assert len(seen) == 60
        consumer.commit(asynchronous=False)
        committed = consumer.committed(
            [TopicPartition("round-trip", i) for i in range(6)], timeout=REQUEST_TIMEOUT_S
        )
        assert sum(tp.offset for tp in committed) == 60
    finally:
        consumer.close()


def test_a_group_is_coordinated_by_its_offsets_partition_leader(cluster: StromCluster) -> None:
    async def find(port: int, group: str) -> int:
        answer = await wire_requests.send(
            port, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,))
        )
        (entry,) = answer.coordinators
        assert entry.error_code == ErrorCode.none, entry
        return int(entry.node_id)

    groups = [f"placed-{n}" for n in range(12)]
    coordinators = {
        group: {asyncio.run(find(cluster.nodes[n].port, group)) for n in (1, 2, 3)}
        for group in groups
    }
    # every broker names the same coordinator, and the groups are spread over brokers
    assert all(len(found) == 1 for found in coordinators.values()), coordinators
    assert len({found.pop() for found in coordinators.values()}) == 3
    group = groups[0]
    owner = asyncio.run(find(cluster.nodes[1].port, group))
    other = next(n for n in (1, 2, 3) if n != owner)
    heartbeat = HeartbeatRequest(
        group_id=GroupId(group),
        generation_id=i32(1),
        member_id="nobody",
        group_instance_id=None,
    )
    answer = asyncio.run(wire_requests.send(cluster.nodes[other].port, heartbeat))
    assert answer.error_code == ErrorCode.not_coordinator


def test_killing_the_active_controller_elects_another_that_serves_within_5s(
    tmp_path: Path,
) -> None:
    cluster = StromCluster(tmp_path)
    cluster.start()
    try:
        create(cluster, 1, NewTopic("before", 3, 3))
        killed = active_controller(cluster, [1, 2, 3])
        cluster.nodes[killed].kill()
        survivors = [n for n in (1, 2, 3) if n != killed]
        started = time.monotonic()
        deadline = started + 30
        while True:
            try:
                create(cluster, survivors[0], NewTopic("after", 3, 2))
                break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        took = time.monotonic() - started
        assert took < 5.0, f"a topic was created {took:.1f} s after the controller died"
        new_leader = active_controller(cluster, survivors)
        assert new_leader != killed
        # no heartbeat for broker.session.timeout.ms (9 s): fenced, gone from Metadata
        wait_until(
            lambda: killed not in metadata(cluster, survivors[1]).brokers,
            30,
            f"broker {killed} is fenced and no longer listed",
        )
        # the killed node comes back and catches up with what happened without it
        cluster.nodes[killed].start()
        everyone_sees(cluster, "after", 3)
        restarted = describe_quorum(cluster.nodes[killed])
        assert restarted.voters == [1, 2, 3] and restarted.leader in (1, 2, 3)
    finally:
        cluster.stop()


def test_a_rolling_restart_loses_no_metadata(tmp_path: Path) -> None:
    cluster = StromCluster(tmp_path)
    cluster.start()
    try:
        for n in range(5):
            create(cluster, 1 + n % 3, NewTopic(f"kept-{n}", 4, 3))
        for node_id in (1, 2, 3):
            cluster.nodes[node_id].stop()
            create(cluster, 1 + node_id % 3, NewTopic(f"during-{node_id}", 2, 2))
            cluster.nodes[node_id].start()
        names = {f"kept-{n}" for n in range(5)} | {f"during-{n}" for n in (1, 2, 3)}
        for node_id in (1, 2, 3):
            wait_until(
                lambda node_id=node_id: names <= set(metadata(cluster, node_id).topics),
                30,
                f"broker {node_id} lists {sorted(names)}",
            )
    finally:
        cluster.stop()


def test_a_node_that_missed_the_log_catches_up_from_a_snapshot(tmp_path: Path) -> None:
    # Snapshots every ~4 KB of records, so the leader deletes the log a stopped node needs.
    cluster = StromCluster(
        tmp_path, overrides={"metadata.log.max.record.bytes.between.snapshots": "4096"}
    )
    cluster.start()
    try:
        cluster.nodes[3].stop()
        for n in range(30):
            create(cluster, 1, NewTopic(f"while-away-{n}", 3, 2))
        leader = active_controller(cluster, [1, 2])
        metadata_dir = cluster.nodes[leader].log_dir / "__cluster_metadata-0"
        assert list(metadata_dir.glob("*.checkpoint")), "the leader wrote no snapshot"
        cluster.nodes[3].start()
        names = {f"while-away-{n}" for n in range(30)}
        wait_until(
            lambda: names <= set(metadata(cluster, 3).topics),
            30,
            "the restarted node lists every topic made while it was away",
        )
        assert "loaded the metadata snapshot" in cluster.nodes[3].log_tail(200_000)
        # and takes replicas again
        create(cluster, 2, NewTopic("after-return", 3, 3))
        wait_until(
            lambda: len(list(cluster.nodes[3].log_dir.glob("after-return-*"))) == 3,
            30,
            "the returned node hosts its replicas of a new topic",
        )
        # A node whose metadata log is gone (moved away after a corruption) gets it all
        # back from the leader: the snapshot, then the log after it.
        cluster.nodes[3].stop()
        own = cluster.nodes[3].log_dir / "__cluster_metadata-0"
        own.rename(own.with_name("__cluster_metadata-0.corrupt"))
        cluster.nodes[3].start()
        wait_until(
            lambda: names | {"after-return"} <= set(metadata(cluster, 3).topics),
            30,
            "the node with a new metadata log lists every topic again",
        )
    finally:
        cluster.stop()


def test_partitions_of_a_dead_broker_go_offline_and_come_back_with_it(tmp_path: Path) -> None:
    # A short session so the controller fences the dead broker quickly.
    cluster = StromCluster(
        tmp_path,
        overrides={"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"},
    )
    cluster.start()
    try:
        create(cluster, 1, NewTopic("solo", 6, 1))
        everyone_sees(cluster, "solo", 6)
        create(
            cluster,
            1,
            NewTopic("anyone", 6, 2, config={"unclean.leader.election.enable": "true"}),
        )
        everyone_sees(cluster, "anyone", 6)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for n in range(60):
            producer.produce("solo", value=b"%d" % n, partition=n % 6)
        assert producer.flush(REQUEST_TIMEOUT_S) == 0
        before = leaders(metadata(cluster, 1), "solo")
        dead = before[0]
        led = sorted(index for index, leader in before.items() if leader == dead)
        cluster.nodes[dead].kill()
        survivor = next(n for n in (1, 2, 3) if n != dead)
        # No other replica is in sync (RF 1): those partitions have no leader, not a dead one
        wait_until(
            lambda: all(leaders(metadata(cluster, survivor), "solo")[index] == -1 for index in led),
            30,
            f"broker {survivor} shows broker {dead}'s partitions without a leader",
        )
        # where unclean elections are allowed, the other replica leads at once
        replicas = {
            index: p.replicas
            for index, p in metadata(cluster, survivor).topics["anyone"].partitions.items()
        }
        wait_until(
            lambda: all(
                leader == next(r for r in replicas[index] if r != dead)
                for index, leader in leaders(metadata(cluster, survivor), "anyone").items()
                if dead in replicas[index]
            ),
            30,
            "the other replica leads the partitions of the unclean topic",
        )
        cluster.nodes[dead].start()
        wait_until(
            lambda: leaders(metadata(cluster, survivor), "solo") == before,
            30,
            "the returned broker leads its partitions again",
        )
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "after-return",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe(["solo"])
            seen = set()
            deadline = time.monotonic() + 60
            while len(seen) < 60 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    seen.add(message.value())
            assert len(seen) == 60
        finally:
            consumer.close()
    finally:
        cluster.stop()
