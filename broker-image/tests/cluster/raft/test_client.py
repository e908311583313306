"""The Raft client's answers at the edges: stale epochs, votes for a log that is behind,
pre-votes against a live leader, diverging fetches, fetches below the log start,
check-quorum, duplicate responses, restarts."""

from __future__ import annotations

import random

import pytest
from kio.schema.errors import ErrorCode
from strom.cluster.raft import (
    actions,
    client,
    config,
    leader,
    memory_log,
    messages,
    replication,
    states,
    store,
)
from strom.cluster.raft import log as raft_log

CONFIG = config.RaftConfig(
    election_timeout_ms=100,
    fetch_timeout_ms=200,
    request_timeout_ms=150,
    fetch_max_wait_ms=0,
    retry_backoff_ms=5,
    snapshot_chunk_bytes=256,
)


class Cluster:
    """Clients that exchange messages in order, at once, one millisecond at a time."""

    def __init__(self, voters: int = 3) -> None:
        self.now = 0
        self.ids = list(range(1, voters + 1))
        self.logs = {node: memory_log.MemoryLog() for node in self.ids}
        self.stores = {node: store.MemoryQuorumStateStore() for node in self.ids}
        self.clients = {node: self.start(node) for node in self.ids}
        self.down: set[int] = set()
        self.in_flight: list[messages.Envelope] = []
        self.delivered: list[messages.Envelope] = []
        self.effects: dict[int, list[actions.Action]] = {node: [] for node in self.ids}

    def start(self, node: int) -> client.RaftClient:
        return client.RaftClient(
            node, self.ids, self.logs[node], self.stores[node], CONFIG, random.Random(node)
        )

    def route(self, source: int, outputs: list[actions.Action]) -> None:
        """Effects are kept; messages arrive at the next millisecond, unless a side is down."""
        for action in outputs:
            if not isinstance(action, actions.Send):
                self.effects[source].append(action)
            elif action.destination not in self.down and source not in self.down:
                envelope = messages.Envelope(
                    source, action.destination, action.message, action.correlation_id
                )
                self.in_flight.append(envelope)

    def run(self, ms: int) -> None:
        for _ in range(ms):
            self.now += 1
            arriving, self.in_flight = self.in_flight, []
            self.delivered += arriving
            for envelope in arriving:
                if envelope.destination not in self.down:
                    target = self.clients[envelope.destination]
                    self.route(envelope.destination, target.handle(envelope, self.now))
            for node in self.ids:
                if node not in self.down:
                    self.route(node, self.clients[node].poll(self.now))

    def leader(self) -> client.RaftClient:
        leaders = [
            raft for node, raft in self.clients.items() if raft.is_leader and node not in self.down
        ]
        assert len(leaders) == 1, leaders
        return leaders[0]


def single(node_id: int = 1, voters: tuple[int, ...] = (1, 2, 3)) -> client.RaftClient:
    return client.RaftClient(
        node_id,
        voters,
        memory_log.MemoryLog(),
        store.MemoryQuorumStateStore(),
        CONFIG,
        random.Random(0),
    )


def sent(outputs: list[actions.Action]) -> list[messages.Message]:
    return [action.message for action in outputs if isinstance(action, actions.Send)]


def test_a_single_voter_elects_itself_and_commits_its_appends() -> None:
    raft = single(voters=(1,))
    raft.poll(250)
    assert raft.is_leader and raft.epoch == 1
    assert raft.append([b"a", b"b"]) == 2  # after the LeaderChange entry at 0
    outputs = raft.poll(251)
    committed = [action for action in outputs if isinstance(action, actions.Committed)]
    assert [entry.data for entry in committed[0].entries] == [b"a", b"b"]
    assert raft.high_watermark == 3


def test_three_voters_elect_one_leader_replicate_and_commit() -> None:
    cluster = Cluster()
    cluster.run(300)
    the_leader = cluster.leader()
    assert the_leader.epoch == 1
    offset = the_leader.append([b"x"])
    assert isinstance(offset, int)
    cluster.run(20)
    for node in cluster.ids:
        assert cluster.clients[node].high_watermark == offset + 1
        applied = [
            entry.data
            for action in cluster.effects[node]
            if isinstance(action, actions.Committed)
            for entry in action.entries
        ]
        assert applied == [b"x"]
        assert actions.LeaderChanged(the_leader.node_id, 1) in cluster.effects[node]


def test_append_on_a_follower_names_the_leader() -> None:
    cluster = Cluster()
    cluster.run(300)
    the_leader = cluster.leader()
    follower = next(raft for raft in cluster.clients.values() if not raft.is_leader)
    assert follower.append([b"x"]) == actions.NotLeader(the_leader.node_id, the_leader.epoch)


def test_a_request_from_a_stale_epoch_is_fenced() -> None:
    raft = single()
    raft.handle(messages.Envelope(2, 1, messages.BeginQuorumEpochRequest(2, 5, 1), 1), 0)
    assert raft.epoch == 5 and raft.leader_id == 2
    vote = messages.VoteRequest(4, 3, 1, last_offset_epoch=9, last_offset=99)
    [response] = sent(raft.handle(messages.Envelope(3, 1, vote, 2), 0))
    assert response == messages.VoteResponse(ErrorCode.fenced_leader_epoch, 2, 5, False)
    fetch = messages.FetchRequest(3, 4, 0, 0, 0, 1000, 0)
    [response] = sent(raft.handle(messages.Envelope(3, 1, fetch, 3), 0))
    assert isinstance(response, messages.FetchResponse)
    assert response.error == ErrorCode.fenced_leader_epoch
    assert (response.leader_id, response.leader_epoch) == (2, 5)


def test_no_vote_for_a_candidate_whose_log_is_behind_though_its_epoch_is_taken() -> None:
    log = memory_log.MemoryLog()
    log.append_as_leader([b"a", b"b"], epoch=2)
    quorum_store = store.MemoryQuorumStateStore()
    quorum_store.state = store.ElectionState(2)
    raft = client.RaftClient(1, (1, 2, 3), log, quorum_store, CONFIG, random.Random(0))
    behind = messages.VoteRequest(3, 2, 1, last_offset_epoch=2, last_offset=1)
    [response] = sent(raft.handle(messages.Envelope(2, 1, behind, 1), 0))
    assert isinstance(response, messages.VoteResponse)
    assert not response.vote_granted and response.leader_epoch == 3
    assert quorum_store.state == store.ElectionState(3)  # the epoch, not a vote
    older_epoch = messages.VoteRequest(3, 3, 1, last_offset_epoch=1, last_offset=50)
    [response] = sent(raft.handle(messages.Envelope(3, 1, older_epoch, 1), 0))
    assert isinstance(response, messages.VoteResponse) and not response.vote_granted
    up_to_date = messages.VoteRequest(3, 3, 1, last_offset_epoch=2, last_offset=2)
    [response] = sent(raft.handle(messages.Envelope(3, 1, up_to_date, 2), 0))
    assert isinstance(response, messages.VoteResponse) and response.vote_granted
    assert quorum_store.state == store.ElectionState(3, voted_id=3)


def test_a_pre_vote_changes_nothing_and_a_live_leader_keeps_its_followers() -> None:
    cluster = Cluster()
    cluster.run(300)
    the_leader = cluster.leader()
    follower = next(raft for raft in cluster.clients.values() if not raft.is_leader)
    writes = cluster.stores[follower.node_id].writes
    # a node cut off for a while comes back and pre-votes
    pre_vote = messages.VoteRequest(
        the_leader.epoch,
        9,
        follower.node_id,
        last_offset_epoch=99,
        last_offset=99,
        pre_vote=True,
    )
    [response] = sent(
        follower.handle(messages.Envelope(9, follower.node_id, pre_vote, 1), cluster.now)
    )
    assert isinstance(response, messages.VoteResponse)
    assert not response.vote_granted
    assert response.leader_id == the_leader.node_id
    assert follower.epoch == the_leader.epoch
    assert cluster.stores[follower.node_id].writes == writes


def test_a_partitioned_node_rejoins_without_disrupting_the_leader() -> None:
    cluster = Cluster()
    cluster.run(300)
    the_leader = cluster.leader()
    lonely = next(node for node in cluster.ids if node != the_leader.node_id)
    # cut off: it times out and pre-votes again and again, its epoch stays
    cluster.down.add(lonely)
    cluster.run(1000)
    assert cluster.clients[lonely].epoch == the_leader.epoch
    cluster.down.clear()
    cluster.run(500)
    assert cluster.leader() is the_leader
    assert all(raft.epoch == the_leader.epoch for raft in cluster.clients.values())


def test_a_node_stuck_in_a_later_epoch_is_taken_back_in() -> None:
    cluster = Cluster()
    cluster.run(300)
    the_leader = cluster.leader()
    stuck = next(node for node in cluster.ids if node != the_leader.node_id)
    later = the_leader.epoch + 1
    # it won pre-votes once but its vote requests were lost: a later epoch, no leader
    cluster.stores[stuck].state = store.ElectionState(later, voted_id=stuck)
    cluster.clients[stuck] = cluster.start(stuck)
    cluster.run(1000)
    # its pre-votes in that epoch move the others there, and an election follows
    epochs = {raft.epoch for raft in cluster.clients.values()}
    assert len(epochs) == 1 and epochs.pop() > later
    new_leader = cluster.leader()
    assert all(raft.leader_id == new_leader.node_id for raft in cluster.clients.values())


def test_a_diverging_fetch_truncates_the_followers_log() -> None:
    leader_log = memory_log.MemoryLog()
    leader_log.append_as_leader([b"a", b"b"], epoch=1)
    leader_log.append_as_leader([b"c"], epoch=3)
    follower_log = memory_log.MemoryLog()
    follower_log.append_as_leader([b"a", b"b"], epoch=1)
    follower_log.append_as_leader([b"x", b"y", b"z"], epoch=2)  # never committed
    quorum_store = store.MemoryQuorumStateStore()
    quorum_store.state = store.ElectionState(3, leader_id=2)
    raft = client.RaftClient(1, (1, 2, 3), follower_log, quorum_store, CONFIG, random.Random(0))
    [fetch] = sent(raft.poll(0))
    assert isinstance(fetch, messages.FetchRequest)
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (5, 2)
    validation = replication.validate_fetch(
        leader_log, fetch.fetch_offset, fetch.last_fetched_epoch
    )
    assert validation == replication.Diverging(messages.EpochEndOffset(1, 2))
    assert isinstance(validation, replication.Diverging)
    response = messages.FetchResponse(
        ErrorCode.none, 2, 3, high_watermark=2, diverging_epoch=validation.epoch_end
    )
    [again] = sent(raft.handle(messages.Envelope(2, 1, response, 1), 1))
    assert follower_log.end_offset == 2
    assert isinstance(again, messages.FetchRequest)
    assert (again.fetch_offset, again.last_fetched_epoch) == (2, 1)
    records = tuple(leader_log.read(2, 1000))
    response = messages.FetchResponse(ErrorCode.none, 2, 3, high_watermark=3, records=records)
    raft.handle(messages.Envelope(2, 1, response, 2), 2)
    assert [entry.data for entry in follower_log.entries()] == [b"a", b"b", b"c"]
    assert follower_log.flushed_end_offset == 3
    assert raft.high_watermark == 3


def test_a_fetch_below_the_log_start_gets_the_snapshot_in_chunks() -> None:
    cluster = Cluster()
    cluster.run(300)
    the_leader = cluster.leader()
    behind = next(node for node in cluster.ids if node != the_leader.node_id)
    cluster.down.add(behind)
    for index in range(20):
        the_leader.append([b"%d" % index])
        cluster.run(3)
    cluster.run(20)
    state = b"the state machine " * 100  # seven chunks
    snapshot_id = the_leader.create_snapshot(the_leader.delivered_offset, state)
    assert cluster.logs[the_leader.node_id].log_start_offset == snapshot_id.offset
    cluster.down.clear()
    cluster.effects[behind].clear()
    cluster.run(100)
    loaded = [
        action for action in cluster.effects[behind] if isinstance(action, actions.SnapshotLoaded)
    ]
    assert loaded == [actions.SnapshotLoaded(snapshot_id, state)]
    assert cluster.logs[behind].log_start_offset == snapshot_id.offset
    assert cluster.clients[behind].high_watermark == the_leader.high_watermark
    chunks = [
        envelope.message
        for envelope in cluster.delivered
        if isinstance(envelope.message, messages.FetchSnapshotResponse)
    ]
    assert [chunk.position for chunk in chunks] == list(range(0, len(state), 256))


def test_a_leader_without_fetches_from_a_majority_resigns() -> None:
    cluster = Cluster()
    cluster.run(300)
    the_leader = cluster.leader()
    cluster.down.update(node for node in cluster.ids if node != the_leader.node_id)
    cluster.run(CONFIG.check_quorum_timeout_ms + 1)
    assert isinstance(the_leader.state, states.ResignedState)
    assert actions.LeaderChanged(None, the_leader.epoch) in cluster.effects[the_leader.node_id]


def test_a_resigning_leader_hands_over_quickly() -> None:
    cluster = Cluster()
    cluster.run(300)
    the_leader = cluster.leader()
    epoch = the_leader.epoch
    outputs = the_leader.resign(cluster.now)
    assert {type(message) for message in sent(outputs)} == {messages.EndQuorumEpochRequest}
    cluster.route(the_leader.node_id, outputs)
    cluster.run(50)  # well under an election timeout
    new_leader = cluster.leader()
    assert new_leader is not the_leader and new_leader.epoch == epoch + 1


def test_a_duplicate_or_unexpected_response_is_ignored() -> None:
    raft = single()
    requests = [action for action in raft.poll(250) if isinstance(action, actions.Send)]
    assert all(isinstance(action.message, messages.VoteRequest) for action in requests)
    to_node_2 = next(action for action in requests if action.destination == 2)
    granted = messages.VoteResponse(ErrorCode.none, -1, 0, True)
    # an answer that does not carry the request's correlation id is not one
    raft.handle(messages.Envelope(2, 1, granted, to_node_2.correlation_id + 100), 251)
    assert isinstance(raft.state, states.ProspectiveState)
    raft.handle(messages.Envelope(2, 1, granted, to_node_2.correlation_id), 251)
    candidate = raft.state
    assert isinstance(candidate, states.CandidateState)
    # the same pre-vote answer again (a duplicate) must not count as a real vote
    raft.handle(messages.Envelope(2, 1, granted, to_node_2.correlation_id), 252)
    assert raft.state is candidate and candidate.votes.granted == {1}


def test_a_restart_loads_the_latest_snapshot_and_resumes_without_leading() -> None:
    log = memory_log.MemoryLog()
    log.append_as_leader([b"a", b"b", b"c"], epoch=1)
    log.flush()
    log.create_snapshot(raft_log.SnapshotId(2, 1), b"state")
    log.delete_before_snapshot()
    quorum_store = store.MemoryQuorumStateStore()
    quorum_store.state = store.ElectionState(1, leader_id=1)
    raft = client.RaftClient(1, (1, 2, 3), log.crash(), quorum_store, CONFIG, random.Random(0))
    outputs = raft.poll(0)
    assert outputs[0] == actions.SnapshotLoaded(raft_log.SnapshotId(2, 1), b"state")
    assert raft.high_watermark == 2
    assert isinstance(raft.state, states.ResignedState)
    assert not isinstance(raft.state, leader.LeaderState)


class VanishingLog(memory_log.MemoryLog):
    """A log whose entries can no longer be read (its files changed under it)."""

    vanished = False

    def read(self, start: int, max_bytes: int) -> list[raft_log.Entry]:
        return [] if self.vanished else super().read(start, max_bytes)


def test_entries_that_cannot_be_read_below_the_high_watermark_raise_not_spin() -> None:
    """Seen when a stopping process wrote into a restarted node's directory: the core
    looped at 100% CPU reading nothing forever. It must fail, and the driver stops the
    quorum with the reason."""
    log = VanishingLog()
    raft = client.RaftClient(1, (1,), log, store.MemoryQuorumStateStore(), CONFIG, random.Random(0))
    raft.poll(250)
    assert raft.is_leader
    raft.append([b"a"])
    log.vanished = True
    with pytest.raises(raft_log.UnreadableLogError, match="below the high watermark"):
        raft.poll(251)
