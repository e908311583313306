"""Scale-down drains, scale-up spreads, and the throttles a reassignment runs under."""

from __future__ import annotations

import random
from collections import Counter

from strom_operator.reconcile.model import (
    KafkaState,
    PartitionState,
    Reassignment,
    Refusal,
    TopicPartition,
)
from strom_operator.reconcile.scaling import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    clear_throttles,
    drain,
    spread,
    throttle_configs,
)


def state_of(layout: dict[str, list[tuple[int, ...]]], live: frozenset[int]) -> KafkaState:
    partitions = tuple(
        PartitionState(topic, i, replicas, replicas, replicas[0], 1)
        for topic, lists in sorted(layout.items())
        for i, replicas in enumerate(lists)
    )
    return KafkaState("cid", 0, live, partitions, frozenset())


def apply(state: KafkaState, plan: Reassignment) -> KafkaState:
    partitions = tuple(
        PartitionState(
            p.topic,
            p.partition,
            plan.moves.get(p.key, p.replicas),
            plan.moves.get(p.key, p.replicas),
            plan.moves.get(p.key, p.replicas)[0],
            p.min_isr,
        )
        for p in state.partitions
    )
    return KafkaState(state.cluster_id, 0, state.live_brokers, partitions, frozenset())


def loads(state: KafkaState, brokers: frozenset[int]) -> Counter[int]:
    counts = Counter({b: 0 for b in brokers})
    counts.update(b for p in state.partitions for b in p.replicas)
    return counts


FOUR = frozenset({0, 1, 2, 3})
THREE = frozenset({0, 1, 2})


def four_broker_cluster() -> KafkaState:
    lists = [tuple((p + i) % 4 for i in range(2)) for p in range(8)]
    return state_of({"orders": lists, "logs": [(3, 0, 1), (1, 2, 3)]}, FOUR)


def test_drain_moves_every_replica_off_the_leaving_broker() -> None:
    state = four_broker_cluster()
    plan = drain(state, frozenset({3}), THREE)
    assert isinstance(plan, Reassignment)
    after = apply(state, plan)
    assert loads(after, FOUR)[3] == 0
    for p, before in zip(after.partitions, state.partitions, strict=True):
        assert len(set(p.replicas)) == len(p.replicas) == len(before.replicas)
        # only the leaving broker's slots change, so the preferred order stays
        assert all(a == b for a, b in zip(p.replicas, before.replicas, strict=True) if b != 3)
    counts = loads(after, THREE)
    assert max(counts.values()) - min(counts.values()) <= 1
    # partitions that preferred broker 3 get a new preferred leader, elected after
    assert plan.elect == {p.key for p in state.partitions if p.replicas[0] == 3}
    assert drain(after, frozenset({3}), THREE) is None


def test_drain_refuses_when_a_topic_has_more_replicas_than_brokers_would_remain() -> None:
    state = state_of({"wide": [(0, 1, 2)], "narrow": [(0, 2)], "other": [(0, 1, 2)]}, THREE)
    refusal = drain(state, frozenset({2}), frozenset({0, 1}))
    assert isinstance(refusal, Refusal)
    assert refusal.reason == "ScaleDownRefused"
    assert "wide (replication factor 3)" in refusal.message
    assert "other (replication factor 3)" in refusal.message
    assert "narrow" not in refusal.message
    assert "lower" in refusal.message and "keep 3 brokers" in refusal.message


def test_drain_of_empty_brokers_is_nothing() -> None:
    state = state_of({"t": [(0, 1), (1, 2)]}, FOUR)
    assert drain(state, frozenset({3}), THREE) is None


def test_spread_fills_a_new_broker_gradually_followers_first() -> None:
    state = state_of({"t": [(0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 2, 1)]}, FOUR)
    plan = spread(state, FOUR, max_moves=2)
    assert isinstance(plan, Reassignment) and len(plan.moves) == 2
    for key, replicas in plan.moves.items():
        assert 3 in replicas and len(set(replicas)) == 3
        # followers move first: the preferred leader stays
        assert replicas[0] == state.partitions[key.partition].replicas[0]
    assert plan.elect == frozenset()
    after = apply(state, plan)
    steps = 1
    while (next_plan := spread(after, FOUR, max_moves=2)) is not None:
        assert len(next_plan.moves) <= 2
        after = apply(after, next_plan)
        steps += 1
    counts = loads(after, FOUR)
    assert max(counts.values()) - min(counts.values()) <= 1
    assert counts[3] == 3 and steps == 2


def test_spread_gives_every_topic_its_share_of_a_new_broker() -> None:
    """A scale-up from 3 to 4 with __consumer_offsets' 50 partitions beside two small
    topics: the new broker gets replicas of each topic, not only of the big one."""
    rotations = [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
    layout = {
        "__consumer_offsets": [rotations[i % 3] for i in range(50)],
        "events": [rotations[i % 3] for i in range(3)],
        "orders": [rotations[i % 3] for i in range(6)],
    }
    state = state_of(layout, FOUR)
    while (plan := spread(state, FOUR, max_moves=10)) is not None:
        state = apply(state, plan)
    counts = loads(state, FOUR)
    assert max(counts.values()) - min(counts.values()) <= 1
    for topic, partitions in layout.items():
        on_new = sum(1 for p in state.partitions if p.topic == topic and 3 in p.replicas)
        fair = len(partitions) * 3 / 4
        assert abs(on_new - fair) <= 1, (topic, on_new, fair)


def test_spread_of_a_balanced_cluster_is_nothing() -> None:
    state = state_of({"t": [(0, 1), (1, 2), (2, 0)]}, THREE)
    assert spread(state, THREE, max_moves=10) is None


def test_drain_and_spread_invariants_over_200_random_clusters() -> None:
    rng = random.Random(15)
    for _ in range(200):
        size = rng.randint(2, 7)
        brokers = frozenset(range(size))
        layout = {
            f"t{t}": [tuple(rng.sample(range(size), rf)) for _ in range(rng.randint(1, 10))]
            for t in range(rng.randint(1, 3))
            for rf in [rng.randint(1, size)]
        }
        state = state_of(layout, brokers)
        leaving = frozenset(rng.sample(sorted(brokers), rng.randint(1, size - 1)))
        remaining = brokers - leaving
        plan = drain(state, leaving, remaining)
        max_rf = (
            max(len(p.replicas) for p in state.partitions if leaving & set(p.replicas))
            if any(leaving & set(p.replicas) for p in state.partitions)
            else 0
        )
        if max_rf > len(remaining):
            assert isinstance(plan, Refusal)
            continue
        if plan is None:
            assert loads(state, brokers)[min(leaving)] == 0
            continue
        assert isinstance(plan, Reassignment)
        drained = apply(state, plan)
        for p in drained.partitions:
            assert not leaving & set(p.replicas)
            assert len(set(p.replicas)) == len(p.replicas)
        balanced = state
        for _step in range(100):
            step = spread(balanced, brokers, max_moves=3)
            if step is None:
                break
            assert len(step.moves) <= 3
            balanced = apply(balanced, step)
        counts = loads(balanced, brokers)
        assert max(counts.values()) - min(counts.values()) <= 1
        for before, after in zip(state.partitions, balanced.partitions, strict=True):
            assert len(set(after.replicas)) == len(after.replicas) == len(before.replicas)


def test_throttles_name_the_current_replicas_as_leaders_and_the_added_as_followers() -> None:
    state = state_of({"t": [(0, 1), (1, 2), (2, 0)], "u": [(0, 1)]}, FOUR)
    plan = Reassignment(
        {
            TopicPartition("t", 0): (3, 1),
            TopicPartition("t", 2): (0, 2),  # a pure reorder: nothing to copy
        },
        frozenset(),
        "test",
    )
    throttles = throttle_configs(plan, state, 1_000_000)
    assert throttles.topics == {"t": {LEADER_REPLICAS: "0:0,0:1", FOLLOWER_REPLICAS: "0:3"}}
    assert set(throttles.brokers) == {0, 1, 3}
    assert throttles.brokers[3] == {LEADER_RATE: "1000000", FOLLOWER_RATE: "1000000"}
    cleared = clear_throttles(throttles)
    assert cleared.topics == {"t": (FOLLOWER_REPLICAS, LEADER_REPLICAS)}
    assert cleared.brokers == {b: (FOLLOWER_RATE, LEADER_RATE) for b in (0, 1, 3)}


def test_throttle_values_are_accepted_by_the_brokers_config_checks() -> None:
    from strom.config import definitions

    state = state_of({"t": [(0, 1), (1, 2)]}, FOUR)
    plan = drain(state, frozenset({2}), frozenset({0, 1, 3}))
    assert isinstance(plan, Reassignment)
    throttles = throttle_configs(plan, state, 10_485_760)
    for configs in throttles.topics.values():
        for name, value in configs.items():
            definitions.TOPIC_CONFIGS[name].parse(value)
    for configs in throttles.brokers.values():
        for name, value in configs.items():
            definitions.BROKER_CONFIGS[name].parse(value)
