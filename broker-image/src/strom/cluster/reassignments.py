"""Partition reassignment (AlterPartitionReassignments, ListPartitionReassignments).

Kafka's ReplicationControlManager.alterPartitionReassignment, PartitionReassignmentReplicas,
PartitionReassignmentRevert and PartitionChangeBuilder's completion, over the image:

- A reassignment to target replicas T of a partition whose replicas are R makes the
  replicas T followed by R - T (the union: the new ones fetch as followers, the old ones
  still serve), removing R - T and adding T - R (both sorted), in one record.
- It completes when the ISR, less the removing replicas, holds every remaining replica:
  checked whenever the partition changes, which for a reassignment that has to wait is
  the AlterPartition that brings the last adding replica into the ISR. Then the replicas
  are T, the removing ones leave the ISR, adding and removing are cleared, and a leader
  that was removed hands over to the first target replica in the ISR.
- Cancelling (null target replicas) restores the original replicas (the union less the
  adding ones) and takes the adding ones out of the ISR; when that leaves the ISR empty,
  only an unclean election could revert it (refused unless the topic allows one).

`build` is Kafka's PartitionChangeBuilder for these targets: the leader stays while it is
an active in-sync replica, and the leader epoch goes up when a replica leaves the set.
Pure functions of the image, returning PartitionChangeRecords for the controller to commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import leader_election, records

NO_LEADER = leader_election.NO_LEADER
_UNCHANGED = leader_election.UNCHANGED

# per topic, per partition: the target replicas, or None to cancel
Wanted = Mapping[str, Mapping[int, Sequence[int] | None]]
Unclean = leader_election.Unclean


@dataclass(frozen=True, slots=True)
class Outcome:
    error: ErrorCode = ErrorCode.none
    message: str | None = None


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.outcome = Outcome(error, message)


def plan(
    image: images.MetadataImage,
    wanted: Wanted,
    unclean: Unclean,
    *,
    allow_replication_factor_change: bool = True,
) -> tuple[dict[str, dict[int, Outcome]], list[records.PartitionChangeRecord]]:
    """Each partition's outcome and the records to commit (all together, as Kafka's
    controller commits one request's records atomically)."""
    outcomes: dict[str, dict[int, Outcome]] = {}
    entries: list[records.PartitionChangeRecord] = []
    pending: dict[tuple[str, int], images.PartitionImage] = {}
    for name, targets in wanted.items():
        results = outcomes.setdefault(name, {})
        for index, target in targets.items():
            topic = image.topics.get(name)
            try:
                if topic is None:
                    raise _Refused(
                        ErrorCode.unknown_topic_or_partition,
                        f"Unable to find a topic named {name}.",
                    )
                partition = pending.get((name, index)) or topic.partitions.get(index)
                if partition is None:
                    raise _Refused(
                        ErrorCode.unknown_topic_or_partition,
                        f"Unable to find partition {name}:{index}.",
                    )
                if target is None:
                    change = cancel(image, topic, partition, unclean(topic))
                else:
                    if not allow_replication_factor_change:
                        _check_same_factor(partition, target)
                    change = reassign(image, topic, partition, target)
            except _Refused as refusal:
                results[index] = refusal.outcome
                continue
            if change is not None:
                entries.append(change)
                pending[(name, index)] = deltas.merge_partition_change(partition, change)
            results[index] = Outcome()
    return outcomes, entries


def reassign(
    image: images.MetadataImage,
    topic: images.TopicImage,
    partition: images.PartitionImage,
    target: Sequence[int],
) -> records.PartitionChangeRecord | None:
    """The change that starts (or, when the ISR allows, at once completes) moving
    ``partition`` to ``target``. A reassignment of a partition being reassigned starts
    from its current replica set, the union (as Kafka's)."""
    _check_target(image, target)
    current = partition.replicas
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    replicas = (*target, *removing)
    return build(image, topic, partition, replicas, partition.isr, adding, removing)


def cancel(
    image: images.MetadataImage,
    topic: images.TopicImage,
    partition: images.PartitionImage,
    unclean_allowed: bool,
) -> records.PartitionChangeRecord | None:
    """The change that reverts the running reassignment of ``partition``."""
    if not partition.is_reassigning:
        raise _Refused(
            ErrorCode.no_reassignment_in_progress,
            "No partition reassignment is in progress for this topic or partition.",
        )
    replicas = partition.original_replicas
    isr = tuple(r for r in partition.isr if r not in partition.adding_replicas)
    unclean = False
    if not isr:
        # Only replicas being added are in sync: reverting means an unclean election.
        if not unclean_allowed:
            raise _Refused(
                ErrorCode.invalid_replica_assignment,
                f"Unable to revert partition assignment for {topic.name}:{partition.index} "
                "because it would require an unclean leader election.",
            )
        isr, unclean = replicas[:1], True
    return build(image, topic, partition, replicas, isr, (), (), unclean=unclean)


def build(
    image: images.MetadataImage,
    topic: images.TopicImage,
    partition: images.PartitionImage,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    adding: tuple[int, ...],
    removing: tuple[int, ...],
    *,
    unclean: bool = False,
) -> records.PartitionChangeRecord | None:
    """The record taking ``partition`` to these targets (None: nothing changes), after
    completing the reassignment if the ISR allows and electing a leader if the current
    one cannot stay (Kafka's PartitionChangeBuilder.build, online or unclean election)."""
    completed = _completed(replicas, isr, adding, removing)
    if completed is not None:
        replicas, isr = completed
        adding = removing = ()

    def valid(node_id: int) -> bool:
        return node_id in isr and image.is_active_broker(node_id)

    if valid(partition.leader):
        leader = partition.leader
    else:
        leader = next((r for r in replicas if valid(r)), NO_LEADER)
        if leader == NO_LEADER and unclean:
            leader = next((r for r in replicas if image.is_active_broker(r)), NO_LEADER)
            if leader != NO_LEADER:
                isr = (leader,)
    record_leader = _UNCHANGED if leader == partition.leader else leader
    if record_leader == _UNCHANGED and not set(partition.replicas) <= set(replicas):
        # a replica leaves: the leader epoch goes up, so it stops being fetched from
        record_leader = partition.leader
    change = records.PartitionChangeRecord(
        partition_id=i32(partition.index),
        topic_id=topic.topic_id,
        isr=_ints(isr) if isr != partition.isr else None,
        leader=i32(record_leader),
        replicas=_ints(replicas) if replicas != partition.replicas else None,
        removing_replicas=_ints(removing) if removing != partition.removing_replicas else None,
        adding_replicas=_ints(adding) if adding != partition.adding_replicas else None,
    )
    if change == records.PartitionChangeRecord(
        partition_id=change.partition_id, topic_id=change.topic_id
    ):
        return None
    return change


def _completed(
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    adding: tuple[int, ...],
    removing: tuple[int, ...],
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The replicas and ISR once the reassignment completes, if this ISR completes it
    (PartitionReassignmentReplicas.maybeCompleteReassignment)."""
    if not adding and not removing:
        return None
    new_isr = tuple(r for r in isr if r not in removing)
    new_replicas = tuple(r for r in replicas if r not in removing)
    if not new_isr or not new_replicas or not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


def _check_target(image: images.MetadataImage, target: Sequence[int]) -> None:
    """ReplicationControlManager.validateManualPartitionAssignment."""
    if not target:
        raise _Refused(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    seen: set[int] = set()
    for broker_id in sorted(target):
        if broker_id not in image.brokers:
            raise _Refused(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.",
            )
        if broker_id in seen:
            raise _Refused(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        seen.add(broker_id)


def _check_same_factor(partition: images.PartitionImage, target: Sequence[int]) -> None:
    """AlterPartitionReassignments v1's allow_replication_factor_change false (KIP-860):
    the target keeps the partition's replication factor (the original one while a
    reassignment runs)."""
    factor = len(partition.original_replicas)
    if factor != len(target):
        raise _Refused(
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from {factor} to {len(target)}",
        )


def ongoing(
    image: images.MetadataImage, wanted: Mapping[str, Sequence[int]] | None
) -> dict[str, list[images.PartitionImage]]:
    """ListPartitionReassignments: the partitions being reassigned, per topic (``wanted``
    None: all of them); unknown topics and partitions, and those not being reassigned,
    are left out, as Kafka's controller does."""
    if wanted is None:
        wanted = {name: sorted(topic.partitions) for name, topic in image.topics.items()}
    found: dict[str, list[images.PartitionImage]] = {}
    for name, indexes in wanted.items():
        topic = image.topics.get(name)
        if topic is None:
            continue
        partitions = [topic.partitions.get(index) for index in indexes]
        reassigning = [p for p in partitions if p is not None and p.is_reassigning]
        if reassigning:
            found[name] = reassigning
    return found


def _ints(values: Sequence[int]) -> tuple[i32, ...]:
    return tuple(i32(v) for v in values)
