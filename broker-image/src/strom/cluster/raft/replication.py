"""Log replication rules, Kafka's, as functions of the log: what a leader answers to a
Fetch (valid, diverging, or "take a snapshot"), where a follower truncates on a
diverging epoch, and the chunks of a FetchSnapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strom.cluster.raft import log as raft_log
from strom.cluster.raft import messages


@dataclass(frozen=True, slots=True)
class Valid:
    pass


@dataclass(frozen=True, slots=True)
class Diverging:
    epoch_end: messages.EpochEndOffset


@dataclass(frozen=True, slots=True)
class NeedsSnapshot:
    snapshot_id: raft_log.SnapshotId


Validation = Valid | Diverging | NeedsSnapshot


def validate_fetch(log: raft_log.ReplicatedLog, offset: int, epoch: int) -> Validation:
    """Kafka's ReplicatedLog.validateOffsetAndEpoch: does the follower's log, which ends at
    ``offset`` with an entry of ``epoch``, agree with this (the leader's) log?"""
    if log.log_start_offset == 0 and offset == 0:
        return Valid()
    snapshot = log.latest_snapshot_id()
    if snapshot is not None and (
        offset < log.log_start_offset
        or (offset == log.log_start_offset and epoch != snapshot.epoch)
        or epoch < snapshot.epoch
    ):
        return NeedsSnapshot(snapshot)
    end = log.end_offset_for_epoch(epoch)
    if end.epoch != epoch or end.offset < offset:
        return Diverging(messages.EpochEndOffset(end.epoch, end.offset))
    return Valid()


def truncation_offset(log: raft_log.ReplicatedLog, diverging: messages.EpochEndOffset) -> int:
    """Kafka's truncateToEndOffset: where a follower's log stops agreeing with the leader's,
    given that the leader's ``diverging.epoch`` ends at ``diverging.end_offset``."""
    if diverging.epoch == 0:
        offset = min(diverging.end_offset, log.end_offset)
    else:
        local = log.end_offset_for_epoch(diverging.epoch)
        if local.epoch == diverging.epoch:
            offset = min(local.offset, diverging.end_offset)
        else:
            offset = local.offset
    return max(offset, log.log_start_offset)


def records_for(
    log: raft_log.ReplicatedLog, offset: int, max_bytes: int
) -> tuple[raft_log.Entry, ...]:
    if offset >= log.end_offset:
        return ()
    return tuple(log.read(offset, max_bytes))


def snapshot_chunk(
    log: raft_log.ReplicatedLog,
    request: messages.FetchSnapshotRequest,
    leader_id: int,
    epoch: int,
    chunk_bytes: int,
) -> messages.FetchSnapshotResponse:
    snapshot_id = request.snapshot_id
    try:
        size = log.snapshot_size(snapshot_id)
    except KeyError:
        return messages.FetchSnapshotResponse(ErrorCode.snapshot_not_found, leader_id, epoch)
    if not 0 <= request.position <= size:
        return messages.FetchSnapshotResponse(ErrorCode.position_out_of_range, leader_id, epoch)
    data = log.read_snapshot(snapshot_id, request.position, min(request.max_bytes, chunk_bytes))
    return messages.FetchSnapshotResponse(
        ErrorCode.none,
        leader_id,
        epoch,
        snapshot_id=snapshot_id,
        size=size,
        position=request.position,
        unaligned_records=data,
    )
