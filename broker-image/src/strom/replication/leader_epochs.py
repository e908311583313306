"""Where a leader epoch ended in a partition's log: the answer of OffsetForLeaderEpoch.

Kafka's Partition.lastOffsetForLeaderEpoch with fetchOnlyFromLeader, which Kafka uses
for consumers and followers alike: the fencing of the caller's current leader epoch
first, then leadership, then the log's leader-epoch cache. (A function beside Partition
rather than a method of it for now; it reads only the partition's public state.)
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.replication import outcomes
from strom.replication import partition as partitions
from strom.storage import leader_epochs


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    error: outcomes.ReadError | None = None
    leader_epoch: int = leader_epochs.UNDEFINED_EPOCH
    end_offset: int = leader_epochs.UNDEFINED_EPOCH_OFFSET


def last_offset_for_leader_epoch(
    partition: partitions.Partition, current_leader_epoch: int, leader_epoch: int
) -> EpochEndOffset:
    """The end offset of `leader_epoch` (where the next epoch starts, or the log end
    offset for the latest) with the largest epoch <= it that the log knows; (-1, -1)
    without an error when no such epoch is known (newer than any, or an empty cache)."""
    fenced = partition.epoch_error(current_leader_epoch)
    if fenced is not None:
        return EpochEndOffset(fenced)
    if not partition.is_leader:
        return EpochEndOffset(outcomes.ReadError.NOT_LEADER)
    # An empty log answers as Kafka's, whose new leader marks its epoch at once: (-1, -1)
    # would make consumers that validate their position (KIP-320) see a truncation.
    epoch, end_offset = partition.epoch_end_offset(leader_epoch)
    if end_offset == leader_epochs.UNDEFINED_EPOCH_OFFSET:
        return EpochEndOffset()
    return EpochEndOffset(None, epoch, end_offset)
