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
(the follower fetches the snapshot in chunks). Log rules live in `replication`, the
state classes in `states` and `leader`, the transitions in `quorum`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from kio.schema.errors import ErrorCode

from strom.cluster.raft import actions, leader, messages, quorum, replication, states, store
from strom.cluster.raft import config as raft_config
from strom.cluster.raft import log as raft_log

UNKNOWN = messages.UNKNOWN


class RaftError(Exception):
    """The leader asked for something Raft forbids (truncating committed entries): a bug."""


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
        self._high_watermark = log.log_start_offset
        self._delivered = log.log_start_offset
        self._out: list[actions.Action] = []
        self._reported: tuple[int | None, int] | None = None
        self._flush_needed = False
        self._now = now_ms
        self._correlation = 0
        self._answering = 0
        self._awaiting: dict[int, tuple[int, quorum.State]] = {}
        snapshot = log.latest_snapshot_id()
        if snapshot is not None:
            state = log.read_snapshot(snapshot, 0, log.snapshot_size(snapshot))
            self._out.append(actions.SnapshotLoaded(snapshot, state))
            self._high_watermark = self._delivered = snapshot.offset

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
        state = self.quorum.state
        if isinstance(state, leader.LeaderState | states.FollowerState):
            return state.leader_id
        return None

    @property
    def leader_and_epoch(self) -> tuple[int | None, int]:
        return self.leader_id, self.epoch

    @property
    def is_leader(self) -> bool:
        return isinstance(self.quorum.state, leader.LeaderState)

    @property
    def high_watermark(self) -> int:
        """Every entry before this offset is committed (what this node knows of it)."""
        return self._high_watermark

    @property
    def delivered_offset(self) -> int:
        """The offset up to which `actions.Committed` has handed entries out."""
        return self._delivered

    def next_wakeup_ms(self) -> int:
        """When ``poll`` has something to do, at the latest."""
        state = self.quorum.state
        if isinstance(state, leader.LeaderState):
            if self._flush_needed:
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

    # ---- the driver's calls

    def append(self, records: Sequence[bytes]) -> int | actions.NotLeader:
        """Append on the leader (the active controller); durable and replicated through
        later polls. The offset of the last record, or who leads instead."""
        state = self.quorum.state
        if not isinstance(state, leader.LeaderState):
            return actions.NotLeader(self.leader_id, self.epoch)
        if not records:
            return self.log.end_offset - 1
        offset = self.log.append_as_leader(records, state.epoch)
        self._flush_needed = True
        return offset

    def create_snapshot(self, end_offset: int, state: bytes) -> raft_log.SnapshotId:
        """Snapshot the state machine's ``state`` after applying every entry before
        ``end_offset`` (a committed, delivered offset), then delete the log before it."""
        if not self.log.log_start_offset < end_offset <= self._delivered:
            raise ValueError(f"no snapshot at {end_offset}: delivered up to {self._delivered}")
        epoch = self.log.entry_epoch(end_offset - 1)
        assert epoch is not None
        snapshot_id = raft_log.SnapshotId(end_offset, epoch)
        self.log.create_snapshot(snapshot_id, state)
        self.log.delete_before_snapshot()
        return snapshot_id

    def resign(self, now_ms: int) -> list[actions.Action]:
        """Hand leadership away (a graceful shutdown): EndQuorumEpoch to the voters."""
        if isinstance(self.quorum.state, leader.LeaderState):
            self._resign(now_ms)
        return self._finish(now_ms)

    def poll(self, now_ms: int) -> list[actions.Action]:
        self._now = now_ms
        state = self.quorum.state
        if isinstance(state, leader.LeaderState):
            self._poll_leader(state, now_ms)
        elif isinstance(state, states.FollowerState):
            self._poll_follower(state, now_ms)
        elif isinstance(state, states.CandidateState):
            if now_ms >= state.election_deadline or (
                state.backoff_deadline is not None and now_ms >= state.backoff_deadline
            ):
                self._prospect(now_ms)
        elif isinstance(state, states.ResignedState):
            if now_ms >= state.election_deadline:
                self._prospect(now_ms)
            elif state.unacknowledged and now_ms >= state.resend_deadline:
                self._send_end_quorum_epoch(state, now_ms)
        elif now_ms >= state.election_deadline and self.quorum.is_voter:
            self._prospect(now_ms)
        return self._finish(now_ms)

    def handle(self, envelope: messages.Envelope, now_ms: int) -> list[actions.Action]:
        self._now = now_ms
        source, message = envelope.source, envelope.message
        self._answering = envelope.correlation_id
        if not isinstance(message, messages.REQUESTS) and not self._expected(envelope):
            return self._finish(now_ms)
        if isinstance(message, messages.FetchRequest):
            self._on_fetch(source, message, now_ms)
        elif isinstance(message, messages.FetchResponse):
            self._on_fetch_response(source, message, now_ms)
        elif isinstance(message, messages.VoteRequest):
            self._on_vote(source, message, now_ms)
        elif isinstance(message, messages.VoteResponse):
            self._on_vote_response(source, message, now_ms)
        elif isinstance(message, messages.BeginQuorumEpochRequest):
            self._on_begin_quorum_epoch(source, message, now_ms)
        elif isinstance(message, messages.EndQuorumEpochRequest):
            self._on_end_quorum_epoch(source, message, now_ms)
        elif isinstance(message, messages.FetchSnapshotRequest):
            self._on_fetch_snapshot(source, message, now_ms)
        elif isinstance(message, messages.FetchSnapshotResponse):
            self._on_fetch_snapshot_response(source, message, now_ms)
        elif self._current(message.leader_id, message.leader_epoch, now_ms):
            state = self.quorum.state
            if isinstance(message, messages.BeginQuorumEpochResponse):
                if isinstance(state, leader.LeaderState):
                    state.begin_epoch_pending.discard(source)
            elif isinstance(state, states.ResignedState):
                state.unacknowledged.discard(source)
        return self._finish(now_ms)

    # ---- plumbing

    def _send(
        self, destination: int, message: messages.Message, correlation_id: int | None = None
    ) -> None:
        if isinstance(message, messages.REQUESTS):
            self._correlation += 1
            correlation_id = self._correlation
            self._awaiting[destination] = (correlation_id, self.quorum.state)
        elif correlation_id is None:
            correlation_id = self._answering
        self._out.append(actions.Send(destination, message, correlation_id))

    def _expected(self, envelope: messages.Envelope) -> bool:
        """Is this response the answer to the request this node awaits from its source,
        sent in its current state? (Kafka's RequestManager: anything else is dropped.)"""
        awaited = self._awaiting.get(envelope.source)
        if awaited is None:
            return False
        correlation_id, state = awaited
        if correlation_id != envelope.correlation_id or state is not self.quorum.state:
            return False
        del self._awaiting[envelope.source]
        return True

    def _finish(self, now_ms: int) -> list[actions.Action]:
        state = self.quorum.state
        if isinstance(state, leader.LeaderState) and state.high_watermark is not None:
            self._high_watermark = max(self._high_watermark, state.high_watermark)
        self._deliver()
        reported = self.leader_and_epoch
        if reported != self._reported:
            self._reported = reported
            self._out.append(actions.LeaderChanged(*reported))
        out, self._out = self._out, []
        return out

    def _deliver(self) -> None:
        end = self._high_watermark
        if self._delivered >= end:
            return
        delivered: list[raft_log.Entry] = []
        while self._delivered < end:
            chunk = self.log.read(self._delivered, self.config.fetch_max_bytes)
            for entry in chunk:
                if entry.offset >= end:
                    break
                if not entry.control:
                    delivered.append(entry)
                self._delivered = entry.offset + 1
        self._out.append(actions.Committed(tuple(delivered), end))

    def _current(self, leader_id: int, epoch: int, now_ms: int) -> bool:
        """Kafka's maybeHandleCommonResponse: a response or request from a later epoch moves
        this node there (following its leader if known); one from an earlier epoch is
        stale. True when the message belongs to this node's epoch."""
        if epoch < self.epoch:
            return False
        known = None if leader_id == UNKNOWN or leader_id == self.node_id else leader_id
        if epoch > self.epoch:
            if known is not None:
                self.quorum.to_follower(epoch, known, now_ms)
            else:
                self.quorum.to_unattached(epoch, now_ms)
            return True
        state = self.quorum.state
        if known is not None and not isinstance(state, states.FollowerState | leader.LeaderState):
            if not isinstance(state, states.ResignedState):
                self.quorum.to_follower(epoch, known, now_ms)
        return True

    def _known_leader(self) -> int:
        leader_id = self.leader_id
        return UNKNOWN if leader_id is None else leader_id

    # ---- elections

    def _prospect(self, now_ms: int) -> None:
        state = self.quorum.to_prospective(now_ms)
        self._request_votes(state.votes, state.epoch + 1, pre_vote=True)
        self._advance_election(now_ms)

    def _request_votes(self, votes: states.Votes, epoch: int, *, pre_vote: bool) -> None:
        for voter in sorted(votes.voters - {self.node_id}):
            request = messages.VoteRequest(
                candidate_epoch=epoch,
                candidate_id=self.node_id,
                voter_id=voter,
                last_offset_epoch=self.log.last_fetched_epoch,
                last_offset=self.log.end_offset,
                pre_vote=pre_vote,
            )
            self._send(voter, request)

    def _advance_election(self, now_ms: int) -> None:
        state = self.quorum.state
        if isinstance(state, states.ProspectiveState) and state.votes.won:
            candidate = self.quorum.to_candidate(now_ms)
            self._request_votes(candidate.votes, candidate.epoch, pre_vote=False)
            state = candidate
        if isinstance(state, states.CandidateState):
            if state.votes.won:
                self._become_leader(now_ms)
            elif state.votes.lost and state.backoff_deadline is None:
                state.backoff_deadline = now_ms + self.quorum.election_backoff(state.retries)

    def _become_leader(self, now_ms: int) -> None:
        state = self.quorum.to_leader(now_ms)
        # Kafka's LeaderChangeMessage: an entry of the new epoch, committed before the
        # high watermark may move in it
        self.log.append_as_leader([b""], state.epoch, control=True)
        self.log.flush()
        state.update_local(self.log.flushed_end_offset)
        self._send_begin_quorum_epoch(state, now_ms)

    def _send_begin_quorum_epoch(self, state: leader.LeaderState, now_ms: int) -> None:
        for voter in sorted(state.begin_epoch_pending):
            self._send(voter, messages.BeginQuorumEpochRequest(self.node_id, state.epoch, voter))
        state.begin_epoch_resend_deadline = now_ms + self.config.fetch_timeout_ms // 2

    def _resign(self, now_ms: int) -> None:
        self._send_end_quorum_epoch(self.quorum.to_resigned(now_ms), now_ms)

    def _send_end_quorum_epoch(self, state: states.ResignedState, now_ms: int) -> None:
        request = messages.EndQuorumEpochRequest(
            self.node_id, state.epoch, state.preferred_successors
        )
        for voter in sorted(state.unacknowledged):
            self._send(voter, request)
        state.resend_deadline = now_ms + self.config.request_timeout_ms

    def _on_vote(self, source: int, request: messages.VoteRequest, now_ms: int) -> None:
        epoch = request.candidate_epoch
        if epoch < self.epoch:
            self._vote_response(source, ErrorCode.fenced_leader_epoch, granted=False)
            return
        if epoch > self.epoch and not request.pre_vote:
            self.quorum.to_unattached(epoch, now_ms)
        candidate_log = (request.last_offset_epoch, request.last_offset)
        log_ok = candidate_log >= (self.log.last_fetched_epoch, self.log.end_offset)
        state = self.quorum.state
        if request.pre_vote:
            granted = log_ok and state.can_grant_pre_vote(now_ms)
        else:
            granted = log_ok and state.can_grant_vote(request.candidate_id)
            if granted and state.voted_id is None:
                self.quorum.to_unattached(epoch, now_ms, voted_id=request.candidate_id)
        self._vote_response(source, ErrorCode.none, granted=granted)

    def _vote_response(self, destination: int, error: ErrorCode, *, granted: bool) -> None:
        response = messages.VoteResponse(error, self._known_leader(), self.epoch, granted)
        self._send(destination, response)

    def _on_vote_response(self, source: int, response: messages.VoteResponse, now_ms: int) -> None:
        if not self._current(response.leader_id, response.leader_epoch, now_ms):
            return
        if response.leader_epoch != self.epoch:
            return
        state = self.quorum.state
        if isinstance(state, states.ProspectiveState | states.CandidateState):
            state.votes.record(source, response.vote_granted)
            self._advance_election(now_ms)

    def _on_begin_quorum_epoch(
        self, source: int, request: messages.BeginQuorumEpochRequest, now_ms: int
    ) -> None:
        if request.leader_epoch >= self.epoch and request.leader_id != self.node_id:
            self._current(request.leader_id, request.leader_epoch, now_ms)
        error = (
            ErrorCode.none if request.leader_epoch == self.epoch else ErrorCode.fenced_leader_epoch
        )
        self._send(
            source, messages.BeginQuorumEpochResponse(error, self._known_leader(), self.epoch)
        )

    def _on_end_quorum_epoch(
        self, source: int, request: messages.EndQuorumEpochRequest, now_ms: int
    ) -> None:
        if request.leader_epoch >= self.epoch and request.leader_id != self.node_id:
            self._current(request.leader_id, request.leader_epoch, now_ms)
        state = self.quorum.state
        if (
            isinstance(state, states.FollowerState)
            and state.epoch == request.leader_epoch
            and state.leader_id == request.leader_id
        ):
            # the most caught-up successor stands first, the others back off in turn
            successors = request.preferred_successors
            position = successors.index(self.node_id) if self.node_id in successors else 8
            backoff = 0
            if position > 0:
                backoff = min(
                    self.config.election_backoff_max_ms,
                    self.config.retry_backoff_ms << (position - 1),
                )
            state.leader_resigned = True
            state.fetch_deadline = min(state.fetch_deadline, now_ms + backoff)
        error = (
            ErrorCode.none if request.leader_epoch == self.epoch else ErrorCode.fenced_leader_epoch
        )
        self._send(source, messages.EndQuorumEpochResponse(error, self._known_leader(), self.epoch))

    # ---- replication: the leader's side

    def _poll_leader(self, state: leader.LeaderState, now_ms: int) -> None:
        if self._flush_needed:
            self._flush_needed = False
            self.log.flush()
            if state.update_local(self.log.flushed_end_offset):
                self._answer_parked(state, now_ms, everyone=True)
        if state.check_quorum_expired(now_ms):
            self._resign(now_ms)
            return
        if state.begin_epoch_pending and now_ms >= state.begin_epoch_resend_deadline:
            self._send_begin_quorum_epoch(state, now_ms)
        self._answer_parked(state, now_ms, everyone=False)

    def _fetch_error(self, request_epoch: int) -> ErrorCode | None:
        if request_epoch < self.epoch:
            return ErrorCode.fenced_leader_epoch
        if request_epoch > self.epoch:
            return ErrorCode.unknown_leader_epoch
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower
        return None

    def _on_fetch(self, source: int, request: messages.FetchRequest, now_ms: int) -> None:
        error = self._fetch_error(request.current_leader_epoch)
        state = self.quorum.state
        if error is not None or not isinstance(state, leader.LeaderState):
            response = messages.FetchResponse(
                error or ErrorCode.not_leader_or_follower, self._known_leader(), self.epoch
            )
            self._send(source, response)
            return
        validation = replication.validate_fetch(
            self.log, request.fetch_offset, request.last_fetched_epoch
        )
        if isinstance(validation, replication.Valid):
            if state.update_replica(source, request.fetch_offset, now_ms):
                self._answer_parked(state, now_ms, everyone=True)
            hw = UNKNOWN if state.high_watermark is None else state.high_watermark
            nothing_new = request.fetch_offset >= self.log.end_offset and (
                request.high_watermark == UNKNOWN or request.high_watermark >= hw
            )
            if nothing_new and request.max_wait_ms > 0:
                deadline = now_ms + min(request.max_wait_ms, self.config.fetch_max_wait_ms)
                state.parked[source] = leader.ParkedFetch(
                    source, self._answering, request, deadline
                )
                return
            self._send(source, self._fetch_response(state, request))
            return
        state.heard_from(source, now_ms)
        response = messages.FetchResponse(
            ErrorCode.none,
            self.node_id,
            state.epoch,
            high_watermark=UNKNOWN if state.high_watermark is None else state.high_watermark,
            log_start_offset=self.log.log_start_offset,
            diverging_epoch=validation.epoch_end
            if isinstance(validation, replication.Diverging)
            else None,
            snapshot_id=validation.snapshot_id
            if isinstance(validation, replication.NeedsSnapshot)
            else None,
        )
        self._send(source, response)

    def _fetch_response(
        self, state: leader.LeaderState, request: messages.FetchRequest
    ) -> messages.FetchResponse:
        return messages.FetchResponse(
            ErrorCode.none,
            self.node_id,
            state.epoch,
            high_watermark=UNKNOWN if state.high_watermark is None else state.high_watermark,
            log_start_offset=self.log.log_start_offset,
            records=replication.records_for(self.log, request.fetch_offset, request.max_bytes),
        )

    def _answer_parked(self, state: leader.LeaderState, now_ms: int, *, everyone: bool) -> None:
        for source, parked in list(state.parked.items()):
            has_data = parked.request.fetch_offset < self.log.end_offset
            if everyone or has_data or now_ms >= parked.deadline:
                del state.parked[source]
                response = self._fetch_response(state, parked.request)
                self._send(source, response, parked.correlation_id)

    def _on_fetch_snapshot(
        self, source: int, request: messages.FetchSnapshotRequest, now_ms: int
    ) -> None:
        error = self._fetch_error(request.current_leader_epoch)
        state = self.quorum.state
        if error is not None or not isinstance(state, leader.LeaderState):
            response = messages.FetchSnapshotResponse(
                error or ErrorCode.not_leader_or_follower, self._known_leader(), self.epoch
            )
            self._send(source, response)
            return
        state.heard_from(source, now_ms)
        chunk = replication.snapshot_chunk(
            self.log, request, self.node_id, state.epoch, self.config.snapshot_chunk_bytes
        )
        self._send(source, chunk)

    # ---- replication: the follower's side

    def _poll_follower(self, state: states.FollowerState, now_ms: int) -> None:
        if now_ms >= state.fetch_deadline and self.quorum.is_voter:
            self._prospect(now_ms)
            return
        if state.request_deadline is not None and now_ms < state.request_deadline:
            return
        if now_ms >= state.next_request_ms:
            self._send_fetch(state, now_ms)

    def _send_fetch(self, state: states.FollowerState, now_ms: int) -> None:
        state.request_deadline = now_ms + self.config.request_timeout_ms
        request: messages.Message
        if state.snapshot is not None:
            request = messages.FetchSnapshotRequest(
                self.node_id,
                state.epoch,
                state.snapshot.snapshot_id,
                position=len(state.snapshot.data),
                max_bytes=self.config.snapshot_chunk_bytes,
            )
        else:
            request = messages.FetchRequest(
                self.node_id,
                state.epoch,
                fetch_offset=self.log.end_offset,
                last_fetched_epoch=self.log.last_fetched_epoch,
                log_start_offset=self.log.log_start_offset,
                max_bytes=self.config.fetch_max_bytes,
                max_wait_ms=self.config.fetch_max_wait_ms,
                high_watermark=self._high_watermark,
            )
        self._send(state.leader_id, request)

    def _follower_of(
        self, source: int, leader_id: int, epoch: int, now_ms: int
    ) -> states.FollowerState | None:
        """The follower state a response from ``source`` is for, after the epoch checks."""
        if not self._current(leader_id, epoch, now_ms) or epoch != self.epoch:
            return None
        state = self.quorum.state
        if isinstance(state, states.FollowerState) and state.leader_id == source:
            return state
        return None

    def _on_fetch_response(
        self, source: int, response: messages.FetchResponse, now_ms: int
    ) -> None:
        state = self._follower_of(source, response.leader_id, response.leader_epoch, now_ms)
        if state is None:
            return
        state.request_deadline = None
        if response.error != ErrorCode.none:
            state.next_request_ms = now_ms + self.config.retry_backoff_ms
            return
        state.last_fetch_ms = now_ms
        state.fetch_deadline = now_ms + self.config.fetch_timeout_ms
        state.leader_resigned = False
        if response.diverging_epoch is not None:
            offset = replication.truncation_offset(self.log, response.diverging_epoch)
            if offset < self._high_watermark:
                raise RaftError(
                    f"node {self.node_id}: the leader {source} of epoch {state.epoch} asks to "
                    f"truncate to {offset}, below the high watermark {self._high_watermark}"
                )
            self.log.truncate_to(offset)
        elif response.snapshot_id is not None:
            # this log ends before the leader's starts, or diverges before it: replace it
            state.snapshot = states.SnapshotTransfer(response.snapshot_id)
        else:
            self._append_fetched(response.records)
            if response.high_watermark != UNKNOWN:
                hw = min(response.high_watermark, self.log.end_offset)
                self._high_watermark = max(self._high_watermark, hw)
        self._send_fetch(state, now_ms)

    def _append_fetched(self, records: tuple[raft_log.Entry, ...]) -> None:
        end = self.log.end_offset
        fresh = [entry for entry in records if entry.offset >= end]
        if not fresh or fresh[0].offset != end:
            return
        self.log.append_as_follower(fresh)
        # a follower flushes before it fetches again: its fetch offset is what it has durably
        self.log.flush()

    def _on_fetch_snapshot_response(
        self, source: int, response: messages.FetchSnapshotResponse, now_ms: int
    ) -> None:
        state = self._follower_of(source, response.leader_id, response.leader_epoch, now_ms)
        if state is None or state.snapshot is None:
            return
        transfer = state.snapshot
        state.request_deadline = None
        if response.error != ErrorCode.none:
            # the leader took a newer snapshot, or moved on: fetch again to learn
            state.snapshot = None
            state.next_request_ms = now_ms + self.config.retry_backoff_ms
            return
        state.last_fetch_ms = now_ms
        state.fetch_deadline = now_ms + self.config.fetch_timeout_ms
        if response.snapshot_id == transfer.snapshot_id and response.position == len(transfer.data):
            transfer.data += response.unaligned_records
            if len(transfer.data) >= response.size:
                self._install(transfer)
                state.snapshot = None
        self._send_fetch(state, now_ms)

    def _install(self, transfer: states.SnapshotTransfer) -> None:
        snapshot_id = transfer.snapshot_id
        if snapshot_id.offset <= self._high_watermark:
            return
        data = bytes(transfer.data)
        self.log.install_snapshot(snapshot_id, data)
        self._out.append(actions.SnapshotLoaded(snapshot_id, data))
        self._delivered = max(self._delivered, snapshot_id.offset)
        self._high_watermark = max(self._high_watermark, snapshot_id.offset)
