"""Replica placement shared by the planners that move data (`balancing.evacuate`,
`scaling.drain`): load per broker, and replacing the replicas on some brokers by the
least loaded others."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable

from strom_operator.reconcile.model import KafkaState, PartitionState, TopicPartition


def partition_name(key: TopicPartition) -> str:
    return f"{key.topic}-{key.partition}"


def replica_counts(state: KafkaState, brokers: Iterable[int]) -> Counter[int]:
    """How many replicas each of `brokers` holds (0 for an empty one)."""
    counts: Counter[int] = Counter({broker: 0 for broker in brokers})
    for partition in state.partitions:
        for broker in partition.replicas:
            if broker in counts:
                counts[broker] += 1
    return counts


def sorted_partitions(state: KafkaState) -> list[PartitionState]:
    return sorted(state.partitions, key=lambda p: p.key)


@dataclasses.dataclass(frozen=True)
class Replacement:
    moves: dict[TopicPartition, tuple[int, ...]]
    # partitions left without a target for some replica (their replica lists unchanged)
    unplaceable: tuple[TopicPartition, ...]
    # partitions whose first (preferred) replica changed: elected once the move is done
    new_preferred: frozenset[TopicPartition]


def replace_replicas(
    state: KafkaState, away: frozenset[int], targets: frozenset[int]
) -> Replacement:
    """Replace every replica on `away` by one on `targets`, in the same position (so the
    preferred order stays), never on a broker that already holds the partition: the
    target with the fewest replicas first, then the fewest leaders, then the lowest id."""
    replicas = replica_counts(state, targets)
    leaders = Counter({broker: state.leaders_of(broker) for broker in targets})
    moves: dict[TopicPartition, tuple[int, ...]] = {}
    unplaceable: list[TopicPartition] = []
    new_preferred: set[TopicPartition] = set()
    for partition in sorted_partitions(state):
        if not away.intersection(partition.replicas):
            continue
        new = list(partition.replicas)
        for position, broker in enumerate(partition.replicas):
            if broker not in away:
                continue
            candidates = sorted((replicas[b], leaders[b], b) for b in targets if b not in new)
            if not candidates:
                break
            target = candidates[0][2]
            new[position] = target
            replicas[target] += 1
            if position == 0:
                leaders[target] += 1
        if away.intersection(new):
            unplaceable.append(partition.key)
            continue
        moves[partition.key] = tuple(new)
        if new[0] != partition.replicas[0]:
            new_preferred.add(partition.key)
    return Replacement(moves, tuple(unplaceable), frozenset(new_preferred))
