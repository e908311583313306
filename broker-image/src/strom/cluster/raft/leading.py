"""The leader's side of replication: answering Fetch and FetchSnapshot, holding Fetches
with nothing new (long polling), flushing, and the check-quorum and BeginQuorumEpoch
timers.

A Fetch is checked against the leader's log (`replication.validate_fetch`): a valid one
tells the leader the follower's durable end (which may move the high watermark) and gets
records; otherwise the answer is a diverging epoch or the id of a snapshot to fetch.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from strom.cluster.raft import context, elections, leader, messages, replication

UNKNOWN = messages.UNKNOWN


class Leading(context.Role):
    def __init__(self, ctx: context.Context, election: elections.Elections) -> None:
        super().__init__(ctx)
        self.elections = election

    def poll_leader(self, state: leader.LeaderState, now_ms: int) -> None:
        if self.ctx.flush_needed:
            self.ctx.flush_needed = False
            self.log.flush()
            if state.update_local(self.log.flushed_end_offset):
                self.answer_parked(state, now_ms, everyone=True)
        if state.check_quorum_expired(now_ms):
            self.elections.resign(now_ms)
            return
        if state.begin_epoch_pending and now_ms >= state.begin_epoch_resend_deadline:
            self.elections.send_begin_quorum_epoch(state, now_ms)
        self.answer_parked(state, now_ms, everyone=False)

    def fetch_error(self, request_epoch: int) -> ErrorCode | None:
        if request_epoch < self.quorum.epoch:
            return ErrorCode.fenced_leader_epoch
        if request_epoch > self.quorum.epoch:
            return ErrorCode.unknown_leader_epoch
        if not self.ctx.is_leader:
            return ErrorCode.not_leader_or_follower
        return None

    def on_fetch(self, source: int, request: messages.FetchRequest, now_ms: int) -> None:
        error = self.fetch_error(request.current_leader_epoch)
        state = self.quorum.state
        if error is not None or not isinstance(state, leader.LeaderState):
            response = messages.FetchResponse(
                error or ErrorCode.not_leader_or_follower,
                self.ctx.known_leader(),
                self.quorum.epoch,
            )
            self.ctx.send(source, response)
            return
        validation = replication.validate_fetch(
            self.log, request.fetch_offset, request.last_fetched_epoch
        )
        if isinstance(validation, replication.Valid):
            if state.update_replica(source, request.fetch_offset, now_ms):
                self.answer_parked(state, now_ms, everyone=True)
            hw = UNKNOWN if state.high_watermark is None else state.high_watermark
            nothing_new = request.fetch_offset >= self.log.end_offset and (
                request.high_watermark == UNKNOWN or request.high_watermark >= hw
            )
            if nothing_new and request.max_wait_ms > 0:
                deadline = now_ms + min(request.max_wait_ms, self.config.fetch_max_wait_ms)
                state.parked[source] = leader.ParkedFetch(
                    source, self.ctx.answering, request, deadline
                )
                return
            self.ctx.send(source, self.fetch_response(state, request))
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
        self.ctx.send(source, response)

    def fetch_response(
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

    def answer_parked(self, state: leader.LeaderState, now_ms: int, *, everyone: bool) -> None:
        for source, parked in list(state.parked.items()):
            has_data = parked.request.fetch_offset < self.log.end_offset
            if everyone or has_data or now_ms >= parked.deadline:
                del state.parked[source]
                response = self.fetch_response(state, parked.request)
                self.ctx.send(source, response, parked.correlation_id)

    def on_fetch_snapshot(
        self, source: int, request: messages.FetchSnapshotRequest, now_ms: int
    ) -> None:
        error = self.fetch_error(request.current_leader_epoch)
        state = self.quorum.state
        if error is not None or not isinstance(state, leader.LeaderState):
            response = messages.FetchSnapshotResponse(
                error or ErrorCode.not_leader_or_follower,
                self.ctx.known_leader(),
                self.quorum.epoch,
            )
            self.ctx.send(source, response)
            return
        state.heard_from(source, now_ms)
        chunk = replication.snapshot_chunk(
            self.log, request, self.node_id, state.epoch, self.config.snapshot_chunk_bytes
        )
        self.ctx.send(source, chunk)
