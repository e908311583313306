"""The current election state of a node and the transitions between states, guarded.

As Kafka's QuorumState: every transition writes the new election state to the store
(durably) before the node acts on it, and a transition the Raft rules forbid (going back
an epoch, a second vote in an epoch, leading without winning, following a second leader
in an epoch) raises `InvalidTransitionError`: that is a bug, never a network event.

    Unattached  -> Unattached (higher epoch, or a vote), Prospective, Follower
    Prospective -> Prospective (retry), Candidate, Follower, Unattached
    Candidate   -> Leader, Prospective (lost or timed out), Follower, Unattached
    Leader      -> Resigned, Follower, Unattached (a higher epoch)
    Follower    -> Prospective (leader silent), Follower, Unattached (a higher epoch;
                   an observer's silent leader, in the same epoch)
    Resigned    -> Prospective, Follower, Unattached (a higher epoch)
"""

from __future__ import annotations

import random

from strom.cluster.raft import config as raft_config
from strom.cluster.raft import leader, states, store
from strom.cluster.raft import log as raft_log

State = (
    states.UnattachedState
    | states.ProspectiveState
    | states.CandidateState
    | leader.LeaderState
    | states.FollowerState
) | states.ResignedState


class InvalidTransitionError(Exception):
    """A state change the Raft rules forbid: a bug in the caller."""


class QuorumState:
    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        quorum_store: store.QuorumStateStore,
        log: raft_log.ReplicatedLog,
        config: raft_config.RaftConfig,
        rng: random.Random,
        now_ms: int,
    ) -> None:
        self.node_id = node_id
        self.voters = voters
        self.store = quorum_store
        self.log = log
        self.config = config
        self.rng = rng
        self.state: State = self._initial(quorum_store.read(), now_ms)

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    def _initial(self, persisted: store.ElectionState | None, now_ms: int) -> State:
        if persisted is None:
            return states.UnattachedState(0, None, self.election_deadline(now_ms))
        if persisted.leader_id == self.node_id:
            # a leader that restarts never leads that epoch again
            return self._resigned(persisted.epoch, (), now_ms)
        if persisted.leader_id is not None:
            return states.FollowerState(
                persisted.epoch,
                persisted.leader_id,
                fetch_deadline=now_ms + self.config.fetch_timeout_ms,
                fetch_timeout_ms=self.config.fetch_timeout_ms,
            )
        return states.UnattachedState(
            persisted.epoch, persisted.voted_id, self.election_deadline(now_ms)
        )

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int | None:
        return self.state.leader_id if not isinstance(self.state, states.ResignedState) else None

    def election_deadline(self, now_ms: int) -> int:
        if self.voters == {self.node_id}:
            return now_ms  # the only voter: nobody else can lead, stand at once (as Kafka)
        if not self.is_voter:
            return now_ms  # an observer never stands: its timer asks a voter for the leader
        timeout = self.config.election_timeout_ms
        return now_ms + timeout + self.rng.randrange(timeout)

    def election_backoff(self, retries: int) -> int:
        """Kafka's exponential back-off with jitter after a lost election."""
        limit = min(self.config.election_backoff_max_ms, self.config.retry_backoff_ms << retries)
        return self.rng.randrange(max(1, limit))

    def _set(self, new: State) -> State:
        old = self.state
        if new.epoch < old.epoch:
            raise InvalidTransitionError(f"{old.name}@{old.epoch} -> {new.name}@{new.epoch}")
        if new.election_state() != old.election_state():
            self.store.write(new.election_state())
        self.state = new
        return new

    def _fail(self, target: str, epoch: int) -> InvalidTransitionError:
        old = self.state
        return InvalidTransitionError(f"{old.name}@{old.epoch} -> {target}@{epoch}")

    def to_unattached(
        self, epoch: int, now_ms: int, voted_id: int | None = None
    ) -> states.UnattachedState:
        """A higher epoch with no known leader, or a vote cast in this epoch."""
        old = self.state
        if epoch == old.epoch:
            may_vote = (
                isinstance(old, states.UnattachedState | states.ProspectiveState)
                and old.voted_id is None
                and old.leader_id is None
                and voted_id is not None
            )
            if not may_vote:
                raise self._fail("Unattached", epoch)
        elif epoch < old.epoch:
            raise self._fail("Unattached", epoch)
        new = states.UnattachedState(epoch, voted_id, self.election_deadline(now_ms))
        self._set(new)
        return new

    def to_observer_unattached(self, now_ms: int) -> states.UnattachedState:
        """An observer (not a voter) whose leader went silent forgets it, in the same
        epoch, to ask the voters who leads now (Kafka's pollFollowerAsObserver)."""
        old = self.state
        if self.is_voter or not isinstance(old, states.FollowerState):
            raise self._fail("Unattached", old.epoch)
        new = states.UnattachedState(old.epoch, None, self.election_deadline(now_ms))
        self._set(new)
        return new

    def to_prospective(self, now_ms: int) -> states.ProspectiveState:
        old = self.state
        if isinstance(old, leader.LeaderState) or not self.is_voter:
            raise self._fail("Prospective", old.epoch)
        retries = old.retries + 1 if isinstance(old, states.ProspectiveState) else 0
        if isinstance(old, states.CandidateState):
            retries = old.retries + 1
        new = states.ProspectiveState(
            old.epoch,
            voted_id=old.voted_id,
            leader_id=old.leader_id,
            retries=retries,
            election_deadline=self.election_deadline(now_ms),
            votes=states.Votes(self.voters, granted={self.node_id}),
        )
        self._set(new)
        return new

    def to_candidate(self, now_ms: int) -> states.CandidateState:
        old = self.state
        if not isinstance(old, states.ProspectiveState) or not old.votes.won:
            raise self._fail("Candidate", old.epoch + 1)
        # the log up to here must be durable before this node asks for votes with it
        self.log.flush()
        new = states.CandidateState(
            old.epoch + 1,
            self.node_id,
            retries=old.retries,
            election_deadline=self.election_deadline(now_ms),
            votes=states.Votes(self.voters, granted={self.node_id}),
        )
        self._set(new)
        return new

    def to_leader(self, now_ms: int) -> leader.LeaderState:
        old = self.state
        if not isinstance(old, states.CandidateState) or not old.votes.won:
            raise self._fail("Leader", old.epoch)
        self.log.flush()
        new = leader.LeaderState(
            old.epoch,
            self.node_id,
            self.voters,
            epoch_start_offset=self.log.end_offset,
            check_quorum_deadline=now_ms + self.config.check_quorum_timeout_ms,
            check_quorum_timeout_ms=self.config.check_quorum_timeout_ms,
            begin_epoch_pending=set(self.voters - {self.node_id}),
        )
        self._set(new)
        return new

    def to_follower(self, epoch: int, leader_id: int, now_ms: int) -> states.FollowerState:
        old = self.state
        if leader_id == self.node_id:
            raise self._fail("Follower", epoch)
        if epoch == old.epoch:
            if isinstance(old, states.FollowerState) and old.leader_id == leader_id:
                return old
            allowed = isinstance(
                old, states.UnattachedState | states.CandidateState | states.ProspectiveState
            ) and old.leader_id in (None, leader_id)
            if not allowed:
                raise self._fail("Follower", epoch)
        elif epoch < old.epoch:
            raise self._fail("Follower", epoch)
        new = states.FollowerState(
            epoch,
            leader_id,
            fetch_deadline=now_ms + self.config.fetch_timeout_ms,
            fetch_timeout_ms=self.config.fetch_timeout_ms,
        )
        self._set(new)
        return new

    def to_resigned(self, now_ms: int) -> states.ResignedState:
        old = self.state
        if not isinstance(old, leader.LeaderState):
            raise self._fail("Resigned", old.epoch)
        new = self._resigned(old.epoch, old.preferred_successors(), now_ms)
        self._set(new)
        return new

    def _resigned(
        self, epoch: int, successors: tuple[int, ...], now_ms: int
    ) -> states.ResignedState:
        others = self.voters - {self.node_id}
        if not successors:
            successors = tuple(sorted(others))
        return states.ResignedState(
            epoch,
            self.node_id,
            election_deadline=self.election_deadline(now_ms),
            preferred_successors=successors,
            unacknowledged=set(others),
        )
