"""The Raft driver: runs the sans-I/O `raft.client.RaftClient` on the event loop.

It owns what the core leaves out: the clock (one task polls the client whenever its
``next_wakeup_ms`` comes or something woke it), the network (requests the core sends go
out through a `network.Channel` to the voters' controller listeners, one task each;
requests that arrive on this node's controller listener are fed in through `handle`,
which waits for the core's answer), and the state machine (committed entries and loaded
snapshots go to ``apply`` in order, on the loop, before anyone waiting on them wakes).

`append` is the metadata log's write: on the leader it appends, then waits until the
entries are committed and applied here, so the active controller's image includes its
own write when the call returns (Kafka's controller waits for the same before it
answers a request).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from strom.clock import Clock
from strom.cluster import quorum as quorum_view
from strom.cluster import raft_wire, topics
from strom.cluster.raft import actions, leader, messages
from strom.cluster.raft import client as raft_client
from strom.cluster.raft import log as raft_log
from strom.network import channel as channels
from strom.network import errors as network_errors

log = logging.getLogger(__name__)

Apply = Callable[[actions.Committed | actions.SnapshotLoaded], None]

# Inbound requests get correlation ids of their own, far from the core's outbound ones.
_INBOUND_IDS_START = 1 << 40
# How often a node that cannot write its metadata log tries again.
DISK_RETRY_S = 1.0
# How often a node says again that another node has another voter set.
VOTER_CONFLICT_LOG_EVERY_S = 10.0


class RaftDriver:
    def __init__(
        self,
        client: raft_client.RaftClient,
        channel: channels.Channel,
        *,
        cluster_id: str,
        clock: Clock,
        apply: Apply,
        on_leader_change: Callable[[int | None, int], None] = lambda leader, epoch: None,
        directory_id: uuid.UUID | None = None,
    ) -> None:
        self.client = client
        self.node_id = client.node_id
        self._channel = channel
        self._cluster_id = cluster_id
        self._clock = clock
        self._apply = apply
        self._on_leader_change = on_leader_change
        self._directory_id = directory_id
        # replica id -> (the log directory id it fetches with, when it last fetched)
        self._fetchers: dict[int, tuple[uuid.UUID, float]] = {}
        self._wake = asyncio.Event()
        self._inbound_ids = itertools.count(_INBOUND_IDS_START)
        self._answers: dict[tuple[int, int], asyncio.Future[messages.Response]] = {}
        # (offset, sequence, future): woken once the entry at offset is applied here
        self._commit_waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._waiter_ids = itertools.count()
        self._applied_end = client.delivered_offset
        # set and replaced whenever the leader or the applied offset changes
        self._changed = asyncio.Event()
        self._sends: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None
        self._last_storage_warning = float("-inf")
        self._stopping = False
        self._last_conflict_warning = float("-inf")
        # the last sign of nodes configured against each other (None: none seen)
        self.misconfiguration: str | None = None

    # What the broker reads ---------------------------------------------------------------

    @property
    def leader_id(self) -> int | None:
        return self.client.leader_id

    @property
    def epoch(self) -> int:
        return self.client.epoch

    @property
    def applied_end_offset(self) -> int:
        """Every committed entry before this offset has been applied here."""
        return self._applied_end

    def is_active(self) -> bool:
        """Leader, and its state machine has applied every entry of earlier epochs."""
        state = self.client.state
        return (
            isinstance(state, leader.LeaderState) and self._applied_end > state.epoch_start_offset
        )

    def describe(self, now_ms: int) -> quorum_view.QuorumDescription:
        state = self.client.state
        end = self.client.log.end_offset
        if not isinstance(state, leader.LeaderState):
            voters = tuple(
                quorum_view.ReplicaState(voter, end if voter == self.node_id else -1)
                for voter in sorted(self.client.voters)
            )
            return quorum_view.QuorumDescription(
                leader_id=-1 if self.leader_id is None else self.leader_id,
                leader_epoch=self.epoch,
                high_watermark=self.client.high_watermark,
                voters=voters,
            )

        def replica(node: int) -> quorum_view.ReplicaState:
            if node == self.node_id:
                return quorum_view.ReplicaState(node, end, now_ms, now_ms)
            progress = state.progress.get(node)
            offset = -1 if progress is None or progress.end_offset is None else progress.end_offset
            fetched = (
                -1 if progress is None or progress.last_fetch_ms is None else progress.last_fetch_ms
            )
            caught_up = fetched if offset >= (state.high_watermark or 0) else -1
            return quorum_view.ReplicaState(node, offset, fetched, caught_up)

        # observers: the broker-only nodes that fetch from this leader
        observers = sorted(set(state.progress) - state.voters)
        return quorum_view.QuorumDescription(
            leader_id=self.node_id,
            leader_epoch=self.epoch,
            high_watermark=self.client.high_watermark,
            voters=tuple(replica(voter) for voter in sorted(state.voters)),
            observers=tuple(replica(observer) for observer in observers),
        )

    # Running --------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, *, resign: bool = True) -> None:
        """Stop polling; a leader first tells the voters (EndQuorumEpoch) so that another
        is elected at once rather than after a fetch timeout. Requests still waiting for
        an answer get an error at once."""
        self._stopping = True
        if resign and self._task is not None and not self._task.done():
            self._execute(self.client.resign(self._clock.time_ms()))
            if self._sends:
                await asyncio.wait(set(self._sends), timeout=0.5)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in list(self._sends):
            task.cancel()
        for answer in self._answers.values():
            answer.cancel()
        for _, _, waiter in self._commit_waiters:
            if not waiter.done():
                waiter.set_exception(topics.NotControllerError("the node is shutting down"))
        self._commit_waiters.clear()

    def cancel(self) -> None:
        """Stop at once (the log is about to close), without resigning."""
        if self._task is not None:
            self._task.cancel()
        for task in list(self._sends):
            task.cancel()

    async def _run(self) -> None:
        try:
            while not self._stopping:
                try:
                    done = self.client.poll(self._clock.time_ms())
                except OSError as error:
                    # a full or failing disk: the core retries what it could not write
                    self._storage_error(error)
                    await asyncio.sleep(DISK_RETRY_S)
                    continue
                self._execute(done)
                delay_ms = self.client.next_wakeup_ms() - self._clock.time_ms()
                if delay_ms > 0:
                    self._wake.clear()
                    # asyncio.timeout, not wait_for: 3.11's wait_for loses a cancellation
                    # that arrives as the wait ends, and the wake event is set all the time
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay_ms / 1000):
                            await self._wake.wait()
                else:
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            self._stop_on_fault(error)
            raise

    def _stop_on_fault(self, error: BaseException) -> None:
        """A metadata log that cannot be written or read: Kafka halts the process. The
        quorum stops here, every waiter fails, and appends refuse from now on."""
        if self.failure is not None:
            return
        log.critical("the metadata quorum stopped: %s", error, exc_info=error)
        self.failure = error
        self._notify()
        for _, _, waiter in self._commit_waiters:
            if not waiter.done():
                waiter.set_exception(topics.StorageFailedError(f"metadata log: {error}"))
        self._commit_waiters.clear()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()

    def _not_a_fellow_voter(self, request: messages.Request) -> str | None:
        """Why a Vote, BeginQuorumEpoch or EndQuorumEpoch shows its sender has another
        voter set than this node (Kafka's INCONSISTENT_VOTER_SET), or None. A Fetch from
        a node that is not a voter is an observer's (a broker-only node): allowed."""
        voters, me = self.client.voters, self.node_id
        match request:
            case messages.VoteRequest() if (
                request.candidate_id not in voters or request.voter_id != me
            ):
                return f"node {request.candidate_id} asked node {request.voter_id} for a vote"
            case messages.BeginQuorumEpochRequest() if (
                request.leader_id not in voters or request.voter_id != me
            ):
                return f"node {request.leader_id} claimed the leadership to this node as a voter"
            case messages.EndQuorumEpochRequest() if request.leader_id not in voters:
                return f"node {request.leader_id} resigned to this node as a voter"
        return None

    def _twin_of_a_fetcher(self, replica_id: int, directory_id: uuid.UUID | None) -> str | None:
        """Why this fetch comes from a second node with a node.id in use (another log
        directory while the first still fetches), or None. Two replicas under one id would
        have the leader count one's log as the other's."""
        if replica_id == self.node_id:
            return f"two nodes with node.id {replica_id}: the other one fetches from this one"
        if directory_id is None:
            return None
        now = self._clock.monotonic()
        known = self._fetchers.get(replica_id)
        live_s = self.client.config.fetch_timeout_ms / 1000
        if known is not None and known[0] != directory_id and now - known[1] < live_s:
            return (
                f"two nodes with node.id {replica_id} fetch the metadata log (log directories"
                f" {known[0]} and {directory_id}); the second is refused"
            )
        self._fetchers[replica_id] = (directory_id, now)
        return None

    def _voter_set_conflict(self, what: str) -> None:
        voters = ",".join(str(voter) for voter in sorted(self.client.voters))
        self._misconfigured(
            f"controller.quorum.voters differs between nodes: {what}, but the voters of node"
            f" {self.node_id} are {voters}. Give every node the same controller.quorum.voters."
        )

    def _node_id_twins(self, what: str) -> None:
        self._misconfigured(f"{what}. Give every node a node.id of its own.")

    def _misconfigured(self, message: str) -> None:
        """Say it, loudly and often enough to be seen: nodes configured this way may form
        quorums of their own or count one another's logs as their own."""
        now = self._clock.monotonic()
        if now - self._last_conflict_warning < VOTER_CONFLICT_LOG_EVERY_S:
            return
        self._last_conflict_warning = now
        self.misconfiguration = message
        log.error("%s", message)

    def _storage_error(self, error: OSError) -> None:
        now = self._clock.monotonic()
        if now - self._last_storage_warning >= DISK_RETRY_S * 10:
            self._last_storage_warning = now
            log.error("cannot write the metadata log %s: %s", self.client.log, error)

    def _handled(self, envelope: messages.Envelope) -> None:
        """Feed one message to the core; a message it could not write for is dropped (the
        sender retries, as after a lost message)."""
        if self.failure is not None:
            return
        try:
            done = self.client.handle(envelope, self._clock.time_ms())
        except OSError as error:
            self._storage_error(error)
            return
        except raft_log.UnreadableLogError as error:
            self._stop_on_fault(error)
            return
        self._execute(done)
        self._poke()

    def _poke(self) -> None:
        self._wake.set()

    # Writing --------------------------------------------------------------------------

    async def append(self, entries: Sequence[bytes], timeout_s: float) -> int:
        """Append on the leader and wait until the entries are committed and applied here;
        the offset of the last. NotControllerError when this node does not lead,
        CommitTimeoutError when no majority commits them in time."""
        if self.failure is not None:
            raise topics.StorageFailedError(f"metadata log: {self.failure}")
        if not self.is_active():
            raise self._not_controller()
        replicated_log = self.client.log
        start = replicated_log.end_offset
        try:
            offset = self.client.append(entries)
            if isinstance(offset, actions.NotLeader):
                raise self._not_controller()
            # Flushed here, before any follower can fetch them, so that a full disk fails
            # this write alone: the entries are taken back and the caller told.
            replicated_log.flush()
        except OSError as error:
            with contextlib.suppress(OSError):
                replicated_log.truncate_to(start)
            raise topics.StorageFailedError(f"cannot write the metadata log: {error}") from error
        self._poke()
        await self.wait_applied(offset + 1, timeout_s)
        return offset

    async def wait_applied(self, end_offset: int, timeout_s: float) -> None:
        """Until every entry before ``end_offset`` is committed and applied here."""
        if self._applied_end >= end_offset:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._commit_waiters, (end_offset - 1, next(self._waiter_ids), waiter))
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout_s)
        except TimeoutError:
            raise topics.CommitTimeoutError(
                f"metadata offset {end_offset - 1} was not committed within {timeout_s:.1f} s"
                " (no majority of the controller quorum reachable?)"
            ) from None

    async def wait_for_leader(self, timeout_s: float) -> None:
        """Until some leader is known and this node has applied the high watermark it knows."""
        deadline = self._clock.monotonic() + timeout_s
        while not (
            self.failure is not None
            or (
                self.leader_id is not None
                and self.client.high_watermark > 0
                and self._applied_end >= self.client.high_watermark
            )
        ):
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                raise topics.CommitTimeoutError(
                    "no leader of the controller quorum was found in time"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    def _not_controller(self) -> topics.NotControllerError:
        leader_id = self.leader_id
        if leader_id == self.node_id:
            return topics.NotControllerError(
                f"node {self.node_id} leads the metadata quorum but is not the active"
                " controller yet: its epoch's first entry is not committed and applied"
            )
        who = "not known yet" if leader_id is None else f"node {leader_id}"
        return topics.NotControllerError(
            f"node {self.node_id} is not the active controller; the active controller is {who}"
        )

    # Inbound requests -------------------------------------------------------------------

    async def handle(self, body: Any) -> Any:
        """Answer a quorum request (a decoded kio request) that came in on the controller
        listener: the kio response at the request's version."""
        version = int(type(body).__version__)
        if self._stopping or self.failure is not None:
            return raft_wire.error_response(body, ErrorCode.broker_not_available)
        cluster_id = getattr(body, "cluster_id", None)
        if cluster_id is not None and cluster_id != self._cluster_id:
            log.warning(
                "refused a %s from cluster %s: this node is in cluster %s",
                type(body).__name__,
                cluster_id,
                self._cluster_id,
            )
            return raft_wire.error_response(body, ErrorCode.inconsistent_cluster_id)
        try:
            request = raft_wire.request_from_kio(body)
        except raft_wire.RaftWireError as error:
            log.warning("refused a malformed %s: %s", type(body).__name__, error)
            return raft_wire.error_response(body, ErrorCode.invalid_request)
        source = _source_of(request)
        stranger = self._not_a_fellow_voter(request)
        if stranger is not None:
            self._voter_set_conflict(stranger)
            return raft_wire.error_response(body, ErrorCode.inconsistent_voter_set)
        if isinstance(request, messages.FetchRequest | messages.FetchSnapshotRequest):
            twin = self._twin_of_a_fetcher(request.replica_id, raft_wire.replica_directory_id(body))
            if twin is not None:
                self._node_id_twins(twin)
                return raft_wire.error_response(body, ErrorCode.invalid_voter_key)
        correlation_id = next(self._inbound_ids)
        answer: asyncio.Future[messages.Response] = asyncio.get_running_loop().create_future()
        self._answers[(source, correlation_id)] = answer
        try:
            self._handled(messages.Envelope(source, self.node_id, request, correlation_id))
            if self.failure is not None:
                return raft_wire.error_response(body, ErrorCode.broker_not_available)
            timeout_s = (self.client.config.request_timeout_ms) / 1000
            try:
                response = await asyncio.wait_for(answer, timeout_s)
            except TimeoutError:
                return raft_wire.error_response(body, ErrorCode.request_timed_out)
            except asyncio.CancelledError:
                if not self._stopping:
                    raise
                return raft_wire.error_response(body, ErrorCode.broker_not_available)
        finally:
            self._answers.pop((source, correlation_id), None)
        return raft_wire.response_to_kio(response, version)

    # Carrying out the core's actions -----------------------------------------------------

    def _execute(self, done: Sequence[actions.Action]) -> None:
        for action in done:
            if isinstance(action, actions.Send):
                self._send(action)
            elif isinstance(action, actions.Committed | actions.SnapshotLoaded):
                self._apply(action)
                end = (
                    action.end_offset
                    if isinstance(action, actions.Committed)
                    else action.snapshot_id.offset
                )
                self._applied_end = max(self._applied_end, end)
                self._wake_commit_waiters()
                self._notify()
            else:
                log.info(
                    "metadata quorum: leader %s in epoch %d (node %d)",
                    "unknown" if action.leader_id is None else action.leader_id,
                    action.epoch,
                    self.node_id,
                )
                if action.leader_id != self.node_id:
                    self._fail_commit_waiters()
                self._on_leader_change(action.leader_id, action.epoch)
                self._notify()

    def _fail_commit_waiters(self) -> None:
        """This node no longer leads: what it appended may or may not commit under the
        next leader, so its callers hear NOT_CONTROLLER now rather than wait (Kafka's
        controller fails its pending operations when it renounces)."""
        waiters, self._commit_waiters = self._commit_waiters, []
        for _, _, waiter in waiters:
            if not waiter.done():
                waiter.set_exception(
                    topics.NotControllerError(
                        f"node {self.node_id} lost the leadership of the metadata quorum"
                        " before the change was committed; it may still take effect"
                    )
                )

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _wake_commit_waiters(self) -> None:
        while self._commit_waiters and self._commit_waiters[0][0] < self._applied_end:
            _, _, waiter = heapq.heappop(self._commit_waiters)
            if not waiter.done():
                waiter.set_result(None)

    def _send(self, send: actions.Send) -> None:
        if not isinstance(send.message, messages.REQUESTS):
            answer = self._answers.get((send.destination, send.correlation_id))
            if answer is not None and not answer.done():
                answer.set_result(send.message)
            return
        task = asyncio.get_running_loop().create_task(self._request(send))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _request(self, send: actions.Send) -> None:
        assert isinstance(send.message, messages.REQUESTS)
        request = raft_wire.request_to_kio(
            send.message, cluster_id=self._cluster_id, directory_id=self._directory_id
        )
        timeout_s = self.client.config.request_timeout_ms / 1000
        try:
            body = await self._channel.send(send.destination, request, timeout_s=timeout_s)
            response = raft_wire.response_from_kio(body)
        except raft_wire.TopLevelError as error:
            if error.error == ErrorCode.invalid_voter_key:
                self._node_id_twins(
                    f"node {send.destination} refused this node's fetch: another node with"
                    f" node.id {self.node_id} and another log directory fetches from it"
                )
            elif error.error == ErrorCode.inconsistent_voter_set:
                self._voter_set_conflict(
                    f"node {send.destination} refused this node's {type(send.message).__name__}"
                    " as coming from a node outside its voter set"
                )
            else:
                log.warning("node %d answered %s", send.destination, error)
            return
        except (network_errors.NetworkError, raft_wire.RaftWireError) as error:
            log.debug("quorum request to node %d failed: %s", send.destination, error)
            return
        if response.leader_id == self.node_id and response.leader_epoch > self.client.epoch:
            # a node cannot have led an epoch it has not reached: another node has its id
            self._node_id_twins(
                f"node {send.destination} says the quorum's leader in epoch"
                f" {response.leader_epoch} is node {self.node_id}, this node's node.id; another"
                f" node with node.id {self.node_id} leads"
            )
        self._handled(
            messages.Envelope(send.destination, self.node_id, response, send.correlation_id)
        )


def _source_of(request: messages.Request) -> int:
    if isinstance(request, messages.VoteRequest):
        return request.candidate_id
    if isinstance(request, messages.BeginQuorumEpochRequest | messages.EndQuorumEpochRequest):
        return request.leader_id
    return request.replica_id
