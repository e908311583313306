"""Leadership and placement after a broker is lost: preferred leaders spread evenly over
the live brokers, restored when every broker is back, and a lost volume's replicas
moved to healthy brokers.

A "preferred leader" is a partition's first replica. Balancing only reorders a
partition's replica list (no data moves: AlterPartitionReassignments with the same
set in a new order completes at once), then a preferred-leader election moves the
leadership.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from strom_operator.reconcile.model import (
    KafkaState,
    PartitionState,
    Reassignment,
    Refusal,
    TopicPartition,
)
from strom_operator.reconcile.placement import partition_name, replace_replicas, sorted_partitions


def _eligible(partition: PartitionState, live: frozenset[int]) -> list[int]:
    """The replicas that can lead now: live and in sync, in the partition's order."""
    return [b for b in partition.replicas if b in live and b in partition.isr]


def _choose_preferred(
    partitions: list[PartitionState], live: frozenset[int]
) -> dict[TopicPartition, int]:
    """A preferred leader for each partition that has an eligible replica, spread so that
    within each topic, then over all topics, the live brokers' counts differ as little as
    the replica sets allow. Starts from the current first replica where it is eligible
    (minimal change) and moves one partition at a time while that evens the counts out:
    first a move that narrows a topic's spread (counts apart by 2 or more), then one that
    narrows the overall spread without widening the topic's (counts apart by 1 in the
    topic, 2 or more overall)."""
    by_topic: dict[str, list[PartitionState]] = defaultdict(list)
    for partition in partitions:
        by_topic[partition.topic].append(partition)
    chosen: dict[TopicPartition, int] = {}
    overall: Counter[int] = Counter()
    topic_counts: dict[str, Counter[int]] = {}
    for topic, members in sorted(by_topic.items()):
        counts: Counter[int] = Counter()
        topic_counts[topic] = counts
        # the kept first replicas are counted before the others choose among the rest
        orphans = []
        for partition in members:
            eligible = _eligible(partition, live)
            if partition.replicas[0] in eligible:
                chosen[partition.key] = partition.replicas[0]
                counts[partition.replicas[0]] += 1
                overall[partition.replicas[0]] += 1
            elif eligible:
                orphans.append((partition, eligible))
        for partition, eligible in orphans:
            pick = min(eligible, key=lambda b: (counts[b], overall[b], b))
            chosen[partition.key] = pick
            counts[pick] += 1
            overall[pick] += 1

    def improve(topic_gap: int, overall_gap: int) -> bool:
        """One pass over every partition, making each move it finds; True if any."""
        moved = False
        for topic, members in sorted(by_topic.items()):
            counts = topic_counts[topic]
            for partition in members:
                current = chosen.get(partition.key)
                if current is None:
                    continue
                for other in sorted(_eligible(partition, live)):
                    if (
                        counts[current] - counts[other] >= topic_gap
                        and overall[current] - overall[other] >= overall_gap
                    ):
                        chosen[partition.key] = other
                        counts[current] -= 1
                        counts[other] += 1
                        overall[current] -= 1
                        overall[other] += 1
                        moved = True
                        break
        return moved

    # a topic move lowers the topics' sum of squares; an overall move keeps it and lowers
    # the overall one: the pair decreases, so this ends
    while improve(2, -len(partitions)) or improve(1, 2):
        pass
    return chosen


def balance_leaders(state: KafkaState, live: frozenset[int]) -> Reassignment | None:
    """Reorder replica lists so that the live brokers are preferred leaders for about the
    same number of partitions (per topic, then overall), each partition's new first
    replica live and in sync; `elect` names the partitions whose leader should change.
    None when nothing would change."""
    partitions = [p for p in sorted_partitions(state) if p.key not in state.reassigning]
    chosen = _choose_preferred(partitions, live)
    moves: dict[TopicPartition, tuple[int, ...]] = {}
    elect: set[TopicPartition] = set()
    for partition in partitions:
        pick = chosen.get(partition.key)
        if pick is None:
            continue
        if partition.replicas[0] != pick:
            rest = tuple(b for b in partition.replicas if b != pick)
            moves[partition.key] = (pick, *rest)
        if partition.leader != pick:
            elect.add(partition.key)
    if not moves and not elect:
        return None
    gone = sorted(
        {b for p in partitions for b in p.replicas} - live,
    )
    reason = f"preferred leaders spread over brokers {sorted(live)}" + (
        f" (brokers {gone} not live)" if gone else ""
    )
    return Reassignment(moves, frozenset(elect), reason)


def restore_preferred(state: KafkaState) -> Reassignment | None:
    """Once every replica's broker is live and in sync again (and nothing is being
    reassigned): the balanced order over all live brokers, so a returning broker leads
    its share again.

    "Preferred leaders restored" means this balanced order, not the order before the
    loss: the operator keeps no history of replica lists, and the balance is what users
    want (Kafka's own placement gives the same spread). None while some replica is still
    out of sync or a broker is not back, or when the leaders are already balanced."""
    if state.reassigning:
        return None
    for partition in state.partitions:
        for broker in partition.replicas:
            if broker not in state.live_brokers or broker not in partition.isr:
                return None
    return balance_leaders(state, state.live_brokers)


def evacuate(
    state: KafkaState, gone: frozenset[int], healthy: frozenset[int]
) -> Reassignment | Refusal | None:
    """Move every replica on `gone` (brokers whose volumes were deleted for good) to a
    healthy broker that does not already hold the partition, keeping the replica's
    position. Refusal("NotEnoughBrokers") naming the partitions that would lose
    replication factor; None when nothing is on `gone`."""
    replacement = replace_replicas(state, gone, healthy - gone)
    if replacement.unplaceable:
        names = ", ".join(partition_name(key) for key in replacement.unplaceable)
        return Refusal(
            "NotEnoughBrokers",
            f"cannot move the replicas of lost brokers {sorted(gone)} without lowering "
            f"the replication factor of {names}: too few healthy brokers "
            f"{sorted(healthy - gone)}",
        )
    if not replacement.moves:
        return None
    return Reassignment(
        replacement.moves,
        replacement.new_preferred,
        f"replicas of lost brokers {sorted(gone)} moved to healthy brokers",
    )
