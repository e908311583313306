"""Elections: pre-vote, votes, a new leader's first steps, and stepping down.

A voter that hears nothing from a leader becomes Prospective and asks for pre-votes in
its epoch (KIP-996), which a voter grants only if the candidate's log is at least as up
to date as its own and it has no live leader; with a majority it becomes a Candidate
(the epoch moves, its vote for itself is persisted) and asks for votes; with a majority
it leads: it appends the epoch's LeaderChange entry and sends BeginQuorumEpoch. A leader
that steps down (check-quorum, shutdown, restart) is Resigned and sends EndQuorumEpoch,
naming the most caught-up voters as preferred successors, who then stand at once.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from strom.cluster.raft import context, leader, messages, states


class Elections(context.Role):
    def _epoch_error(self, leader_epoch: int) -> ErrorCode:
        """Begin/EndQuorumEpoch's answer: none in this node's epoch, else fenced."""
        if leader_epoch == self.quorum.epoch:
            return ErrorCode.none
        return ErrorCode.fenced_leader_epoch

    def prospect(self, now_ms: int) -> None:
        state = self.quorum.to_prospective(now_ms)
        self.request_votes(state.votes, state.epoch, pre_vote=True)
        self.advance_election(now_ms)

    def request_votes(self, votes: states.Votes, epoch: int, *, pre_vote: bool) -> None:
        for voter in sorted(votes.voters - {self.node_id}):
            request = messages.VoteRequest(
                candidate_epoch=epoch,
                candidate_id=self.node_id,
                voter_id=voter,
                last_offset_epoch=self.log.last_fetched_epoch,
                last_offset=self.log.end_offset,
                pre_vote=pre_vote,
            )
            self.ctx.send(voter, request)

    def advance_election(self, now_ms: int) -> None:
        state = self.quorum.state
        if (
            isinstance(state, states.ProspectiveState)
            and state.votes.lost
            and state.leader_id is not None
        ):
            # the majority still has that leader (Kafka: a lost pre-vote goes back to it)
            self.quorum.to_follower(state.epoch, state.leader_id, now_ms)
            return
        if isinstance(state, states.ProspectiveState) and state.votes.won:
            candidate = self.quorum.to_candidate(now_ms)
            self.request_votes(candidate.votes, candidate.epoch, pre_vote=False)
            state = candidate
        if isinstance(state, states.CandidateState):
            if state.votes.won:
                self.become_leader(now_ms)
            elif state.votes.lost and state.backoff_deadline is None:
                state.backoff_deadline = now_ms + self.quorum.election_backoff(state.retries)

    def become_leader(self, now_ms: int) -> None:
        state = self.quorum.to_leader(now_ms)
        # Kafka's LeaderChangeMessage: an entry of the new epoch, committed before the
        # high watermark may move in it
        self.log.append_as_leader([b""], state.epoch, control=True)
        self.log.flush()
        state.update_local(self.log.flushed_end_offset)
        self.send_begin_quorum_epoch(state, now_ms)

    def send_begin_quorum_epoch(self, state: leader.LeaderState, now_ms: int) -> None:
        for voter in sorted(state.begin_epoch_pending):
            self.ctx.send(voter, messages.BeginQuorumEpochRequest(self.node_id, state.epoch, voter))
        state.begin_epoch_resend_deadline = now_ms + self.config.fetch_timeout_ms // 2

    def resign(self, now_ms: int) -> None:
        self.send_end_quorum_epoch(self.quorum.to_resigned(now_ms), now_ms)

    def send_end_quorum_epoch(self, state: states.ResignedState, now_ms: int) -> None:
        request = messages.EndQuorumEpochRequest(
            self.node_id, state.epoch, state.preferred_successors
        )
        for voter in sorted(state.unacknowledged):
            self.ctx.send(voter, request)
        state.resend_deadline = now_ms + self.config.request_timeout_ms

    def on_vote(self, source: int, request: messages.VoteRequest, now_ms: int) -> None:
        epoch = request.candidate_epoch
        if epoch < self.quorum.epoch:
            self.vote_response(source, ErrorCode.fenced_leader_epoch, granted=False)
            return
        # Kafka's rule, pre-votes included: a voter behind the candidate's epoch moves
        # there (so a leader learns of a node stuck in a later epoch and makes way)
        if epoch > self.quorum.epoch:
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
        self.vote_response(source, ErrorCode.none, granted=granted)

    def vote_response(self, destination: int, error: ErrorCode, *, granted: bool) -> None:
        response = messages.VoteResponse(error, self.ctx.known_leader(), self.quorum.epoch, granted)
        self.ctx.send(destination, response)

    def on_vote_response(self, source: int, response: messages.VoteResponse, now_ms: int) -> None:
        if not self.ctx.current(response.leader_id, response.leader_epoch, now_ms):
            return
        if response.leader_epoch != self.quorum.epoch:
            return
        state = self.quorum.state
        if isinstance(state, states.ProspectiveState | states.CandidateState):
            state.votes.record(source, response.vote_granted)
            self.advance_election(now_ms)

    def on_begin_quorum_epoch(
        self, source: int, request: messages.BeginQuorumEpochRequest, now_ms: int
    ) -> None:
        if request.leader_epoch >= self.quorum.epoch and request.leader_id != self.node_id:
            self.ctx.current(request.leader_id, request.leader_epoch, now_ms)
        error = self._epoch_error(request.leader_epoch)
        self.ctx.send(
            source,
            messages.BeginQuorumEpochResponse(error, self.ctx.known_leader(), self.quorum.epoch),
        )

    def on_end_quorum_epoch(
        self, source: int, request: messages.EndQuorumEpochRequest, now_ms: int
    ) -> None:
        if request.leader_epoch >= self.quorum.epoch and request.leader_id != self.node_id:
            self.ctx.current(request.leader_id, request.leader_epoch, now_ms)
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
        error = self._epoch_error(request.leader_epoch)
        self.ctx.send(
            source,
            messages.EndQuorumEpochResponse(error, self.ctx.known_leader(), self.quorum.epoch),
        )
