"""Leader balance after a broker loss, its restoration, and a lost volume's evacuation."""

from __future__ import annotations

import random
from collections import Counter

from strom_operator.reconcile.balancing import balance_leaders, evacuate, restore_preferred
from strom_operator.reconcile.model import (
    KafkaState,
    PartitionState,
    Reassignment,
    Refusal,
    TopicPartition,
)

ALL = frozenset({0, 1, 2})


def kafka_placement(
    topic: str, partitions: int, brokers: int, rf: int, start: int
) -> list[tuple[int, ...]]:
    """Round-robin replica lists like Kafka's: partition p starts on broker start+p."""
    return [tuple((start + p + i) % brokers for i in range(rf)) for p in range(partitions)]


def cluster(topics: dict[str, int], *, live: frozenset[int] = ALL) -> KafkaState:
    """Every topic RF 3 over brokers 0-2, Kafka's placement; replicas on brokers not
    `live` are out of the ISR and lead nothing (the controller elected others)."""
    partitions = []
    for start, (topic, count) in enumerate(sorted(topics.items())):
        for index, replicas in enumerate(kafka_placement(topic, count, 3, 3, start)):
            isr = tuple(b for b in replicas if b in live)
            partitions.append(PartitionState(topic, index, replicas, isr, isr[0], 2))
    return KafkaState("cid", 0, live, tuple(partitions), frozenset())


def apply(state: KafkaState, plan: Reassignment) -> KafkaState:
    """The brokers after the plan: new replica lists, the elected leaders."""
    partitions = []
    for p in state.partitions:
        replicas = plan.moves.get(p.key, p.replicas)
        leader = replicas[0] if p.key in plan.elect else p.leader
        partitions.append(PartitionState(p.topic, p.partition, replicas, p.isr, leader, p.min_isr))
    return KafkaState(
        state.cluster_id, state.controller_id, state.live_brokers, tuple(partitions), frozenset()
    )


def preferred_counts(state: KafkaState, topic: str | None = None) -> Counter[int]:
    return Counter(p.replicas[0] for p in state.partitions if topic in (None, p.topic))


def test_one_broker_lost_preferred_leaders_spread_evenly_over_the_two_survivors() -> None:
    before = cluster({"orders": 6, "events": 4})
    lost = cluster({"orders": 6, "events": 4}, live=frozenset({0, 1}))
    plan = balance_leaders(lost, frozenset({0, 1}))
    assert plan is not None
    after = apply(lost, plan)
    for topic, count in (("orders", 6), ("events", 4)):
        counts = preferred_counts(after, topic)
        assert set(counts) == {0, 1}
        assert counts[0] == counts[1] == count // 2
    # only reorders: every replica set is the one before
    for p, q in zip(before.partitions, after.partitions, strict=True):
        assert sorted(p.replicas) == sorted(q.replicas)
    # minimal: exactly the partitions that preferred the lost broker are reordered, and
    # their leaders (elected away by the controller already) are elected as planned
    assert set(plan.moves) == {p.key for p in lost.partitions if p.replicas[0] == 2}
    assert all(p.leader == p.replicas[0] for p in after.partitions)


def test_the_broker_back_in_sync_becomes_preferred_for_its_share_again() -> None:
    lost = cluster({"orders": 6}, live=frozenset({0, 1}))
    plan = balance_leaders(lost, frozenset({0, 1}))
    assert plan is not None
    balanced = apply(lost, plan)
    # broker 2 back: in every ISR again, leading nothing
    back = KafkaState(
        "cid",
        0,
        ALL,
        tuple(
            PartitionState(p.topic, p.partition, p.replicas, tuple(sorted(p.replicas)), p.leader, 2)
            for p in balanced.partitions
        ),
        frozenset(),
    )
    restore = restore_preferred(back)
    assert restore is not None
    restored = apply(back, restore)
    assert preferred_counts(restored) == Counter({0: 2, 1: 2, 2: 2})
    assert Counter(p.leader for p in restored.partitions) == Counter({0: 2, 1: 2, 2: 2})
    assert restore_preferred(restored) is None


def test_restore_waits_until_every_replica_is_back_in_sync() -> None:
    lost = cluster({"orders": 3}, live=frozenset({0, 1}))
    back_not_in_sync = KafkaState("cid", 0, ALL, lost.partitions, frozenset())
    assert restore_preferred(back_not_in_sync) is None
    assert restore_preferred(lost) is None


def test_a_balanced_cluster_needs_nothing() -> None:
    assert balance_leaders(cluster({"orders": 6, "events": 3}), ALL) is None


def test_leaders_not_on_their_preferred_replica_are_elected_back_without_a_reorder() -> None:
    state = cluster({"orders": 3})
    moved = KafkaState(
        "cid",
        0,
        ALL,
        tuple(
            PartitionState(p.topic, p.partition, p.replicas, p.isr, p.replicas[1], 2)
            for p in state.partitions
        ),
        frozenset(),
    )
    plan = balance_leaders(moved, ALL)
    assert plan is not None
    assert plan.moves == {}
    assert plan.elect == {p.key for p in state.partitions}


def test_a_partition_without_a_live_in_sync_replica_is_left_alone() -> None:
    state = KafkaState(
        "cid",
        0,
        frozenset({0, 1}),
        (PartitionState("t", 0, (2, 3), (2,), None, 1),),
        frozenset(),
    )
    assert balance_leaders(state, frozenset({0, 1})) is None


def random_cluster(rng: random.Random) -> KafkaState:
    brokers = rng.randint(2, 6)
    live = frozenset(b for b in range(brokers) if rng.random() > 0.25) or frozenset({0})
    partitions = []
    for topic in range(rng.randint(1, 4)):
        rf = rng.randint(1, brokers)
        for index in range(rng.randint(1, 12)):
            replicas = tuple(rng.sample(range(brokers), rf))
            isr = tuple(b for b in replicas if b in live and rng.random() > 0.1)
            leader = isr[0] if isr else None
            partitions.append(PartitionState(f"t{topic}", index, replicas, isr, leader, 1))
    return KafkaState("cid", 0, live, tuple(partitions), frozenset())


def test_balance_invariants_over_200_random_clusters() -> None:
    rng = random.Random(15)
    for _ in range(200):
        state = random_cluster(rng)
        live = state.live_brokers
        plan = balance_leaders(state, live)
        if plan is None:
            continue
        by_key = {p.key: p for p in state.partitions}
        for key, replicas in plan.moves.items():
            p = by_key[key]
            assert sorted(replicas) == sorted(p.replicas), "a reorder, never a move"
            assert replicas[0] in live and replicas[0] in p.isr
            assert replicas[0] != p.replicas[0]
        after = apply(state, plan)
        # within a topic no live broker can take a partition from one with 2 more
        for topic in {p.topic for p in state.partitions}:
            counts = Counter(
                p.replicas[0]
                for p in after.partitions
                if p.topic == topic and p.replicas[0] in live and p.replicas[0] in p.isr
            )
            for p in after.partitions:
                if p.topic != topic or p.replicas[0] not in live or p.replicas[0] not in p.isr:
                    continue
                for other in p.replicas:
                    if other in live and other in p.isr:
                        assert counts[p.replicas[0]] - counts[other] <= 1
        assert balance_leaders(after, live) is None, "balancing twice changes nothing"


def test_evacuate_moves_a_lost_volumes_replicas_to_the_least_loaded_healthy_brokers() -> None:
    partitions = tuple(
        PartitionState("t", i, replicas, replicas, replicas[0], 2)
        for i, replicas in enumerate([(0, 1, 2), (1, 2, 3), (2, 3, 0), (3, 0, 1)])
    )
    state = KafkaState("cid", 0, frozenset({0, 1, 3, 4}), partitions, frozenset())
    plan = evacuate(state, frozenset({2}), frozenset({0, 1, 3, 4}))
    assert isinstance(plan, Reassignment)
    assert set(plan.moves) == {
        TopicPartition("t", 0),
        TopicPartition("t", 1),
        TopicPartition("t", 2),
    }
    for key, replicas in plan.moves.items():
        old = partitions[key.partition].replicas
        assert 2 not in replicas and len(set(replicas)) == len(replicas) == len(old)
        # the position is kept: only the lost broker's slot changed
        assert [b for b, o in zip(replicas, old, strict=True) if b != o] != []
        assert all(b == o for b, o in zip(replicas, old, strict=True) if o != 2)
    # broker 4 is empty: it takes the lost replicas first, once per partition
    assert Counter(b for r in plan.moves.values() for b in r)[4] == 3
    # t-2 preferred the lost broker: its new preferred replica is elected after the move
    assert plan.elect == {TopicPartition("t", 2)}


def test_evacuate_refuses_when_a_partition_cannot_keep_its_replication_factor() -> None:
    partitions = (
        PartitionState("t", 0, (0, 1, 2), (0, 1), 0, 2),
        PartitionState("u", 0, (0, 2), (0,), 0, 1),
    )
    state = KafkaState("cid", 0, frozenset({0, 1}), partitions, frozenset())
    refusal = evacuate(state, frozenset({2}), frozenset({0, 1}))
    assert isinstance(refusal, Refusal)
    assert refusal.reason == "NotEnoughBrokers"
    assert "t-0" in refusal.message and "u-0" not in refusal.message


def test_evacuate_with_nothing_on_the_lost_broker_is_nothing() -> None:
    assert evacuate(cluster({"t": 3}), frozenset({7}), ALL) is None
