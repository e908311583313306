"""Scaling plans: drain the brokers a scale-down removes, spread replicas onto the brokers
a scale-up adds (gradually), and the replication throttles a plan runs under.

Strom supports all four of Kafka's throttle configs (strom.replication.quotas): the
dynamic broker configs `leader.replication.throttled.rate` and
`follower.replication.throttled.rate`, and the topic configs
`leader.replication.throttled.replicas` and `follower.replication.throttled.replicas`
(`partition:broker` entries); `throttle_configs` gives the values
`kafka-reassign-partitions.sh --throttle` would set.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import NamedTuple

from strom_operator.reconcile.model import (
    KafkaState,
    PartitionState,
    Reassignment,
    Refusal,
    TopicPartition,
)
from strom_operator.reconcile.placement import replace_replicas, replica_counts, sorted_partitions

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


def drain(
    state: KafkaState, leaving: frozenset[int], remaining: frozenset[int]
) -> Reassignment | Refusal | None:
    """Move every replica off the `leaving` brokers onto `remaining` ones (the fewest
    replicas first, never two replicas of a partition on one broker, each replica in its
    position). Refusal("ScaleDownRefused") naming the topics whose replication factor
    is above the brokers that would remain; None when the leaving brokers hold nothing
    (the StatefulSet may shrink)."""
    too_wide: dict[str, int] = {}
    for partition in state.partitions:
        if leaving.intersection(partition.replicas) and len(partition.replicas) > len(remaining):
            too_wide[partition.topic] = max(
                too_wide.get(partition.topic, 0), len(partition.replicas)
            )
    if too_wide:
        topics = ", ".join(
            f"{topic} (replication factor {rf})" for topic, rf in sorted(too_wide.items())
        )
        return Refusal(
            "ScaleDownRefused",
            f"cannot remove brokers {sorted(leaving)}: {len(remaining)} broker(s) would "
            f"remain, fewer than the replicas of {topics}; lower those topics' "
            f"replication factor or keep {max(too_wide.values())} brokers",
        )
    replacement = replace_replicas(state, leaving, remaining - leaving)
    if replacement.unplaceable:
        # a replica on a broker that is neither leaving nor remaining (one already gone)
        # can take the room a leaving replica needs
        names = ", ".join(f"{k.topic}-{k.partition}" for k in replacement.unplaceable)
        return Refusal(
            "ScaleDownRefused",
            f"cannot move {names} off brokers {sorted(leaving)}: no remaining broker "
            f"without a replica of them",
        )
    if not replacement.moves:
        return None
    return Reassignment(
        replacement.moves,
        replacement.new_preferred,
        f"draining brokers {sorted(leaving)} before the scale-down",
    )


def _movable(partition: PartitionState, source: int) -> tuple[bool, bool, TopicPartition]:
    """Sort key: followers first, then preferred-but-not-leading, leaders last (moving a
    leader's replica moves its leadership too)."""
    return (partition.leader == source, partition.replicas[0] == source, partition.key)


def spread(state: KafkaState, brokers: frozenset[int], max_moves: int) -> Reassignment | None:
    """Move replicas from the most loaded of `brokers` to the least loaded ones (new, empty
    brokers after a scale-up) until their replica counts differ by at most 1: at most
    `max_moves` partitions per plan (apply it, wait for it, ask again), one replica per
    partition per plan, followers before leaders. Each topic gets its share of a new
    broker (a move that evens out its own topic first, the topic least present on the
    target first), not only `__consumer_offsets`' many partitions. None when balanced."""
    counts = replica_counts(state, brokers)
    current = {p.key: p for p in sorted_partitions(state) if p.key not in state.reassigning}
    per_topic: dict[str, dict[int, int]] = defaultdict(lambda: dict.fromkeys(brokers, 0))
    for partition in current.values():
        for broker in partition.replicas:
            if broker in brokers:
                per_topic[partition.topic][broker] += 1
    moves: dict[TopicPartition, tuple[int, ...]] = {}
    while len(moves) < max_moves:
        move = _best_move(current, moves, counts, per_topic)
        if move is None:
            break
        key, source, target = move
        replicas = moves.get(key, current[key].replicas)
        moves[key] = tuple(target if b == source else b for b in replicas)
        for tally in (counts, per_topic[key.topic]):
            tally[source] -= 1
            tally[target] += 1
    if not moves:
        return None
    new_preferred = frozenset(k for k, r in moves.items() if r[0] != current[k].replicas[0])
    return Reassignment(moves, new_preferred, f"spreading replicas over brokers {sorted(brokers)}")


def _best_move(
    current: Mapping[TopicPartition, PartitionState],
    planned: Mapping[TopicPartition, tuple[int, ...]],
    counts: Mapping[int, int],
    per_topic: Mapping[str, Mapping[int, int]],
) -> tuple[TopicPartition, int, int] | None:
    """The first (partition, source, target) that narrows the gap: sources from the most
    loaded, targets from the least loaded, counts apart by 2 or more. Among a pair's
    candidates: moves that also even out their own topic first, then the topic with the
    smallest share on the target, then followers before leaders."""
    sources = sorted(counts, key=lambda b: (-counts[b], b))
    targets = sorted(counts, key=lambda b: (counts[b], b))
    for source in sources:
        for target in targets:
            if counts[source] - counts[target] < 2:
                break
            candidates = [
                p
                for key, p in current.items()
                if key not in planned and source in p.replicas and target not in p.replicas
            ]
            if candidates:
                best = min(
                    candidates,
                    key=lambda p: (_preference(p, source, target, per_topic[p.topic]), p.key),
                )
                return best.key, source, target
    return None


def _preference(
    partition: PartitionState, source: int, target: int, topic_counts: Mapping[int, int]
) -> tuple[bool, float, bool, bool]:
    """Sort key of a candidate move: one that evens out its own topic first, then the
    topic with the smallest share on the target, then followers before leaders."""
    evens_out = topic_counts[source] - topic_counts[target] >= 2
    share = topic_counts[target] / max(1, sum(topic_counts.values()))
    is_leader, is_preferred, _ = _movable(partition, source)
    return (not evens_out, share, is_leader, is_preferred)


class ThrottleConfigs(NamedTuple):
    """Config values to set (AlterConfigs), per broker id and per topic."""

    brokers: Mapping[int, Mapping[str, str]]
    topics: Mapping[str, Mapping[str, str]]


class ThrottleDeletes(NamedTuple):
    """Config names to delete (AlterConfigs' delete list), per broker id and per topic."""

    brokers: Mapping[int, tuple[str, ...]]
    topics: Mapping[str, tuple[str, ...]]


def throttle_configs(plan: Reassignment, state: KafkaState, rate_bytes: int) -> ThrottleConfigs:
    """What `kafka-reassign-partitions.sh --throttle rate_bytes` sets for this plan: on
    every broker of a moving partition (old or new replica) both rates; per topic, the
    leader side on the partition's current replicas (any may lead the copy) and the
    follower side on the replicas being added. A pure reorder adds no replica and is not
    throttled (Kafka's tool still lists its replicas on the leader side, which holds
    nothing back since no follower copies)."""
    by_key = {p.key: p for p in state.partitions}
    leader: dict[str, set[tuple[int, int]]] = defaultdict(set)
    follower: dict[str, set[tuple[int, int]]] = defaultdict(set)
    brokers: set[int] = set()
    for key, target in sorted(plan.moves.items()):
        partition = by_key.get(key)
        if partition is None:
            continue
        added = set(target) - set(partition.replicas)
        if not added:
            continue
        leader[key.topic].update((key.partition, b) for b in partition.replicas)
        follower[key.topic].update((key.partition, b) for b in added)
        brokers.update(partition.replicas)
        brokers.update(added)
    rate = str(rate_bytes)
    topics: dict[str, dict[str, str]] = {}
    for topic in sorted(leader):
        topics[topic] = {
            LEADER_REPLICAS: ",".join(f"{p}:{b}" for p, b in sorted(leader[topic])),
            FOLLOWER_REPLICAS: ",".join(f"{p}:{b}" for p, b in sorted(follower[topic])),
        }
    return ThrottleConfigs(
        {b: {LEADER_RATE: rate, FOLLOWER_RATE: rate} for b in sorted(brokers)}, topics
    )


def clear_throttles(applied: ThrottleConfigs) -> ThrottleDeletes:
    """The configs to delete once the plan's reassignments are done (Kafka's `--verify`
    removes the same)."""
    return ThrottleDeletes(
        {b: tuple(sorted(names)) for b, names in applied.brokers.items()},
        {t: tuple(sorted(names)) for t, names in applied.topics.items()},
    )
