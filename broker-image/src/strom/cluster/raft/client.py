"""`RaftClient`: one node of the quorum as a sans-I/O state machine (Kafka's KafkaRaftClient).

A driver owns the sockets, the clock and the state machine. It calls ``handle`` with each
message that arrives, ``poll`` whenever ``next_wakeup_ms`` has come (and after an
``append``), and carries out what both return, in order: `actions.Send` a message,
`actions.Committed` / `actions.SnapshotLoaded` to the state machine, `actions.LeaderChanged`.

    client = RaftClient(node_id, voters, log, store, config, random.Random(), now_ms)
    for action in client.poll(now_ms): ...
    for action in client.handle(messages.Envelope(source, node_id, message), now_ms): ...
    client.append([record, ...])  # on the leader: the last offset, or actions.NotLeader

Elections are Kafka's: a voter that hears nothing from a leader (election timeout, or the
fetch timeout as a follower) pre-votes (Prospective), and only with a majority of pre-votes
bumps the epoch and asks for real votes (Candidate). Followers pull with Fetch; the
leader answers with records, a diverging epoch (the follower truncates) or a snapshot id
(the follower fetches the snapshot in chunks). The roles are `elections`, `leading`
and `following`; log rules live in `replication`, the state classes in `states` and
`leader`, the transitions in `quorum`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from strom.cluster.raft import (
    actions,
    context,
    elections,
    following,
    leader,
    leading,
    messages,
    quorum,
    states,
    store,
)
from strom.cluster.raft import config as raft_config
from strom.cluster.raft import log as raft_log

UNKNOWN = messages.UNKNOWN


RaftError = following.RaftError


class RaftClient:
    def __init__(
        self,
        node_id: int,
        voters: Iterable[int],
        log: raft_log.ReplicatedLog,
        quorum_store: store.QuorumStateStore,
        config: raft_config.RaftConfig,
        rng: random.Random,
        now_ms: int = 0,
    ) -> None:
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.log = log
        self.config = config
        self.quorum = quorum.QuorumState(
            node_id, self.voters, quorum_store, log, config, rng, now_ms
        )
        self.ctx = context.Context(node_id, log, config, self.quorum)
        self.elections = elections.Elections(self.ctx)
        self.leading = leading.Leading(self.ctx, self.elections)
        self.following = following.Following(self.ctx, self.elections)
        self._reported: tuple[int | None, int] | None = None
        self._now = now_ms
        snapshot = log.latest_snapshot_id()
        if snapshot is not None:
            state = log.read_snapshot(snapshot, 0, log.snapshot_size(snapshot))
            self.ctx.out.append(actions.SnapshotLoaded(snapshot, state))
            self.ctx.high_watermark = self.ctx.delivered = snapshot.offset

    # ---- what the driver and the state machine read

    @property
    def state(self) -> quorum.State:
        return self.quorum.state

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader_id(self) -> int | None:
        """The leader this node knows in its epoch (itself when it leads)."""
        return self.ctx.leader_id

    @property
    def leader_and_epoch(self) -> tuple[int | None, int]:
        return self.ctx.leader_id, self.epoch

    @property
    def is_leader(self) -> bool:
        return self.ctx.is_leader

    @property
    def high_watermark(self) -> int:
        """Every entry before this offset is committed (what this node knows of it)."""
        return self.ctx.high_watermark

    @property
    def delivered_offset(self) -> int:
        """The offset up to which `actions.Committed` has handed entries out."""
        return self.ctx.delivered

    def next_wakeup_ms(self) -> int:
        """When ``poll`` has something to do, at the latest."""
        state = self.quorum.state
        if isinstance(state, leader.LeaderState):
            if self.ctx.flush_needed:
                return self._now
            times = [state.check_quorum_deadline] if len(state.voters) > 1 else []
            if state.begin_epoch_pending:
                times.append(state.begin_epoch_resend_deadline)
            times += [parked.deadline for parked in state.parked.values()]
            return min(times, default=self._now + self.config.fetch_timeout_ms)
        if isinstance(state, states.FollowerState):
            idle = state.request_deadline is None
            request = state.next_request_ms if idle else state.request_deadline
            assert request is not None
            return min(state.fetch_deadline, request)
        if isinstance(state, states.CandidateState) and state.backoff_deadline is not None:
            return min(state.election_deadline, state.backoff_deadline)
        if isinstance(state, states.ResignedState) and state.unacknowledged:
            return min(state.election_deadline, state.resend_deadline)
        return state.election_deadline

    def append(self, records: Sequence[bytes]) -> int | actions.NotLeader:
        """Append on the leader (the active controller); durable and replicated through
        later polls. The offset of the last record, or who leads instead."""
        state = self.quorum.state
        if not isinstance(state, leader.LeaderState):
            return actions.NotLeader(self.leader_id, self.epoch)
        if not records:
            return self.log.end_offset - 1
        offset = self.log.append_as_leader(records, state.epoch)
        self.ctx.flush_needed = True
        return offset

    def create_snapshot(self, end_offset: int, state: bytes) -> raft_log.SnapshotId:
        """Snapshot the state machine's ``state`` after applying every entry before
        ``end_offset`` (a committed, delivered offset), then delete the log before it."""
        if not self.log.log_start_offset < end_offset <= self.ctx.delivered:
            raise ValueError(f"no snapshot at {end_offset}: delivered up to {self.ctx.delivered}")
        epoch = self.log.entry_epoch(end_offset - 1)
        assert epoch is not None
        snapshot_id = raft_log.SnapshotId(end_offset, epoch)
        self.log.create_snapshot(snapshot_id, state)
        self.log.delete_before_snapshot()
        return snapshot_id

    def resign(self, now_ms: int) -> list[actions.Action]:
        """Hand leadership away (a graceful shutdown): EndQuorumEpoch to the voters."""
        if isinstance(self.quorum.state, leader.LeaderState):
            self.elections.resign(now_ms)
        return self._finish(now_ms)

    # ---- the driver's calls

    def poll(self, now_ms: int) -> list[actions.Action]:
        self._now = now_ms
        state = self.quorum.state
        if isinstance(state, leader.LeaderState):
            self.leading.poll_leader(state, now_ms)
        elif isinstance(state, states.FollowerState):
            self.following.poll_follower(state, now_ms)
        elif isinstance(state, states.CandidateState):
            if now_ms >= state.election_deadline or (
                state.backoff_deadline is not None and now_ms >= state.backoff_deadline
            ):
                self.elections.prospect(now_ms)
        elif isinstance(state, states.ResignedState):
            if now_ms >= state.election_deadline:
                self.elections.prospect(now_ms)
            elif state.unacknowledged and now_ms >= state.resend_deadline:
                self.elections.send_end_quorum_epoch(state, now_ms)
        elif now_ms >= state.election_deadline and self.quorum.is_voter:
            self.elections.prospect(now_ms)
        elif isinstance(state, states.UnattachedState) and now_ms >= state.election_deadline:
            self.following.find_leader(state, now_ms)  # an observer (not a voter)
        return self._finish(now_ms)

    def handle(self, envelope: messages.Envelope, now_ms: int) -> list[actions.Action]:
        self._now = now_ms
        source, message = envelope.source, envelope.message
        self.ctx.answering = envelope.correlation_id
        if not isinstance(message, messages.REQUESTS) and not self.ctx.expected(envelope):
            return self._finish(now_ms)
        if isinstance(message, messages.FetchRequest):
            self.leading.on_fetch(source, message, now_ms)
        elif isinstance(message, messages.FetchResponse):
            self.following.on_fetch_response(source, message, now_ms)
        elif isinstance(message, messages.VoteRequest):
            self.elections.on_vote(source, message, now_ms)
        elif isinstance(message, messages.VoteResponse):
            self.elections.on_vote_response(source, message, now_ms)
        elif isinstance(message, messages.BeginQuorumEpochRequest):
            self.elections.on_begin_quorum_epoch(source, message, now_ms)
        elif isinstance(message, messages.EndQuorumEpochRequest):
            self.elections.on_end_quorum_epoch(source, message, now_ms)
        elif isinstance(message, messages.FetchSnapshotRequest):
            self.leading.on_fetch_snapshot(source, message, now_ms)
        elif isinstance(message, messages.FetchSnapshotResponse):
            self.following.on_fetch_snapshot_response(source, message, now_ms)
        elif self.ctx.current(message.leader_id, message.leader_epoch, now_ms):
            state = self.quorum.state
            if isinstance(message, messages.BeginQuorumEpochResponse):
                if isinstance(state, leader.LeaderState):
                    state.begin_epoch_pending.discard(source)
            elif isinstance(state, states.ResignedState):
                state.unacknowledged.discard(source)
        return self._finish(now_ms)

    # ---- plumbing

    def _finish(self, now_ms: int) -> list[actions.Action]:
        state = self.quorum.state
        if isinstance(state, leader.LeaderState) and state.high_watermark is not None:
            self.ctx.high_watermark = max(self.ctx.high_watermark, state.high_watermark)
        self._deliver()
        reported = self.leader_and_epoch
        if reported != self._reported:
            self._reported = reported
            self.ctx.out.append(actions.LeaderChanged(*reported))
        out, self.ctx.out = self.ctx.out, []
        return out

    def _deliver(self) -> None:
        end = self.ctx.high_watermark
        if self.ctx.delivered >= end:
            return
        delivered: list[raft_log.Entry] = []
        while self.ctx.delivered < end:
            chunk = self.log.read(self.ctx.delivered, self.config.fetch_max_bytes)
            if not chunk:
                # nothing where the high watermark says there is: reading again would spin
                raise raft_log.UnreadableLogError(
                    f"no entry at offset {self.ctx.delivered} of a log whose end is"
                    f" {self.log.end_offset}, below the high watermark {end}"
                )
            for entry in chunk:
                if entry.offset >= end:
                    break
                if not entry.control:
                    delivered.append(entry)
                self.ctx.delivered = entry.offset + 1
        self.ctx.out.append(actions.Committed(tuple(delivered), end))
