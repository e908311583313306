"""AlterPartition: a partition leader asks the controller to change its ISR.

Kafka's ReplicationControlManager.alterPartition and validateAlterPartitionData, checked
in Kafka's order against the controller's image. A leader learns of an epoch newer than
the controller's only from a newer controller, so that answer is NOT_CONTROLLER (ask the
active one again); an older one is FENCED_LEADER_EPOCH; a change built on an older
partition epoch (another change came first) is INVALID_UPDATE_VERSION. Every member of
the new ISR must be a replica, the leader among them, and each member active: registered,
unfenced, not in a controlled shutdown (and of the broker epoch the leader names, where
it names one), else INELIGIBLE_REPLICA.

An accepted change is one PartitionChangeRecord (the partition epoch goes up by one as
the delta applies it; the leader and its epoch stay); an ISR that does not change needs
no record and gets the current state. An ISR that completes a running reassignment
(every adding replica in sync) completes it in the same record (`reassignments.build`):
when that removes the leader asking, its answer is NEW_LEADER_ELECTED.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import reassignments, records

NO_BROKER_EPOCH = -1  # a new ISR member whose broker epoch the leader does not name


@dataclass(frozen=True, slots=True)
class IsrChange:
    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    # per member of new_isr (AlterPartition v3's new_isr_with_epochs); empty: unchecked
    broker_epochs: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class IsrOutcome:
    """``error`` none: committed, and the fields are the partition's new state; otherwise
    the controller's current state where it has one (-1 and () where it has none)."""

    topic_id: uuid.UUID
    partition: int
    error: ErrorCode
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


def refused(change: IsrChange, error: ErrorCode) -> IsrOutcome:
    return IsrOutcome(change.topic_id, change.partition, error)


def plan(
    image: images.MetadataImage, broker_id: int, changes: Sequence[IsrChange]
) -> tuple[list[records.PartitionChangeRecord], list[IsrOutcome]]:
    """The records to commit and each change's outcome once they are committed (the
    broker epoch is checked by the caller). A partition named twice is judged against
    the state the first change leaves, as Kafka's controller replays each record."""
    entries: list[records.PartitionChangeRecord] = []
    outcomes: list[IsrOutcome] = []
    pending: dict[tuple[uuid.UUID, int], images.PartitionImage] = {}
    for change in changes:
        topic = image.topic_by_id(change.topic_id)
        if topic is None:
            outcomes.append(refused(change, ErrorCode.unknown_topic_id))
            continue
        partition = pending.get((change.topic_id, change.partition))
        partition = partition or topic.partitions.get(change.partition)
        if partition is None:
            outcomes.append(refused(change, ErrorCode.unknown_topic_or_partition))
            continue
        error = _validate(image, broker_id, partition, change)
        if error != ErrorCode.none:
            outcomes.append(_outcome(change, error, partition))
            continue
        entry = reassignments.build(
            image,
            topic,
            partition,
            partition.replicas,
            change.new_isr,
            partition.adding_replicas,
            partition.removing_replicas,
        )
        if entry is not None:
            entries.append(entry)
            partition = deltas.merge_partition_change(partition, entry)
            pending[(change.topic_id, change.partition)] = partition
            if partition.leader != broker_id:
                # This ISR completed a reassignment that removed the leader asking: it
                # learns of its successor from the metadata (Kafka answers the same).
                outcomes.append(_outcome(change, ErrorCode.new_leader_elected, partition))
                continue
        outcomes.append(_outcome(change, ErrorCode.none, partition))
    return entries, outcomes


def _validate(
    image: images.MetadataImage,
    broker_id: int,
    partition: images.PartitionImage,
    change: IsrChange,
) -> ErrorCode:
    if (
        change.leader_epoch > partition.leader_epoch
        or change.partition_epoch > partition.partition_epoch
    ):
        return ErrorCode.not_controller
    if change.leader_epoch < partition.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if broker_id != partition.leader:
        return ErrorCode.invalid_request
    if change.partition_epoch < partition.partition_epoch:
        return ErrorCode.invalid_update_version
    if (
        not change.new_isr
        or len(set(change.new_isr)) != len(change.new_isr)
        or not set(change.new_isr) <= set(partition.replicas)
        or partition.leader not in change.new_isr
    ):
        return ErrorCode.invalid_request
    epochs = change.broker_epochs or (NO_BROKER_EPOCH,) * len(change.new_isr)
    for member, epoch in zip(change.new_isr, epochs, strict=False):
        broker = image.brokers.get(member)
        if broker is None or not broker.is_active:
            return ErrorCode.ineligible_replica
        if epoch != NO_BROKER_EPOCH and epoch != broker.epoch:
            return ErrorCode.ineligible_replica
    return ErrorCode.none


def _outcome(change: IsrChange, error: ErrorCode, partition: images.PartitionImage) -> IsrOutcome:
    return IsrOutcome(
        change.topic_id,
        change.partition,
        error,
        partition.leader,
        partition.leader_epoch,
        partition.isr,
        partition.partition_epoch,
    )
