"""One small class per election state, as Kafka's QuorumState has them.

Each holds its epoch, what it must persist (`election_state`), its timers (absolute
``now_ms`` deadlines) and its answers to "may I grant a vote / a pre-vote in this
epoch?". Which state may follow which is `quorum.QuorumState`'s business; the leader's
own state is `leader.LeaderState`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strom.cluster.raft import log as raft_log
from strom.cluster.raft import store


@dataclass(slots=True)
class UnattachedState:
    """No leader known in this epoch; maybe a vote cast. Waits for the election timeout."""

    epoch: int
    voted_id: int | None
    election_deadline: int
    leader_id: None = None
    name = "Unattached"

    def election_state(self) -> store.ElectionState:
        return store.ElectionState(self.epoch, voted_id=self.voted_id)

    def can_grant_vote(self, candidate_id: int) -> bool:
        return self.voted_id is None or self.voted_id == candidate_id

    def can_grant_pre_vote(self, now_ms: int) -> bool:
        return True


@dataclass(slots=True)
class Votes:
    """The tally of one election round among ``voters``."""

    voters: frozenset[int]
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def record(self, voter: int, granted: bool) -> None:
        if voter not in self.voters or voter in self.granted or voter in self.rejected:
            return
        (self.granted if granted else self.rejected).add(voter)

    @property
    def won(self) -> bool:
        return len(self.granted) >= self.majority

    @property
    def lost(self) -> bool:
        return len(self.rejected) > len(self.voters) - self.majority


@dataclass(slots=True)
class ProspectiveState:
    """Pre-vote (KIP-996): ask whether an election could win before bumping the epoch,
    so a node that was cut off does not disrupt a live leader. Keeps the vote and the
    leader of its epoch (it must not vote twice in it)."""

    epoch: int
    voted_id: int | None
    leader_id: int | None
    retries: int
    election_deadline: int
    votes: Votes
    name = "Prospective"

    def election_state(self) -> store.ElectionState:
        return store.ElectionState(self.epoch, voted_id=self.voted_id, leader_id=self.leader_id)

    def can_grant_vote(self, candidate_id: int) -> bool:
        if self.voted_id is not None:
            return self.voted_id == candidate_id
        return self.leader_id is None

    def can_grant_pre_vote(self, now_ms: int) -> bool:
        return True


@dataclass(slots=True)
class CandidateState:
    """Voted for itself in ``epoch``; collects votes until it wins, loses or times out."""

    epoch: int
    node_id: int
    retries: int
    election_deadline: int
    votes: Votes
    # after a lost election: when to go back to pre-voting
    backoff_deadline: int | None = None
    leader_id: None = None
    name = "Candidate"

    @property
    def voted_id(self) -> int:
        return self.node_id

    def election_state(self) -> store.ElectionState:
        return store.ElectionState(self.epoch, voted_id=self.node_id)

    def can_grant_vote(self, candidate_id: int) -> bool:
        return candidate_id == self.node_id

    def can_grant_pre_vote(self, now_ms: int) -> bool:
        return True


@dataclass(slots=True)
class SnapshotTransfer:
    """A snapshot a follower is fetching from its leader, chunk by chunk."""

    snapshot_id: raft_log.SnapshotId
    data: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class FollowerState:
    """Knows the leader of ``epoch`` and fetches from it; starts a pre-vote when the
    leader has not answered within the fetch timeout."""

    epoch: int
    leader_id: int
    fetch_deadline: int
    fetch_timeout_ms: int
    # the last successful fetch, for pre-vote: a follower with a live leader refuses
    last_fetch_ms: int | None = None
    # when the request in flight counts as lost (None: nothing in flight)
    request_deadline: int | None = None
    # a request may go out at this time (after an error: the retry back-off)
    next_request_ms: int = 0
    snapshot: SnapshotTransfer | None = None
    # the leader said it resigned (EndQuorumEpoch)
    leader_resigned: bool = False
    voted_id: None = None
    name = "Follower"

    def election_state(self) -> store.ElectionState:
        return store.ElectionState(self.epoch, leader_id=self.leader_id)

    def can_grant_vote(self, candidate_id: int) -> bool:
        return False

    def can_grant_pre_vote(self, now_ms: int) -> bool:
        if self.leader_resigned or self.last_fetch_ms is None:
            return True
        return now_ms - self.last_fetch_ms >= self.fetch_timeout_ms


@dataclass(slots=True)
class ResignedState:
    """A leader that stepped down (shutdown, lost quorum, restart): tells the voters with
    EndQuorumEpoch, never leads this epoch again, waits for the next election."""

    epoch: int
    node_id: int
    election_deadline: int
    preferred_successors: tuple[int, ...]
    unacknowledged: set[int]
    resend_deadline: int = 0
    voted_id: None = None
    name = "Resigned"

    @property
    def leader_id(self) -> int:
        return self.node_id

    def election_state(self) -> store.ElectionState:
        return store.ElectionState(self.epoch, leader_id=self.node_id)

    def can_grant_vote(self, candidate_id: int) -> bool:
        return False

    def can_grant_pre_vote(self, now_ms: int) -> bool:
        return True
