"""What the roles of a node share: its identity, log, quorum state, the outgoing actions
and the requests it awaits (Kafka's RequestManager), and the epoch rule for messages.

`client.RaftClient` owns one; `elections`, `leading` and `following` act through it.
"""

from __future__ import annotations

from strom.cluster.raft import actions, leader, messages, quorum, states
from strom.cluster.raft import config as raft_config
from strom.cluster.raft import log as raft_log

UNKNOWN = messages.UNKNOWN


class Context:
    def __init__(
        self,
        node_id: int,
        log: raft_log.ReplicatedLog,
        config: raft_config.RaftConfig,
        quorum_state: quorum.QuorumState,
    ) -> None:
        self.node_id = node_id
        self.log = log
        self.config = config
        self.quorum = quorum_state
        self.out: list[actions.Action] = []
        # every entry before it is committed, as far as this node knows
        self.high_watermark = log.log_start_offset
        # the state machine has been handed every entry before it
        self.delivered = log.log_start_offset
        # the leader appended and must flush at its next poll
        self.flush_needed = False
        # the correlation id of the request being answered
        self.answering = 0
        self._correlation = 0
        self._awaiting: dict[int, tuple[int, quorum.State]] = {}

    @property
    def leader_id(self) -> int | None:
        """The leader this node knows in its epoch (itself when it leads)."""
        state = self.quorum.state
        if isinstance(state, leader.LeaderState | states.FollowerState):
            return state.leader_id
        return None

    def known_leader(self) -> int:
        """The leader as a response reports it (-1: unknown)."""
        leader_id = self.leader_id
        return UNKNOWN if leader_id is None else leader_id

    @property
    def is_leader(self) -> bool:
        return isinstance(self.quorum.state, leader.LeaderState)

    def send(
        self, destination: int, message: messages.Message, correlation_id: int | None = None
    ) -> None:
        """Queue a message: a request gets a new correlation id and is awaited; a response
        carries the id of the request it answers (``answering`` unless given)."""
        if isinstance(message, messages.REQUESTS):
            self._correlation += 1
            correlation_id = self._correlation
            self._awaiting[destination] = (correlation_id, self.quorum.state)
        elif correlation_id is None:
            correlation_id = self.answering
        self.out.append(actions.Send(destination, message, correlation_id))

    def expected(self, envelope: messages.Envelope) -> bool:
        """Is this response the answer to the request this node awaits from its source,
        sent in its current state? (Kafka's RequestManager: anything else is dropped: a
        duplicate, a late answer, a pre-vote answered after the node became a candidate.)"""
        awaited = self._awaiting.get(envelope.source)
        if awaited is None:
            return False
        correlation_id, state = awaited
        if correlation_id != envelope.correlation_id or state is not self.quorum.state:
            return False
        del self._awaiting[envelope.source]
        return True

    def current(self, leader_id: int, epoch: int, now_ms: int) -> bool:
        """Kafka's maybeHandleCommonResponse: a message from a later epoch moves this node
        there (following its leader if known), one from an earlier epoch is stale, one
        naming the leader of this epoch makes a node without a leader follow it. True
        when the message belongs to this node's epoch (now)."""
        if epoch < self.quorum.epoch:
            return False
        known = None if leader_id in (UNKNOWN, self.node_id) else leader_id
        if epoch > self.quorum.epoch:
            if known is not None:
                self.quorum.to_follower(epoch, known, now_ms)
            else:
                self.quorum.to_unattached(epoch, now_ms)
            return True
        state = self.quorum.state
        leaderless = states.UnattachedState | states.ProspectiveState | states.CandidateState
        # A Prospective that left this very leader (it stopped answering) keeps standing:
        # Kafka's hasLeader(). Following it again on hearsay from another follower would
        # reset the election each time, and two followers of a dead leader that time out
        # together would send each other back to it forever.
        stood_against = isinstance(state, states.ProspectiveState) and state.leader_id == known
        if known is not None and isinstance(state, leaderless) and not stood_against:
            self.quorum.to_follower(epoch, known, now_ms)
        return True


class Role:
    """What each role of a node (`elections`, `leading`, `following`) reads from its
    context, under short names."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.node_id = ctx.node_id
        self.log = ctx.log
        self.config = ctx.config
        self.quorum = ctx.quorum
