"""Kafka's quorum RPCs as plain data, one frozen dataclass per request and response.

Each mirrors the fields of the single partition (``__cluster_metadata-0``) of Kafka's
Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot messages, so a driver maps
them 1:1 to kio's message classes (cluster id, topic and partition fields are the
driver's, as are correlation ids). Error codes are kio's. ``-1`` means "unknown" where
Kafka uses it (a leader id, a high watermark). An `Envelope` says who sent a message to
whom: the driver knows that from the connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from strom.cluster.raft import log as raft_log

UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class VoteRequest:
    candidate_epoch: int  # replicaEpoch: a candidate's new epoch; a prospective's own epoch
    candidate_id: int  # replicaId
    voter_id: int
    last_offset_epoch: int
    last_offset: int  # the candidate's log end offset
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: ErrorCode
    leader_id: int
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    voter_id: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]  # the voters, most up-to-date first


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    max_bytes: int
    max_wait_ms: int
    # KIP-1166: the high watermark the follower knows; a leader that has a higher one
    # answers at once instead of holding the Fetch (UNKNOWN: hold it)
    high_watermark: int = UNKNOWN


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """FetchResponse's DivergingEpoch: the leader's log ends ``epoch`` at ``end_offset``."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error: ErrorCode
    leader_id: int
    leader_epoch: int
    high_watermark: int = UNKNOWN
    log_start_offset: int = 0
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: raft_log.SnapshotId | None = None
    records: tuple[raft_log.Entry, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    replica_id: int
    current_leader_epoch: int
    snapshot_id: raft_log.SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error: ErrorCode
    leader_id: int
    leader_epoch: int
    snapshot_id: raft_log.SnapshotId | None = None
    size: int = 0
    position: int = 0
    unaligned_records: bytes = b""


Request = (
    VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest
) | FetchSnapshotRequest
Response = (
    VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse
) | FetchSnapshotResponse
Message = Request | Response
REQUESTS = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
)


@dataclass(frozen=True, slots=True)
class Envelope:
    """A message with its sender and receiver and Kafka's correlation id: a response
    carries its request's, and a node ignores a response to a request it no longer
    awaits (a duplicate, or one sent in an earlier state), as Kafka's RequestManager does."""

    source: int
    destination: int
    message: Message
    correlation_id: int = 0
