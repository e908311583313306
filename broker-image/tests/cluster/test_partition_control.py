"""The controller's side of replication over a real metadata log: AlterPartition's
validation and commit, controlled shutdown, ElectLeaders and the leader rebalance."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from controller_node import ControllerNode
from kio.schema.errors import ErrorCode
from strom.cluster import (
    isr_changes,
    leader_election,
    topic_requests,
)


class Cluster(ControllerNode):
    """Controller 9 with brokers 1-3 registered and unfenced."""

    async def topic(self, name: str, *assignments: tuple[int, ...]) -> uuid.UUID:
        """A topic with these replicas, every replica in the ISR (a new topic's
        replicas are all in sync: nothing is written yet)."""
        (created,) = await self.controller.create_topics(
            [topic_requests.NewTopic(name, assignments=assignments)]
        )
        assert created.error is None and created.topic_id is not None
        for index, replicas in enumerate(assignments):
            assert self.state(name, index)[:2] == (replicas[0], replicas)
        return created.topic_id

    async def alter(
        self,
        leader: int,
        topic_id: uuid.UUID,
        index: int,
        isr: tuple[int, ...],
        *,
        leader_epoch: int | None = None,
        partition_epoch: int | None = None,
    ) -> list[isr_changes.IsrOutcome]:
        topic = self.image.topic_by_id(topic_id)
        current = topic.partitions.get(index) if topic is not None else None
        change = isr_changes.IsrChange(
            topic_id,
            index,
            current.leader_epoch if leader_epoch is None and current else leader_epoch or 0,
            current.partition_epoch
            if partition_epoch is None and current
            else partition_epoch or 0,
            isr,
        )
        return await self.controller.alter_partition(leader, self.epochs[leader], [change])

    def state(self, name: str, index: int = 0) -> tuple[int, tuple[int, ...], int, int]:
        p = self.image.topics[name].partitions[index]
        return p.leader, p.isr, p.leader_epoch, p.partition_epoch

    def close(self) -> None:
        self.log.close()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    made = Cluster(tmp_path)
    for node_id in (1, 2, 3):
        await made.join(node_id)
    yield made
    made.close()


async def test_an_isr_change_commits_one_record_and_bumps_the_partition_epoch(
    cluster: Cluster,
) -> None:
    await cluster.topic("t", (1, 2, 3))
    assert cluster.state("t") == (1, (1, 2, 3), 0, 0)
    topic_id = cluster.image.topics["t"].topic_id
    before = cluster.image.offset
    (shrunk,) = await cluster.alter(1, topic_id, 0, (1, 3))
    assert (shrunk.error, shrunk.isr, shrunk.partition_epoch, shrunk.leader_epoch) == (
        ErrorCode.none,
        (1, 3),
        1,
        0,
    )
    assert cluster.state("t") == (1, (1, 3), 0, 1)
    assert cluster.image.offset == before + 1
    # The same ISR again: the current state, no record.
    (same,) = await cluster.alter(1, topic_id, 0, (1, 3))
    assert (same.error, same.partition_epoch) == (ErrorCode.none, 1)
    assert cluster.image.offset == before + 1


async def test_isr_changes_are_refused_as_kafka_refuses_them(cluster: Cluster) -> None:
    topic_id = await cluster.topic("t", (1, 2, 3))

    async def error(leader: int, isr: tuple[int, ...], **epochs: int) -> ErrorCode:
        (outcome,) = await cluster.alter(leader, topic_id, 0, isr, **epochs)
        return outcome.error

    assert await error(1, (1, 2), partition_epoch=-1) == ErrorCode.invalid_update_version
    assert await error(1, (1, 2), leader_epoch=1) == ErrorCode.not_controller  # newer
    assert await error(2, (1, 2)) == ErrorCode.invalid_request  # not the leader
    assert await error(1, (1, 4)) == ErrorCode.invalid_request  # 4 is no replica
    assert await error(1, (2, 3)) == ErrorCode.invalid_request  # without the leader
    unknown = await cluster.alter(1, uuid.uuid4(), 0, (1,))
    assert unknown[0].error == ErrorCode.unknown_topic_id
    (missing,) = await cluster.alter(1, topic_id, 5, (1,))
    assert missing.error == ErrorCode.unknown_topic_or_partition
    stale = await cluster.controller.alter_partition(
        1, cluster.epochs[1] + 1, [isr_changes.IsrChange(topic_id, 0, 0, 1, (1, 2))]
    )
    assert [o.error for o in stale] == [ErrorCode.stale_broker_epoch]
    assert cluster.state("t") == (1, (1, 2, 3), 0, 0)  # nothing changed

    # An older leader epoch once the leadership moved away and back: FENCED_LEADER_EPOCH.
    await cluster.heartbeat(1, fence=True)
    await cluster.heartbeat(1)
    preferred = leader_election.ElectionType.PREFERRED
    assert await cluster.controller.elect_leaders(preferred, {"t": [0]}) == {
        "t": {0: ErrorCode.preferred_leader_not_available}  # 1 is not in the ISR now
    }
    assert cluster.state("t")[:3] == (2, (2, 3), 1)
    (grown,) = await cluster.alter(2, topic_id, 0, (2, 3, 1))
    assert grown.error == ErrorCode.none
    assert await cluster.controller.elect_leaders(preferred, {"t": [0]}) == {
        "t": {0: ErrorCode.none}
    }
    assert cluster.state("t")[:3] == (1, (2, 3, 1), 2)
    assert await error(1, (1, 2, 3), leader_epoch=1) == ErrorCode.fenced_leader_epoch


async def test_a_fenced_or_shutting_down_broker_may_not_join_an_isr(cluster: Cluster) -> None:
    topic_id = await cluster.topic("t", (1, 2, 3))
    (shrunk,) = await cluster.alter(1, topic_id, 0, (1,))
    assert shrunk.error == ErrorCode.none
    await cluster.heartbeat(2, shut_down=True)  # leads nothing: fenced at once
    assert cluster.image.brokers[2].fenced
    (refused,) = await cluster.alter(1, topic_id, 0, (1, 2))
    assert refused.error == ErrorCode.ineligible_replica

    await cluster.topic("u", (3, 1))
    assert cluster.image.topics["u"].partitions[0].isr == (3, 1)
    answer = await cluster.heartbeat(3, shut_down=True)  # leads u-0: controlled shutdown
    assert cluster.image.brokers[3].in_controlled_shutdown and not answer.should_shut_down
    (again,) = await cluster.alter(1, topic_id, 0, (1, 3))
    assert again.error == ErrorCode.ineligible_replica


async def test_controlled_shutdown_moves_leaderships_before_letting_the_broker_go(
    cluster: Cluster,
) -> None:
    await cluster.topic("t", (1, 2, 3), (2, 3, 1), (1, 3, 2))
    await cluster.topic("alone", (1,))
    answer = await cluster.heartbeat(1, shut_down=True)
    assert (answer.should_shut_down, answer.is_fenced) == (False, False)
    broker = cluster.image.brokers[1]
    assert broker.in_controlled_shutdown and not broker.fenced
    # Its leaderships went to the next in-sync replica (leader epoch bumped), it left the
    # ISRs, and the partition it alone had went offline, as Kafka's controller does.
    assert cluster.state("t", 0) == (2, (2, 3), 1, 1)
    assert cluster.state("t", 1) == (2, (2, 3), 0, 1)
    assert cluster.state("t", 2) == (3, (3, 2), 1, 1)
    assert cluster.state("alone") == (-1, (1,), 1, 1)

    # Not yet: brokers 2 and 3 have not reported that metadata.
    assert not (await cluster.heartbeat(1, shut_down=True)).should_shut_down
    await cluster.heartbeat(2)
    await cluster.heartbeat(3)
    leaving = await cluster.heartbeat(1, shut_down=True)
    assert leaving.should_shut_down and cluster.image.brokers[1].fenced

    # Restarted, it is a new incarnation: not in controlled shutdown.
    await cluster.join(1)
    assert cluster.image.is_active_broker(1)
    assert cluster.state("alone")[0] == 1  # unfenced: its offline partition is back


async def test_a_single_broker_that_leads_alone_is_let_go_at_once(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    try:
        await cluster.join(1)
        await cluster.topic("t", (1,))
        answer = await cluster.heartbeat(1, shut_down=True)
        assert answer.should_shut_down
        assert cluster.state("t")[0] == 1  # nobody else could lead: it keeps it
    finally:
        cluster.close()


async def test_elect_leaders_and_the_rebalance_give_partitions_back_to_preferred_replicas(
    cluster: Cluster,
) -> None:
    await cluster.topic("t", (1, 2), (2, 1), (3, 1))
    await cluster.heartbeat(1, fence=True)
    await cluster.heartbeat(1)  # back, but no longer leader of t-0 (2 took it)
    await cluster.alter(2, cluster.image.topics["t"].topic_id, 0, (2, 1))
    assert cluster.state("t", 0)[0] == 2
    preferred = leader_election.ElectionType.PREFERRED
    outcomes = await cluster.controller.elect_leaders(preferred, {"t": [0, 1, 9], "x": [0]})
    assert outcomes == {
        "t": {
            0: ErrorCode.none,
            1: ErrorCode.election_not_needed,
            9: ErrorCode.unknown_topic_or_partition,
        },
        "x": {0: ErrorCode.unknown_topic_or_partition},
    }
    assert cluster.state("t", 0)[:3] == (1, (2, 1), 2)
    unclean = leader_election.ElectionType.UNCLEAN
    assert await cluster.controller.elect_leaders(unclean, None) == {"t": {}}


async def test_the_rebalance_moves_leaders_only_above_the_imbalance_percentage(
    cluster: Cluster,
) -> None:
    topic_id = await cluster.topic("t", *[(1, 2)] * 10, *[(2, 1)] * 10)
    await cluster.heartbeat(1, fence=True)
    await cluster.heartbeat(1)
    for index in range(10):  # broker 1 caught up again
        await cluster.alter(2, topic_id, index, (2, 1))
    # Broker 2 leads everything; broker 1 leads none of its 10 preferred partitions.
    assert {cluster.state("t", i)[0] for i in range(20)} == {2}
    assert await cluster.controller.balance_leaders() == 10
    assert [cluster.state("t", i)[0] for i in range(20)] == [1] * 10 + [2] * 10
    assert await cluster.controller.balance_leaders() == 0
