"""Clean elections from the ISR when brokers are fenced and unfenced (Kafka's rules)."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64
from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import leader_election, records


def image_with(*partitions: tuple[tuple[int, ...], tuple[int, ...], int]) -> images.MetadataImage:
    """Brokers 1-3 registered and unfenced, and topic t with the given (replicas, isr,
    leader) per partition."""
    delta = deltas.MetadataDelta(images.MetadataImage("c"))
    for node_id in (1, 2, 3):
        delta.replay(
            records.RegisterBrokerRecord(
                broker_id=i32(node_id),
                incarnation_id=uuid.uuid4(),
                broker_epoch=i64(node_id),
                end_points=(),
                rack=None,
                fenced=False,
            )
        )
    topic_id = uuid.uuid4()
    delta.replay(records.TopicRecord(name="t", topic_id=topic_id))
    for index, (replicas, isr, leader) in enumerate(partitions):
        delta.replay(
            records.PartitionRecord(
                partition_id=i32(index),
                topic_id=topic_id,
                replicas=tuple(i32(r) for r in replicas),
                isr=tuple(i32(r) for r in isr),
                leader=i32(leader),
                leader_epoch=i32(0),
                partition_epoch=i32(0),
            )
        )
    return delta.apply()


def applied(
    image: images.MetadataImage, changes: list[records.PartitionChangeRecord]
) -> images.MetadataImage:
    delta = deltas.MetadataDelta(image)
    for change in changes:
        delta.replay(change)
    return delta.apply()


def states(image: images.MetadataImage) -> list[tuple[int, tuple[int, ...], int]]:
    topic = image.topics["t"]
    return [
        (p.leader, p.isr, p.leader_epoch)
        for p in (topic.partitions[i] for i in sorted(topic.partitions))
    ]


def test_a_fenced_leader_is_replaced_by_the_next_in_sync_replica() -> None:
    image = image_with(((1, 2, 3), (1, 2, 3), 1), ((2, 1), (2, 1), 2), ((3,), (3,), 3))
    after = applied(image, leader_election.after_fencing(image, {1}))
    assert states(after) == [(2, (2, 3), 1), (2, (2,), 0), (3, (3,), 0)]


def test_a_last_in_sync_replica_keeps_its_place_and_leads_again_when_back() -> None:
    image = image_with(((1, 2), (1,), 1))
    offline = applied(image, leader_election.after_fencing(image, {1}))
    assert states(offline) == [(leader_election.NO_LEADER, (1,), 1)]
    # broker 2 is not in sync: it never becomes the leader (no unclean election)
    assert leader_election.after_unfencing(offline, 2) == []
    back = applied(offline, leader_election.after_unfencing(offline, 1))
    assert states(back) == [(1, (1,), 2)]


def test_brokers_that_change_nothing_make_no_records() -> None:
    image = image_with(((2, 3), (2, 3), 2))
    assert leader_election.after_fencing(image, {1}) == []
    assert leader_election.after_unfencing(image, 1) == []


def test_an_unclean_election_takes_any_live_replica_alone_in_the_isr() -> None:
    image = image_with(((1, 2), (1,), 1))
    after = applied(image, leader_election.after_fencing(image, {1}, lambda topic: True))
    assert states(after) == [(2, (2,), 1)]
    # and an offline partition of such a topic takes any replica that comes back
    offline = applied(image, leader_election.after_fencing(image, {1}))
    back = applied(offline, leader_election.after_unfencing(offline, 2, lambda topic: True))
    assert states(back) == [(2, (2,), 2)]


def test_the_rebalance_waits_until_a_broker_is_imbalanced_beyond_the_percentage() -> None:
    # Broker 1 is the preferred replica of 20 partitions; 2 leads `moved` of them.
    def moved_back(moved: int) -> int:
        image = image_with(*[((1, 2), (1, 2), 2 if i < moved else 1) for i in range(20)])
        return len(leader_election.rebalance(image, 10))

    assert moved_back(2) == 0  # 10 %: not above leader.imbalance.per.broker.percentage
    assert moved_back(3) == 3  # 15 %


def test_a_preferred_election_needs_the_preferred_replica_active_and_in_sync() -> None:
    image = image_with(((1, 2), (2,), 2), ((1, 2), (1, 2), 1), ((3, 2), (3, 2), 2))
    topic = image.topics["t"]
    preferred = leader_election.ElectionType.PREFERRED
    codes = [
        leader_election.elect(image, topic, p, preferred)[0] for p in topic.partitions.values()
    ]
    assert codes == [
        ErrorCode.preferred_leader_not_available,
        ErrorCode.election_not_needed,
        ErrorCode.none,
    ]
