"""The follower's side of replication: Fetch from the leader, append and flush what comes
back, truncate on a diverging epoch, fetch and install a snapshot when the log is behind
the leader's start, learn the high watermark; pre-vote when the leader goes silent.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from strom.cluster.raft import actions, context, elections, messages, replication, states
from strom.cluster.raft import log as raft_log

UNKNOWN = messages.UNKNOWN


class RaftError(Exception):
    """The leader asked for something Raft forbids (truncating committed entries): a bug."""


class Following(context.Role):
    def __init__(self, ctx: context.Context, election: elections.Elections) -> None:
        super().__init__(ctx)
        self.elections = election

    def poll_follower(self, state: states.FollowerState, now_ms: int) -> None:
        if now_ms >= state.fetch_deadline and self.quorum.is_voter:
            self.elections.prospect(now_ms)
            return
        if now_ms >= state.fetch_deadline:
            # an observer: its leader went silent; ask the voters who leads now
            self.find_leader(self.quorum.to_observer_unattached(now_ms), now_ms)
            return
        if state.request_deadline is not None and now_ms < state.request_deadline:
            return
        if now_ms >= state.next_request_ms:
            self.send_fetch(state, now_ms)

    def find_leader(self, state: states.UnattachedState, now_ms: int) -> None:
        """An observer (a broker-only node) has no leader: it fetches from a voter, whose
        answer names the leader and its epoch (``Context.current`` then follows it). The
        election timer of an observer is this retry timer (Kafka fetches from a bootstrap
        server alike)."""
        voters = sorted(self.quorum.voters)
        state.election_deadline = now_ms + self.config.request_timeout_ms
        if not voters:
            return  # nobody to ask (no static voters): wait, without spinning
        self.ctx.send(self.quorum.rng.choice(voters), self.fetch_request(state.epoch, 0))

    def send_fetch(self, state: states.FollowerState, now_ms: int) -> None:
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
            request = self.fetch_request(state.epoch, self.config.fetch_max_wait_ms)
        self.ctx.send(state.leader_id, request)

    def fetch_request(self, epoch: int, max_wait_ms: int) -> messages.FetchRequest:
        """A Fetch from this log's end (long-polling for up to `max_wait_ms`)."""
        return messages.FetchRequest(
            self.node_id,
            epoch,
            fetch_offset=self.log.end_offset,
            last_fetched_epoch=self.log.last_fetched_epoch,
            log_start_offset=self.log.log_start_offset,
            max_bytes=self.config.fetch_max_bytes,
            max_wait_ms=max_wait_ms,
            high_watermark=self.ctx.high_watermark,
        )

    def follower_of(
        self, source: int, leader_id: int, epoch: int, now_ms: int
    ) -> states.FollowerState | None:
        """The follower state a response from ``source`` is for, after the epoch checks."""
        if not self.ctx.current(leader_id, epoch, now_ms) or epoch != self.quorum.epoch:
            return None
        state = self.quorum.state
        if isinstance(state, states.FollowerState) and state.leader_id == source:
            return state
        return None

    def on_fetch_response(self, source: int, response: messages.FetchResponse, now_ms: int) -> None:
        state = self.follower_of(source, response.leader_id, response.leader_epoch, now_ms)
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
            if offset < self.ctx.high_watermark:
                raise RaftError(
                    f"node {self.node_id}: the leader {source} of epoch {state.epoch} asks to "
                    f"truncate to {offset}, below the high watermark {self.ctx.high_watermark}"
                )
            self.log.truncate_to(offset)
        elif response.snapshot_id is not None:
            # this log ends before the leader's starts, or diverges before it: replace it
            state.snapshot = states.SnapshotTransfer(response.snapshot_id)
        else:
            self.append_fetched(response.records)
            if response.high_watermark != UNKNOWN:
                hw = min(response.high_watermark, self.log.end_offset)
                self.ctx.high_watermark = max(self.ctx.high_watermark, hw)
        self.send_fetch(state, now_ms)

    def append_fetched(self, records: tuple[raft_log.Entry, ...]) -> None:
        end = self.log.end_offset
        fresh = [entry for entry in records if entry.offset >= end]
        if not fresh or fresh[0].offset != end:
            return
        self.log.append_as_follower(fresh)
        # a follower flushes before it fetches again: its fetch offset is what it has durably
        self.log.flush()

    def on_fetch_snapshot_response(
        self, source: int, response: messages.FetchSnapshotResponse, now_ms: int
    ) -> None:
        state = self.follower_of(source, response.leader_id, response.leader_epoch, now_ms)
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
                self.install(transfer)
                state.snapshot = None
        self.send_fetch(state, now_ms)

    def install(self, transfer: states.SnapshotTransfer) -> None:
        snapshot_id = transfer.snapshot_id
        if snapshot_id.offset <= self.ctx.high_watermark:
            return
        data = bytes(transfer.data)
        self.log.install_snapshot(snapshot_id, data)
        self.ctx.out.append(actions.SnapshotLoaded(snapshot_id, data))
        self.ctx.delivered = max(self.ctx.delivered, snapshot_id.offset)
        self.ctx.high_watermark = max(self.ctx.high_watermark, snapshot_id.offset)
