"""The leader's state: its followers' progress, the high watermark, check-quorum.

Kafka's rule for the high watermark: the largest offset a majority of the voters' logs
reach (the leader counts its *flushed* end, a follower the offset it fetches from, which
it flushed before asking), and only once it is past the epoch's first entry (the
LeaderChange record), so that an entry of the current epoch is committed. Check-quorum:
a leader not fetched from by a majority within 1.5 fetch timeouts resigns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strom.cluster.raft import messages, store


@dataclass(slots=True)
class ReplicaProgress:
    end_offset: int | None = None
    last_fetch_ms: int | None = None


@dataclass(slots=True)
class ParkedFetch:
    """A Fetch with nothing to return yet, answered on new data, a new high watermark, or
    at ``deadline``."""

    source: int
    correlation_id: int
    request: messages.FetchRequest
    deadline: int


@dataclass(slots=True)
class LeaderState:
    epoch: int
    node_id: int
    voters: frozenset[int]
    # the offset of this epoch's LeaderChange entry
    epoch_start_offset: int
    check_quorum_deadline: int
    check_quorum_timeout_ms: int
    high_watermark: int | None = None
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    # voters that fetched since the check-quorum timer last restarted
    fetched_voters: set[int] = field(default_factory=set)
    # voters that have not acknowledged BeginQuorumEpoch nor fetched, and when to resend
    begin_epoch_pending: set[int] = field(default_factory=set)
    begin_epoch_resend_deadline: int = 0
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    voted_id: None = None
    name = "Leader"

    @property
    def leader_id(self) -> int:
        return self.node_id

    def election_state(self) -> store.ElectionState:
        return store.ElectionState(self.epoch, leader_id=self.node_id)

    def can_grant_vote(self, candidate_id: int) -> bool:
        return False

    def can_grant_pre_vote(self, now_ms: int) -> bool:
        return False

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def update_local(self, flushed_end_offset: int) -> bool:
        """The leader's own durable end moved; True when the high watermark moved."""
        self.progress.setdefault(self.node_id, ReplicaProgress()).end_offset = flushed_end_offset
        return self._maybe_advance()

    def update_replica(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A replica fetched from ``fetch_offset``, so its log ends there (flushed): True
        when the high watermark moved."""
        progress = self.progress.setdefault(replica_id, ReplicaProgress())
        # a reordered or duplicated Fetch must not move a replica backwards
        if progress.end_offset is None or fetch_offset > progress.end_offset:
            progress.end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        self.heard_from(replica_id, now_ms)
        return self._maybe_advance()

    def heard_from(self, replica_id: int, now_ms: int) -> None:
        """A voter fetched (or fetched a snapshot): check-quorum and BeginQuorumEpoch."""
        if replica_id not in self.voters:
            return
        self.begin_epoch_pending.discard(replica_id)
        self.fetched_voters.add(replica_id)
        if len(self.fetched_voters | {self.node_id}) >= self.majority:
            self.fetched_voters.clear()
            self.check_quorum_deadline = now_ms + self.check_quorum_timeout_ms

    def check_quorum_expired(self, now_ms: int) -> bool:
        return len(self.voters) > 1 and now_ms >= self.check_quorum_deadline

    def _maybe_advance(self) -> bool:
        offsets = sorted(
            (
                progress.end_offset
                for voter, progress in self.progress.items()
                if voter in self.voters and progress.end_offset is not None
            ),
            reverse=True,
        )
        if len(offsets) < self.majority:
            return False
        candidate = offsets[self.majority - 1]
        if candidate <= self.epoch_start_offset:
            return False
        if self.high_watermark is not None and candidate <= self.high_watermark:
            return False
        self.high_watermark = candidate
        return True

    def preferred_successors(self) -> tuple[int, ...]:
        """The other voters, the most caught up first (for EndQuorumEpoch)."""
        others = [voter for voter in self.voters if voter != self.node_id]

        def end(voter: int) -> int:
            progress = self.progress.get(voter)
            return -1 if progress is None or progress.end_offset is None else progress.end_offset

        return tuple(sorted(others, key=lambda voter: (-end(voter), voter)))
