"""A consumer group written to `__consumer_offsets` and replayed comes back the same:
epochs, subscriptions (a classic member's protocols too), targets, current assignments;
a member's tombstones remove it, the group's remove the group."""

from __future__ import annotations

import uuid

from strom.coordinator import consumer_group as model
from strom.coordinator import consumer_records
from strom.coordinator import group as group_model

T = uuid.UUID(int=5)


def replayed(entries: list[consumer_records.Entry]) -> dict[str, group_model.Group]:
    groups: dict[str, group_model.Group] = {}
    for key, value in entries:
        assert consumer_records.is_consumer_key(key)
        consumer_records.replay(
            groups, key, value, lambda gid: groups.setdefault(gid, group_model.Group(gid, 0))
        )
    return groups


def test_a_group_comes_back_from_its_records() -> None:
    consumer = model.ConsumerMember(
        "m1",
        instance_id="i1",
        client_id="c1",
        client_host="/10.0.0.1",
        subscribed_topics=("orders",),
        subscribed_regex="ord.*",
        server_assignor="range",
        rebalance_timeout_ms=30_000,
        member_epoch=4,
        previous_member_epoch=3,
        state=model.MemberState.UNREVOKED_PARTITIONS,
        assigned={T: frozenset({0})},
        pending_revocation={T: frozenset({1})},
    )
    classic = model.ConsumerMember(
        "m2",
        client_id="c2",
        client_host="/10.0.0.2",
        subscribed_topics=("orders",),
        rebalance_timeout_ms=60_000,
        member_epoch=4,
        previous_member_epoch=4,
        classic=model.ClassicMemberInfo(10_000, (("range", b"\x00\x01subscription"),)),
    )
    entries = [
        consumer_records.group_epoch("g", 5),
        consumer_records.subscription_metadata("g", {"orders": model.TopicMetadata(T, 2)}),
        consumer_records.target_epoch("g", 5),
    ]
    for member in (consumer, classic):
        entries.append(consumer_records.member_metadata("g", member))
        entries.append(consumer_records.target_member("g", member.member_id, {T: frozenset({1})}))
        entries.append(consumer_records.current_assignment("g", member))
    group = replayed(entries)["g"].consumer
    assert group is not None
    assert (group.group_epoch, group.assignment_epoch) == (5, 5)
    assert group.subscription_metadata == {"orders": model.TopicMetadata(T, 2)}
    assert group.members == {"m1": consumer, "m2": classic}
    assert group.target == {"m1": {T: frozenset({1})}, "m2": {T: frozenset({1})}}
    assert group.static_members == {"i1": "m1"}
    assert group.owner_epoch(T, 1) == 4  # still held until m1 revokes it

    left = replayed(entries + consumer_records.member_tombstones("g", "m1"))["g"].consumer
    assert left is not None and set(left.members) == {"m2"} and set(left.target) == {"m2"}
    gone = replayed(
        entries
        + consumer_records.member_tombstones("g", "m1")
        + consumer_records.member_tombstones("g", "m2")
        + consumer_records.group_tombstones("g")
    )
    assert gone["g"].consumer is None
