"""Partition reassignment over a real metadata log: AlterPartitionReassignments starts a
move (the union of replicas, adding and removing ones recorded), the AlterPartition that
brings the last adding replica into the ISR completes it, a null target cancels it, and
ListPartitionReassignments shows what runs; the state survives a replay of the log and a
snapshot."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from controller_node import NOW, ControllerNode
from kio.schema.errors import ErrorCode
from strom.cluster import image as images
from strom.cluster import (
    isr_changes,
    loader,
    reassignments,
    records,
    snapshots,
    topic_requests,
)

OK = reassignments.Outcome()


class Cluster(ControllerNode):
    """Controller 9 (hosting no replica) with brokers 1-4 registered and unfenced."""

    async def topic(self, name: str, *assignments: tuple[int, ...]) -> None:
        (created,) = await self.controller.create_topics(
            [topic_requests.NewTopic(name, assignments=assignments)]
        )
        assert created.error is None

    async def reassign(
        self, name: str, index: int, target: Sequence[int] | None, **options: bool
    ) -> reassignments.Outcome:
        outcomes = await self.controller.alter_partition_reassignments(
            {name: {index: target}}, **options
        )
        return outcomes[name][index]

    async def isr(self, name: str, index: int, isr: tuple[int, ...]) -> isr_changes.IsrOutcome:
        """The partition's leader proposes ``isr`` (a follower caught up)."""
        p = self.partition(name, index)
        topic_id = self.image.topics[name].topic_id
        change = isr_changes.IsrChange(topic_id, index, p.leader_epoch, p.partition_epoch, isr)
        (outcome,) = await self.controller.alter_partition(
            p.leader, self.epochs[p.leader], [change]
        )
        return outcome

    def partition(self, name: str, index: int = 0) -> images.PartitionImage:
        return self.image.topics[name].partitions[index]

    def listed(self, wanted: dict[str, list[int]] | None = None) -> dict[str, list[tuple]]:  # type: ignore[type-arg]
        return {
            name: [(p.index, p.replicas, p.adding_replicas, p.removing_replicas) for p in found]
            for name, found in self.controller.list_partition_reassignments(wanted).items()
        }


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    made = Cluster(tmp_path)
    for node_id in (1, 2, 3, 4):
        await made.join(node_id)
    yield made
    made.close()


def summary(p: images.PartitionImage) -> tuple[object, ...]:
    return (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas)


async def test_a_move_runs_on_the_union_until_the_new_replicas_are_in_sync(
    cluster: Cluster,
) -> None:
    await cluster.topic("t", (1, 2))
    before = cluster.partition("t")
    assert await cluster.reassign("t", 0, [2, 3]) == OK
    started = cluster.partition("t")
    # target first, then the replica being removed; the leader stays while it serves
    assert summary(started) == ((2, 3, 1), (1, 2), 1, (3,), (1,))
    assert started.leader_epoch == before.leader_epoch
    assert started.partition_epoch == before.partition_epoch + 1
    assert cluster.listed() == {"t": [(0, (2, 3, 1), (3,), (1,))]}

    # Broker 3 caught up: its joining the ISR completes the move, and the leader that was
    # removed hands over to the first target replica in sync.
    outcome = await cluster.isr("t", 0, (1, 2, 3))
    assert outcome.error == ErrorCode.new_leader_elected
    done = cluster.partition("t")
    assert summary(done) == ((2, 3), (2, 3), 2, (), ())
    assert done.leader_epoch == before.leader_epoch + 1
    assert cluster.listed() == {}


async def test_the_move_waits_for_every_adding_replica(cluster: Cluster) -> None:
    await cluster.topic("t", (1, 2))
    assert await cluster.reassign("t", 0, [3, 4]) == OK
    assert summary(cluster.partition("t")) == ((3, 4, 1, 2), (1, 2), 1, (3, 4), (1, 2))
    half = await cluster.isr("t", 0, (1, 2, 3))
    assert (half.error, half.isr) == (ErrorCode.none, (1, 2, 3))
    assert cluster.partition("t").adding_replicas == (3, 4)
    await cluster.isr("t", 0, (1, 2, 3, 4))
    assert summary(cluster.partition("t")) == ((3, 4), (3, 4), 3, (), ())


async def test_a_kept_leader_keeps_leading_with_a_new_epoch(cluster: Cluster) -> None:
    await cluster.topic("t", (1, 2))
    assert await cluster.reassign("t", 0, [1, 3]) == OK
    epoch = cluster.partition("t").leader_epoch
    outcome = await cluster.isr("t", 0, (1, 2, 3))
    assert (outcome.error, outcome.leader, outcome.isr) == (ErrorCode.none, 1, (1, 3))
    done = cluster.partition("t")
    assert summary(done) == ((1, 3), (1, 3), 1, (), ())
    # broker 2 left: the epoch goes up, so nothing fetches from or for it in the old one
    assert done.leader_epoch == epoch + 1 == outcome.leader_epoch


async def test_a_target_already_in_sync_completes_at_once(cluster: Cluster) -> None:
    await cluster.topic("reorder", (1, 2, 3))
    await cluster.topic("shrink", (1, 2, 3))
    assert await cluster.reassign("reorder", 0, [3, 2, 1]) == OK
    reordered = cluster.partition("reorder")
    assert summary(reordered) == ((3, 2, 1), (1, 2, 3), 1, (), ())
    assert reordered.leader_epoch == 0  # nobody left
    assert await cluster.reassign("shrink", 0, [2, 3]) == OK
    shrunk = cluster.partition("shrink")
    assert summary(shrunk) == ((2, 3), (2, 3), 2, (), ())
    assert shrunk.leader_epoch == 1
    assert cluster.listed() == {}


async def test_cancelling_restores_the_original_replicas(cluster: Cluster) -> None:
    await cluster.topic("t", (1, 2))
    original = cluster.partition("t")
    assert await cluster.reassign("t", 0, [3, 4]) == OK
    await cluster.isr("t", 0, (1, 2, 3))  # broker 3 had caught up; 4 had not
    assert await cluster.reassign("t", 0, None) == OK
    reverted = cluster.partition("t")
    assert summary(reverted) == ((1, 2), (1, 2), 1, (), ())
    assert reverted.leader_epoch == original.leader_epoch + 1  # 3 and 4 left
    assert cluster.listed() == {}
    again = await cluster.reassign("t", 0, None)
    assert again.error == ErrorCode.no_reassignment_in_progress


async def test_refusals_name_the_partition_and_leave_the_others_to_proceed(
    cluster: Cluster,
) -> None:
    await cluster.topic("t", (1, 2), (2, 3), (3, 1), (1, 3), (2, 1))
    before = cluster.image.offset
    outcomes = await cluster.controller.alter_partition_reassignments(
        {
            "t": {0: [1, 1], 1: [2, 7], 2: [], 3: [1, 2], 4: None, 9: [1]},
            "missing": {0: [1]},
        }
    )
    codes = {(t, i): o.error for t, got in outcomes.items() for i, o in got.items()}
    assert codes == {
        ("t", 0): ErrorCode.invalid_replica_assignment,
        ("t", 1): ErrorCode.invalid_replica_assignment,
        ("t", 2): ErrorCode.invalid_replica_assignment,
        ("t", 3): ErrorCode.none,
        ("t", 4): ErrorCode.no_reassignment_in_progress,
        ("t", 9): ErrorCode.unknown_topic_or_partition,
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert outcomes["t"][1].message == (
        "The manual partition assignment includes broker 7, but no such broker is registered."
    )
    assert cluster.image.offset == before + 1  # partition 3's reassignment alone
    assert cluster.partition("t", 3).replicas == (1, 2, 3)


async def test_the_replication_factor_may_be_held(cluster: Cluster) -> None:
    await cluster.topic("t", (1, 2))
    held = await cluster.reassign("t", 0, [1, 2, 3], allow_replication_factor_change=False)
    assert held.error == ErrorCode.invalid_replication_factor
    assert held.message == "The replication factor is changed from 2 to 3"
    assert await cluster.reassign("t", 0, [3, 4], allow_replication_factor_change=False) == OK
    grown = await cluster.reassign("t", 0, [1, 2, 3])
    assert grown == OK
    # A new target on a running move starts from the union (as Kafka's): 3 is a replica
    # already, so only 4 is recorded, as removing; it still completes once 3 is in sync.
    assert summary(cluster.partition("t")) == ((1, 2, 3, 4), (1, 2), 1, (), (4,))
    await cluster.isr("t", 0, (1, 2, 3))
    assert summary(cluster.partition("t")) == ((1, 2, 3), (1, 2, 3), 1, (), ())


async def test_listing_named_partitions_leaves_out_the_quiet_ones(cluster: Cluster) -> None:
    await cluster.topic("t", (1, 2), (2, 3))
    await cluster.topic("u", (1, 2))
    await cluster.reassign("t", 1, [3, 4])
    await cluster.reassign("u", 0, [3])
    assert cluster.listed({"t": [0, 1, 5], "nope": [0]}) == {"t": [(1, (3, 4, 2), (4,), (2,))]}
    assert set(cluster.listed()) == {"t", "u"}


async def test_a_running_reassignment_survives_a_replay_and_a_snapshot(
    cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.topic("t", (1, 2))
    await cluster.reassign("t", 0, [2, 3])
    replayed = loader.MetadataLoader(images.MetadataImage("cluster"))
    replayed.load(replayed.stage(cluster.log.read_committed()))
    assert replayed.image.topics["t"].partitions[0] == cluster.partition("t")
    data = snapshots.write_image(cluster.image, epoch=1, last_contained_timestamp_ms=NOW)
    restored = snapshots.read_image("cluster", data, cluster.image.offset + 1)
    assert restored.topics["t"].partitions[0] == cluster.partition("t")


def test_the_reassignment_fields_are_tagged_as_kafka_has_them() -> None:
    change = records.PartitionChangeRecord(
        partition_id=records.i32(0),
        topic_id=uuid.uuid4(),
        replicas=(records.i32(2), records.i32(3), records.i32(1)),
        removing_replicas=(records.i32(1),),
        adding_replicas=(records.i32(3),),
    )
    assert records.decode(records.encode(change)) == change
    plain = records.PartitionChangeRecord(partition_id=records.i32(0), topic_id=change.topic_id)
    # unset (null) fields are not written at all: tags 2-4 only when a reassignment changes
    assert len(records.encode(plain)) < len(records.encode(change))
    assert records.decode(records.encode(plain)).replicas is None
