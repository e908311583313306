"""An observer (a broker-only node: not a voter) asks a voter who leads, follows that
leader's log without ever standing for election or counting for the high watermark, and
when its leader goes silent asks the voters again and follows the next one."""

from __future__ import annotations

import random

from strom.cluster.raft import actions, client, memory_log, states, store
from test_client import CONFIG, Cluster

OBSERVER = 4


def with_observer(voters: int = 3) -> Cluster:
    cluster = Cluster(voters)
    voter_ids = list(cluster.ids)
    cluster.logs[OBSERVER] = memory_log.MemoryLog()
    cluster.stores[OBSERVER] = store.MemoryQuorumStateStore()
    cluster.clients[OBSERVER] = client.RaftClient(
        OBSERVER,
        voter_ids,
        cluster.logs[OBSERVER],
        cluster.stores[OBSERVER],
        CONFIG,
        random.Random(OBSERVER),
    )
    cluster.effects[OBSERVER] = []
    cluster.ids.append(OBSERVER)
    return cluster


def applied(cluster: Cluster, node: int) -> list[bytes]:
    return [
        entry.data
        for action in cluster.effects[node]
        if isinstance(action, actions.Committed)
        for entry in action.entries
    ]


def assert_follows(cluster: Cluster, leader: client.RaftClient, data: bytes) -> None:
    """The observer knows `leader` and applies what it appends."""
    observer = cluster.clients[OBSERVER]
    assert observer.leader_and_epoch == (leader.node_id, leader.epoch)
    offset = leader.append([data])
    assert isinstance(offset, int)
    cluster.run(30)
    assert observer.high_watermark == offset + 1
    assert applied(cluster, OBSERVER)[-1] == data


def test_an_observer_finds_the_leader_and_follows_its_log() -> None:
    cluster = with_observer()
    cluster.run(400)
    assert_follows(cluster, cluster.leader(), b"x")
    assert applied(cluster, OBSERVER) == [b"x"]
    assert not any(
        isinstance(e.message, client.messages.VoteRequest) and e.source == OBSERVER
        for e in cluster.delivered
    )


def test_an_observer_follows_the_next_leader_when_its_leader_dies() -> None:
    cluster = with_observer()
    cluster.run(400)
    first = cluster.leader()
    cluster.down.add(first.node_id)
    cluster.run(2000)
    second = cluster.leader()
    assert second.node_id != first.node_id
    assert_follows(cluster, second, b"after")


def test_an_observer_alone_never_stands_for_election() -> None:
    cluster = with_observer()
    cluster.down.update({1, 2, 3})
    cluster.run(3000)
    observer = cluster.clients[OBSERVER]
    assert isinstance(observer.state, states.UnattachedState)
    assert observer.epoch == 0
