"""Election states and their guarded transitions; the persisted election state."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from strom.cluster.raft import config, leader, memory_log, quorum, states, store

CONFIG = config.RaftConfig(election_timeout_ms=100, fetch_timeout_ms=200)
VOTERS = frozenset({1, 2, 3})


def new_quorum(
    persisted: store.ElectionState | None = None, node_id: int = 1
) -> tuple[quorum.QuorumState, store.MemoryQuorumStateStore]:
    quorum_store = store.MemoryQuorumStateStore()
    quorum_store.state = persisted
    state = quorum.QuorumState(
        node_id, VOTERS, quorum_store, memory_log.MemoryLog(), CONFIG, random.Random(0), 0
    )
    return state, quorum_store


def elected(node_id: int = 1) -> tuple[quorum.QuorumState, store.MemoryQuorumStateStore]:
    state, quorum_store = new_quorum(node_id=node_id)
    prospective = state.to_prospective(0)
    prospective.votes.record(2, granted=True)
    candidate = state.to_candidate(0)
    candidate.votes.record(2, granted=True)
    state.to_leader(0)
    return state, quorum_store


def test_a_fresh_node_is_unattached_in_epoch_0_with_a_randomized_election_timeout() -> None:
    state, _ = new_quorum()
    assert isinstance(state.state, states.UnattachedState)
    assert state.epoch == 0
    assert 100 <= state.state.election_deadline < 200


def test_pre_vote_keeps_the_epoch_and_a_won_pre_vote_bumps_it_with_a_persisted_self_vote() -> None:
    state, quorum_store = new_quorum()
    prospective = state.to_prospective(0)
    assert prospective.epoch == 0
    with pytest.raises(quorum.InvalidTransitionError):
        state.to_candidate(0)  # no majority of pre-votes yet
    prospective.votes.record(3, granted=True)
    candidate = state.to_candidate(0)
    assert candidate.epoch == 1
    assert quorum_store.state == store.ElectionState(1, voted_id=1)


def test_leading_takes_a_majority_of_votes() -> None:
    state, _ = new_quorum()
    state.to_prospective(0).votes.record(2, granted=True)
    candidate = state.to_candidate(0)
    candidate.votes.record(2, granted=False)
    with pytest.raises(quorum.InvalidTransitionError):
        state.to_leader(0)
    candidate.votes.record(3, granted=True)
    assert isinstance(state.to_leader(0), leader.LeaderState)


def test_a_leader_never_follows_another_in_its_own_epoch_nor_goes_back_an_epoch() -> None:
    state, quorum_store = elected()
    with pytest.raises(quorum.InvalidTransitionError):
        state.to_follower(1, 2, 0)
    with pytest.raises(quorum.InvalidTransitionError):
        state.to_unattached(0, 0)
    with pytest.raises(quorum.InvalidTransitionError):
        state.to_prospective(0)
    state.to_follower(2, 2, 0)
    assert quorum_store.state == store.ElectionState(2, leader_id=2)


def test_one_vote_per_epoch() -> None:
    state, quorum_store = new_quorum()
    state.to_unattached(4, 0, voted_id=2)
    assert quorum_store.state == store.ElectionState(4, voted_id=2)
    with pytest.raises(quorum.InvalidTransitionError):
        state.to_unattached(4, 0, voted_id=3)
    # the vote survives pre-voting in the same epoch
    prospective = state.to_prospective(0)
    assert prospective.voted_id == 2
    assert prospective.can_grant_vote(2) and not prospective.can_grant_vote(3)


def test_one_leader_per_epoch_for_a_follower() -> None:
    state, _ = new_quorum()
    state.to_follower(3, 2, 0)
    assert state.to_follower(3, 2, 0) is state.state  # the same leader again: no change
    with pytest.raises(quorum.InvalidTransitionError):
        state.to_follower(3, 3, 0)
    # a silent leader: pre-vote, remembering the leader of the epoch
    prospective = state.to_prospective(0)
    assert prospective.leader_id == 2
    assert not prospective.can_grant_vote(3)
    with pytest.raises(quorum.InvalidTransitionError):
        state.to_follower(3, 3, 0)
    state.to_follower(3, 2, 0)


def test_only_a_leader_resigns_and_a_resigned_leader_never_leads_the_epoch_again() -> None:
    state, _ = new_quorum()
    with pytest.raises(quorum.InvalidTransitionError):
        state.to_resigned(0)
    state, _ = elected()
    resigned = state.to_resigned(0)
    assert resigned.unacknowledged == {2, 3}
    with pytest.raises(quorum.InvalidTransitionError):
        state.to_leader(0)
    with pytest.raises(quorum.InvalidTransitionError):
        state.to_follower(1, 2, 0)
    prospective = state.to_prospective(0)
    assert not prospective.can_grant_vote(2)


def test_a_restart_resumes_from_the_persisted_state() -> None:
    restarted, _ = new_quorum(store.ElectionState(5, leader_id=1))
    assert isinstance(restarted.state, states.ResignedState)  # it was the leader
    restarted, _ = new_quorum(store.ElectionState(5, leader_id=2))
    assert isinstance(restarted.state, states.FollowerState)
    assert restarted.state.leader_id == 2
    restarted, _ = new_quorum(store.ElectionState(5, voted_id=3))
    assert isinstance(restarted.state, states.UnattachedState)
    assert (restarted.epoch, restarted.state.voted_id) == (5, 3)


def test_a_follower_grants_pre_votes_only_once_its_leader_is_silent() -> None:
    follower = states.FollowerState(1, 2, fetch_deadline=200, fetch_timeout_ms=200)
    assert follower.can_grant_pre_vote(0)  # it has not heard from the leader yet
    follower.last_fetch_ms = 100
    assert not follower.can_grant_pre_vote(250)
    assert follower.can_grant_pre_vote(300)
    follower.leader_resigned = True
    assert follower.can_grant_pre_vote(150)


def test_the_high_watermark_waits_for_an_entry_of_the_leaders_epoch() -> None:
    state = leader.LeaderState(
        epoch=3,
        node_id=1,
        voters=VOTERS,
        epoch_start_offset=10,
        check_quorum_deadline=300,
        check_quorum_timeout_ms=300,
    )
    state.update_local(11)
    # a majority has the old entries, not yet the epoch's LeaderChange at 10
    assert not state.update_replica(2, 10, now_ms=0)
    assert state.high_watermark is None
    assert state.update_replica(2, 11, now_ms=0)
    assert state.high_watermark == 11
    # a reordered older fetch moves nothing back
    assert not state.update_replica(2, 5, now_ms=1)
    assert state.high_watermark == 11


def test_check_quorum_needs_fetches_from_a_majority() -> None:
    state = leader.LeaderState(
        3, 1, VOTERS, 0, check_quorum_deadline=300, check_quorum_timeout_ms=300
    )
    assert not state.check_quorum_expired(299)
    state.heard_from(2, 250)
    assert not state.check_quorum_expired(500)
    assert state.check_quorum_expired(550)


def test_the_file_store_writes_kafkas_quorum_state_json(tmp_path: Path) -> None:
    path = tmp_path / store.FILE_NAME
    file_store = store.FileQuorumStateStore(path)
    assert file_store.read() is None
    file_store.write(store.ElectionState(7, voted_id=2))
    assert json.loads(path.read_text()) == {
        "leaderId": -1,
        "leaderEpoch": 7,
        "votedId": 2,
        "data_version": 1,
    }
    file_store.write(store.ElectionState(8, leader_id=3))
    assert store.FileQuorumStateStore(path).read() == store.ElectionState(8, leader_id=3)
    assert not list(tmp_path.glob("*.tmp"))


def test_a_corrupt_quorum_state_file_refuses_to_start(tmp_path: Path) -> None:
    path = tmp_path / store.FILE_NAME
    path.write_text("{not json")
    with pytest.raises(store.CorruptQuorumStateError):
        store.FileQuorumStateStore(path).read()
