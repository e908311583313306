"""A member's way to its target assignment (Kafka's CurrentAssignmentBuilder): it revokes
before it moves to the new epoch, and gets a partition only once nobody else holds it."""

from __future__ import annotations

import uuid

from strom.coordinator import reconciliation
from strom.coordinator.consumer_group import ConsumerMember, MemberState

T = uuid.UUID(int=7)


def free(topic_id: uuid.UUID, partition: int) -> int:
    return -1


def held_by_epoch_3(topic_id: uuid.UUID, partition: int) -> int:
    return 3


def test_a_stable_member_at_the_target_epoch_is_left_alone() -> None:
    member = ConsumerMember("m", member_epoch=5, assigned={T: frozenset({0})})
    assert reconciliation.reconcile(member, 5, {T: frozenset({1})}, free, None) is member


def test_new_free_partitions_come_with_the_target_epoch() -> None:
    member = ConsumerMember("m", member_epoch=1, assigned={T: frozenset({0})})
    moved = reconciliation.reconcile(member, 2, {T: frozenset({0, 1})}, free, [(T, [0])])
    assert (moved.member_epoch, moved.previous_member_epoch, moved.state) == (
        2,
        1,
        MemberState.STABLE,
    )
    assert moved.assigned == {T: frozenset({0, 1})}


def test_partitions_to_give_up_are_revoked_first_in_the_same_epoch() -> None:
    member = ConsumerMember("m", member_epoch=1, assigned={T: frozenset({0, 1, 2})})
    asked = reconciliation.reconcile(member, 2, {T: frozenset({0})}, free, [(T, [0, 1, 2])])
    assert asked.state == MemberState.UNREVOKED_PARTITIONS
    assert asked.member_epoch == 1
    assert asked.assigned == {T: frozenset({0})}
    assert asked.pending_revocation == {T: frozenset({1, 2})}
    # still listing a revoked partition: no progress
    still = reconciliation.reconcile(asked, 2, {T: frozenset({0})}, free, [(T, [0, 2])])
    assert still is asked
    # a heartbeat without the owned partitions tells nothing: no progress either
    assert reconciliation.reconcile(asked, 2, {T: frozenset({0})}, free, None) is asked
    done = reconciliation.reconcile(asked, 2, {T: frozenset({0})}, free, [(T, [0])])
    assert (done.state, done.member_epoch, done.assigned) == (
        MemberState.STABLE,
        2,
        {T: frozenset({0})},
    )
    assert done.pending_revocation == {}


def test_a_partition_another_member_still_holds_waits_unreleased() -> None:
    member = ConsumerMember("m", member_epoch=1, assigned={})
    waiting = reconciliation.reconcile(member, 2, {T: frozenset({4})}, held_by_epoch_3, [])
    assert (waiting.state, waiting.member_epoch, waiting.assigned) == (
        MemberState.UNRELEASED_PARTITIONS,
        2,
        {},
    )
    released = reconciliation.reconcile(waiting, 2, {T: frozenset({4})}, free, [])
    assert (released.state, released.assigned) == (MemberState.STABLE, {T: frozenset({4})})


def test_a_member_that_already_dropped_the_partitions_moves_on_at_once() -> None:
    # a rejoining member (epoch 0, owns nothing) with a stale assignment
    member = ConsumerMember("m", member_epoch=0, assigned={T: frozenset({0, 1})})
    moved = reconciliation.reconcile(member, 4, {T: frozenset({1, 2})}, free, [])
    assert (moved.state, moved.member_epoch, moved.assigned) == (
        MemberState.STABLE,
        4,
        {T: frozenset({1, 2})},
    )
