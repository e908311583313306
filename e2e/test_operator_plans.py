"""The operator's planners against a real three-broker Strom cluster, through the admin
client the operator uses (strom.client.admin): the brokers carry the plans as the
planners assume.

- A pure reorder (the same replica set in a new order, `balance_leaders`) completes at
  once, nothing copied (no replica added, the ISR never shrinks), and a preferred
  election then puts the leaders where the plan says.
- A drain (`drain`) moves every replica off the leaving broker: it ends with no log of
  the topic, and no record is lost.
- A reorder naming a broker that is down is accepted and completes at once, as Kafka's
  controller does (the replica set does not change, so nothing waits for that broker);
  when the broker is back in sync, `restore_preferred` gives it its share of leaders.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Producer
from strom.client import admin as client_admin
from strom.client import errors, results
from strom_cluster import StromCluster
from strom_operator.reconcile.balancing import balance_leaders, restore_preferred
from strom_operator.reconcile.model import (
    KafkaState,
    PartitionState,
    Reassignment,
    TopicPartition,
)
from strom_operator.reconcile.scaling import (
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    clear_throttles,
    drain,
    throttle_configs,
)
from waiting import wait_until

pytestmark = pytest.mark.timeout(180)

RECORDS_PER_PARTITION = 50
# "at once": no data to copy, only a metadata record; generous for a loaded machine
REORDER_S = 10.0
MOVE_S = 60.0
THROTTLE_BYTES = 100_000_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromCluster]:
    made = StromCluster(tmp_path_factory.mktemp("operator-plans"))
    made.start()
    try:
        yield made
    finally:
        made.stop()


@pytest.fixture(scope="module")
def admin(cluster: StromCluster) -> client_admin.Admin:
    return client_admin.Admin(cluster.bootstrap, timeout=30.0)


def observe(admin: client_admin.Admin, topics: Sequence[str], min_isr: int = 1) -> KafkaState:
    """The brokers' view as the operator's KafkaState (of these topics only)."""
    info = admin.cluster()
    described = admin.describe_topics(topics)
    partitions = tuple(
        PartitionState(name, p.partition, p.replicas, p.isr, p.leader, min_isr)
        for name in sorted(described)
        for p in described[name].partitions
    )
    reassigning = frozenset(
        TopicPartition(tp.topic, tp.partition)
        for tp in admin.list_partition_reassignments()
        if tp.topic in topics
    )
    live = frozenset(node.id for node in info.nodes)
    return KafkaState(info.cluster_id, info.controller, live, partitions, reassigning)


def create(
    admin: client_admin.Admin, cluster: StromCluster, name: str, assignment: list[list[int]]
) -> None:
    admin.create_topic(name, replica_assignment=assignment)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for partition in range(len(assignment)):
        for n in range(RECORDS_PER_PARTITION):
            producer.produce(name, value=b"%d" % n, partition=partition)
    assert producer.flush(60) == 0


def apply(admin: client_admin.Admin, plan: Reassignment) -> None:
    answers = admin.alter_partition_reassignments(
        {results.TopicPartition(k.topic, k.partition): list(r) for k, r in plan.moves.items()}
    )
    assert all(error is None for error in answers.values()), answers


def apply_reorder(admin: client_admin.Admin, plan: Reassignment) -> None:
    """A reorder is done by the time the controller answers: nothing is left in flight
    (no replica added, so nothing to copy)."""
    apply(admin, plan)
    assert admin.list_partition_reassignments() == {}


def state_when(
    admin: client_admin.Admin, topic: str, condition: Callable[[KafkaState], bool]
) -> Callable[[], KafkaState | None]:
    """A poll for wait_until: the state once `condition` holds."""

    def poll() -> KafkaState | None:
        try:
            state = observe(admin, [topic])
        except errors.ClientError:
            return None  # the killed broker led the quorum: a new leader is being elected
        return state if condition(state) else None

    return poll


def wait_applied(
    admin: client_admin.Admin, topic: str, plan: Reassignment, timeout: float
) -> KafkaState:
    def finished(state: KafkaState) -> bool:
        current = {p.key: p.replicas for p in state.partitions}
        return not state.reassigning and all(current[k] == r for k, r in plan.moves.items())

    return wait_until(
        state_when(admin, topic, finished),
        timeout,
        lambda: f"{plan.moves} applied: {observe(admin, [topic])}",
    )


def elect(admin: client_admin.Admin, plan: Reassignment) -> None:
    answers = admin.elect_leaders(
        "preferred", [results.TopicPartition(k.topic, k.partition) for k in plan.elect]
    )
    assert all(error is None for error in answers.values()), answers


def wait_preferred_leaders(admin: client_admin.Admin, topic: str, timeout: float) -> KafkaState:
    return wait_until(
        state_when(admin, topic, lambda s: all(p.leader == p.replicas[0] for p in s.partitions)),
        timeout,
        lambda: f"every leader of {topic} its preferred replica: {observe(admin, [topic])}",
    )


def topic_config(admin: client_admin.Admin, topic: str, name: str) -> str | None:
    (entry,) = [e for e in admin.topic_configs([topic])[topic] if e.name == name]
    return entry.value


def assert_nothing_lost(admin: client_admin.Admin, topic: str, partitions: int) -> None:
    """Every partition's log end offset is what was produced. A new leader answers
    ListOffsets only once its high watermark has caught up (Kafka's
    OFFSET_NOT_AVAILABLE), so this asks until it does."""
    wanted = {results.TopicPartition(topic, p): RECORDS_PER_PARTITION for p in range(partitions)}

    def latest() -> dict[results.TopicPartition, int] | None:
        try:
            return admin.list_offsets(wanted, "latest")
        except errors.ClientError:
            return None

    wait_until(
        lambda: latest() == wanted, MOVE_S, lambda: f"end offsets {latest()}, wanted {wanted}"
    )


def test_a_reorder_completes_at_once_and_the_election_follows_the_plan(
    cluster: StromCluster, admin: client_admin.Admin
) -> None:
    # every partition prefers broker 1: a skewed cluster to balance
    create(admin, cluster, "skewed", [[1, 2, 3]] * 6)
    state = observe(admin, ["skewed"])
    plan = balance_leaders(state, state.live_brokers)
    assert plan is not None and len(plan.moves) == 4
    apply_reorder(admin, plan)
    after = wait_applied(admin, "skewed", plan, REORDER_S)
    for p in after.partitions:
        assert sorted(p.replicas) == [1, 2, 3] and sorted(p.isr) == [1, 2, 3]
    elect(admin, plan)
    balanced = wait_preferred_leaders(admin, "skewed", REORDER_S)
    assert Counter(p.leader for p in balanced.partitions) == {1: 2, 2: 2, 3: 2}
    assert_nothing_lost(admin, "skewed", 6)


def test_a_drain_leaves_the_broker_with_nothing_and_loses_nothing(
    cluster: StromCluster, admin: client_admin.Admin
) -> None:
    assignment = [[(p + i) % 3 + 1 for i in range(2)] for p in range(6)]
    create(admin, cluster, "draining", assignment)
    state = observe(admin, ["draining"])
    plan = drain(state, frozenset({3}), frozenset({1, 2}))
    assert isinstance(plan, Reassignment)
    # under the throttles kafka-reassign-partitions.sh would set (a rate that holds
    # nothing back here: the point is that the brokers take the values)
    throttles = throttle_configs(plan, state, THROTTLE_BYTES)
    for broker, configs in throttles.brokers.items():
        admin.alter_configs("broker", str(broker), configs, ())
    for topic, configs in throttles.topics.items():
        admin.alter_configs("topic", topic, configs, ())
    assert (
        topic_config(admin, "draining", FOLLOWER_REPLICAS)
        == (throttles.topics["draining"][FOLLOWER_REPLICAS])
    )
    apply(admin, plan)
    after = wait_applied(admin, "draining", plan, MOVE_S)
    assert all(3 not in p.replicas and sorted(p.isr) == [1, 2] for p in after.partitions)
    deletes = clear_throttles(throttles)
    for broker, names in deletes.brokers.items():
        admin.alter_configs("broker", str(broker), {}, names)
    for topic, names in deletes.topics.items():
        admin.alter_configs("topic", topic, {}, names)
    assert topic_config(admin, "draining", FOLLOWER_REPLICAS) == ""
    rates = {e.name: e for e in admin.broker_configs("1")}
    assert rates[LEADER_RATE].source == "DEFAULT_CONFIG"

    def broker_3_holds_nothing() -> bool:
        dirs = admin.describe_log_dirs([3])[3]
        return not any(r.partition.topic == "draining" for d in dirs for r in d.replicas)

    wait_until(broker_3_holds_nothing, MOVE_S, "broker 3 deleted its draining logs")
    assert_nothing_lost(admin, "draining", 6)
    assert drain(observe(admin, ["draining"]), frozenset({3}), frozenset({1, 2})) is None


def test_a_reorder_naming_a_down_broker_completes_and_restore_brings_it_back(
    cluster: StromCluster, admin: client_admin.Admin, tmp_path: Path
) -> None:
    create(admin, cluster, "lost", [[3, 1, 2], [3, 2, 1], [1, 2, 3], [2, 3, 1]])
    cluster.nodes[3].kill()
    try:
        survivors = client_admin.Admin(
            f"{cluster.nodes[1].bootstrap},{cluster.nodes[2].bootstrap}", timeout=30.0
        )
        down = wait_until(
            state_when(
                survivors,
                "lost",
                lambda s: 3 not in s.live_brokers and all(3 not in p.isr for p in s.partitions),
            ),
            MOVE_S,
            "broker 3 fenced and out of every ISR",
        )
        plan = balance_leaders(down, down.live_brokers)
        assert plan is not None
        assert {k.partition for k in plan.moves} == {0, 1}, "the two that preferred broker 3"
        apply_reorder(survivors, plan)  # each new list still names broker 3, which is down
        after = wait_applied(survivors, "lost", plan, REORDER_S)
        assert all(p.replicas[0] != 3 and p.leader != 3 for p in after.partitions)
        elect(survivors, plan)
        wait_preferred_leaders(survivors, "lost", REORDER_S)
    finally:
        cluster.nodes[3].start()

    back = wait_until(
        state_when(
            admin, "lost", lambda s: 3 in s.live_brokers and all(3 in p.isr for p in s.partitions)
        ),
        MOVE_S,
        "broker 3 back in every ISR",
    )
    restore = restore_preferred(back)
    assert restore is not None
    apply_reorder(admin, restore)
    wait_applied(admin, "lost", restore, REORDER_S)
    elect(admin, restore)
    restored = wait_preferred_leaders(admin, "lost", REORDER_S)
    leaders = Counter(p.leader for p in restored.partitions)
    assert leaders[3] == 1 and sorted(leaders.values()) == [1, 1, 2]
    assert_nothing_lost(admin, "lost", 4)
