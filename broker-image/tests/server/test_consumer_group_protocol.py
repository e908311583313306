"""KIP-848's consumer group protocol through the broker's handlers, with requests encoded
as a client encodes them: joining, the revoke-then-assign hand-over between members,
fencing, leaving, session expiry, the member checks of OffsetCommit/OffsetFetch, the
describe and list APIs, and an Empty classic group that becomes a consumer group."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from broker_calls import call, create_topic, loaded
from kio.schema.errors import ErrorCode
from strom.coordinator import offsets_records
from strom.server import broker as broker_module

HEARTBEAT = 68
DESCRIBE = 69
GROUP = "g1"


@pytest.fixture(autouse=True)
async def coordinator_ready(broker: broker_module.Broker) -> None:
    """__consumer_offsets exists, as FindCoordinator makes it before a client joins (its
    partitions coming here reload their groups)."""
    await call(broker, 10, 4, {"key_type": 0, "coordinator_keys": [GROUP]})


def orders_id(broker: broker_module.Broker) -> uuid.UUID:
    return broker.context.image.topics["orders"].topic_id


async def heartbeat(
    broker: broker_module.Broker,
    member_id: str,
    epoch: int,
    owned: list[int] | None = None,
    **fields: Any,
) -> Any:
    body: dict[str, Any] = {
        "group_id": GROUP,
        "member_id": member_id,
        "member_epoch": epoch,
        "topic_partitions": None
        if owned is None
        else [{"topic_id": orders_id(broker), "partitions": owned}],
        **fields,
    }
    if epoch == 0:
        body.update(rebalance_timeout=30_000, subscribed_topic_names=["orders"])
        body["topic_partitions"] = []
    return await call(broker, HEARTBEAT, 1, body)


def partitions(response: Any) -> list[int] | None:
    if response.assignment is None:
        return None
    return sorted(p for t in response.assignment.topic_partitions for p in t.partitions)


async def test_members_hand_partitions_over_only_after_revoking_them(
    broker: broker_module.Broker,
) -> None:
    first = await heartbeat(broker, "m1", 0)
    assert first.error_code == ErrorCode.none
    assert (first.member_epoch, partitions(first)) == (1, [0, 1])
    assert first.heartbeat_interval.total_seconds() == 5

    # A second member: the group epoch moves to 2, but m1 still holds both partitions,
    # so m2 gets the new epoch and nothing yet.
    second = await heartbeat(broker, "m2", 0)
    assert (second.member_epoch, partitions(second)) == (2, [])
    # m1 is asked to revoke one partition and stays in epoch 1 until it has.
    asked = await heartbeat(broker, "m1", 1, owned=[0, 1])
    assert asked.member_epoch == 1
    kept = partitions(asked)
    assert kept is not None and len(kept) == 1
    given = ({0, 1} - set(kept)).pop()
    assert partitions(await heartbeat(broker, "m2", 2, owned=[])) is None  # still held
    revoked = await heartbeat(broker, "m1", 1, owned=kept)
    assert revoked.member_epoch == 2
    took = await heartbeat(broker, "m2", 2, owned=[])
    assert (took.member_epoch, partitions(took)) == (2, [given])

    # m2 leaves: m1 gets everything back with the next epoch.
    left = await heartbeat(broker, "m2", -1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    back = await heartbeat(broker, "m1", 2, owned=kept)
    assert (back.member_epoch, partitions(back)) == (3, [0, 1])


async def test_fencing_of_unknown_members_and_wrong_epochs(broker: broker_module.Broker) -> None:
    assert (await heartbeat(broker, "m1", 0)).member_epoch == 1
    assert (await heartbeat(broker, "ghost", 1)).error_code == ErrorCode.unknown_member_id
    assert (await heartbeat(broker, "m1", 7, owned=[0, 1])).error_code == (
        ErrorCode.fenced_member_epoch
    )
    assert (await heartbeat(broker, "m2", 0)).member_epoch == 2
    # the previous epoch with no more than its assignment: the bumped answer got lost
    late = await heartbeat(broker, "m2", 0, owned=None)
    assert late.error_code == ErrorCode.none
    unsupported = await heartbeat(broker, "m3", 0, server_assignor="sticky")
    assert unsupported.error_code == ErrorCode.unsupported_assignor
    invalid = await call(
        broker,
        HEARTBEAT,
        1,
        {"group_id": GROUP, "member_id": "m4", "member_epoch": 0, "topic_partitions": []},
    )
    assert invalid.error_code == ErrorCode.invalid_request


async def test_a_member_without_heartbeats_expires(broker: broker_module.Broker) -> None:
    assert (await heartbeat(broker, "m1", 0)).member_epoch == 1
    now = broker.context.clock.time_ms()
    broker.groups.tick(now + 44_000)
    assert "m1" in broker.groups.groups[GROUP].consumer.members  # type: ignore[union-attr]
    broker.groups.tick(now + 46_000)
    assert (await heartbeat(broker, "m1", 1, owned=[0, 1])).error_code == (
        ErrorCode.unknown_member_id
    )


async def test_offset_commit_and_fetch_check_the_member_epoch(
    broker: broker_module.Broker,
) -> None:
    assert (await heartbeat(broker, "m1", 0)).member_epoch == 1

    async def commit(member_id: str, epoch: int, version: int = 9) -> ErrorCode:
        response = await call(
            broker,
            8,
            version,
            {
                "group_id": GROUP,
                "generation_id_or_member_epoch": epoch,
                "member_id": member_id,
                "group_instance_id": None,
                "topics": [
                    {
                        "name": "orders",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 5,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            },
        )
        return ErrorCode(response.topics[0].partitions[0].error_code)

    assert await commit("m1", 0) == ErrorCode.stale_member_epoch
    assert await commit("m1", 0, version=8) == ErrorCode.illegal_generation
    assert await commit("ghost", 1) == ErrorCode.unknown_member_id
    assert await commit("", -1) == ErrorCode.unknown_member_id  # the group has members
    assert await commit("m1", 1) == ErrorCode.none

    async def fetch(member_id: str | None, epoch: int) -> Any:
        response = await call(
            broker,
            9,
            9,
            {
                "groups": [
                    {
                        "group_id": GROUP,
                        "member_id": member_id,
                        "member_epoch": epoch,
                        "topics": None,
                    }
                ],
                "require_stable": False,
            },
        )
        return response.groups[0]

    assert (await fetch("m1", 3)).error_code == ErrorCode.stale_member_epoch
    assert (await fetch("ghost", 1)).error_code == ErrorCode.unknown_member_id
    for member_id, epoch in (("m1", 1), (None, -1)):  # the member, an admin client
        fetched = await fetch(member_id, epoch)
        assert fetched.error_code == ErrorCode.none
        assert fetched.topics[0].partitions[0].committed_offset == 5


async def test_describe_and_list_show_the_consumer_group(broker: broker_module.Broker) -> None:
    await heartbeat(broker, "m1", 0, instance_id=None)
    described = await call(
        broker, DESCRIBE, 1, {"group_ids": [GROUP, "nope"], "include_authorized_operations": False}
    )
    group, missing = described.groups
    assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch) == (
        ErrorCode.none,
        "Stable",
        1,
        1,
    )
    assert group.assignor_name == "uniform"
    (member,) = group.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == (
        "m1",
        1,
        ("orders",),
    )
    assert [(t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == [
        ("orders", (0, 1))
    ]
    assert missing.error_code == ErrorCode.group_id_not_found

    listed = await call(broker, 16, 5, {"states_filter": [], "types_filter": ["consumer"]})
    assert [(g.group_id, g.group_state, g.group_type, g.protocol_type) for g in listed.groups] == [
        (GROUP, "Stable", "consumer", "consumer")
    ]
    classic_only = await call(broker, 16, 5, {"states_filter": [], "types_filter": ["classic"]})
    assert classic_only.groups == ()
    # the classic API does not describe a consumer group, as in Kafka
    old = await call(broker, 15, 5, {"groups": [GROUP], "include_authorized_operations": False})
    assert old.groups[0].group_state == "Dead"


async def test_an_empty_classic_group_becomes_a_consumer_group_with_its_offsets(
    broker: broker_module.Broker,
) -> None:
    # offsets committed outside any member (as a classic group left Empty has them)
    commit = await call(
        broker,
        8,
        8,
        {
            "group_id": GROUP,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {
                            "partition_index": 1,
                            "committed_offset": 42,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        },
    )
    assert commit.topics[0].partitions[0].error_code == ErrorCode.none
    assert broker.groups.groups[GROUP].group_type == "classic"
    joined = await heartbeat(broker, "m1", 0)
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)
    assert broker.groups.groups[GROUP].group_type == "consumer"
    assert broker.groups.fetch_offsets(GROUP, [("orders", 1)])[("orders", 1)].offset == 42  # type: ignore[index,union-attr]


async def test_the_consumer_protocol_can_be_switched_off(tmp_path: Path) -> None:
    server = await loaded(
        tmp_path / "classic-only", **{"group.coordinator.rebalance.protocols": "classic"}
    )
    try:
        await create_topic(server, "orders", 1)
        versions = await call(
            server, 18, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        assert HEARTBEAT not in {k.api_key for k in versions.api_keys}
        assert 16 in {k.api_key for k in versions.api_keys}
        refused = await heartbeat(server, "m1", 0)
        assert refused.error_code == ErrorCode.unsupported_version
    finally:
        server.close()


async def test_a_restarted_coordinator_knows_the_group_from_consumer_offsets(
    tmp_path: Path, broker: broker_module.Broker
) -> None:
    assert (await heartbeat(broker, "m1", 0)).member_epoch == 1
    assert (await heartbeat(broker, "m2", 0)).member_epoch == 2
    asked = await heartbeat(broker, "m1", 1, owned=[0, 1])
    kept = partitions(asked)
    assert kept is not None and len(kept) == 1
    await heartbeat(broker, "m1", 1, owned=kept)
    took = await heartbeat(broker, "m2", 2, owned=[])
    assert partitions(took) is not None
    before = broker.groups.groups[GROUP].consumer
    assert before is not None
    await broker.groups.drain()
    broker.close()

    again = await loaded(tmp_path, **{"num.partitions": "2"})
    try:
        after = again.groups.groups[GROUP].consumer
        assert after is not None
        assert (after.group_epoch, after.assignment_epoch) == (2, 2)
        assert {m: (x.member_epoch, x.assigned) for m, x in after.members.items()} == {
            m: (x.member_epoch, x.assigned) for m, x in before.members.items()
        }
        assert after.target == before.target
        # the members go on where they were, without rejoining
        resumed = await heartbeat(again, "m1", 2, owned=kept)
        assert (resumed.error_code, resumed.member_epoch) == (ErrorCode.none, 2)
        # one leaves; the tombstones leave nothing of it after another restart
        await heartbeat(again, "m2", -1)
        await again.groups.drain()
    finally:
        again.close()
    third = await loaded(tmp_path, **{"num.partitions": "2"})
    try:
        consumer = third.groups.groups[GROUP].consumer
        assert consumer is not None and set(consumer.members) == {"m1"}
        assert consumer.group_epoch == 3
    finally:
        third.close()


async def test_a_static_member_keeps_its_partitions_across_a_restart(
    broker: broker_module.Broker,
) -> None:
    joined = await heartbeat(broker, "m1", 0, instance_id="i1")
    assert (joined.member_epoch, partitions(joined)) == (1, [0, 1])
    away = await heartbeat(broker, "m1", -2, instance_id="i1")
    assert (away.error_code, away.member_epoch) == (ErrorCode.none, -2)
    # back under a new member id: the same partitions, no new group epoch
    back = await heartbeat(broker, "m1-again", 0, instance_id="i1")
    assert (back.error_code, back.member_epoch, partitions(back)) == (ErrorCode.none, 1, [0, 1])
    group = broker.groups.groups[GROUP].consumer
    assert group is not None and set(group.members) == {"m1-again"} and group.group_epoch == 1
    # while it is there, nobody else may use its instance id
    taken = await heartbeat(broker, "m2", 0, instance_id="i1")
    assert taken.error_code == ErrorCode.unreleased_instance_id


async def test_members_may_ask_for_the_range_assignor(broker: broker_module.Broker) -> None:
    first = await heartbeat(broker, "m1", 0, server_assignor="range")
    second = await heartbeat(broker, "m2", 0, server_assignor="range")
    assert (partitions(first), second.error_code) == ([0, 1], ErrorCode.none)
    described = await call(
        broker, DESCRIBE, 0, {"group_ids": [GROUP], "include_authorized_operations": False}
    )
    (group,) = described.groups
    assert group.assignor_name == "range"
    targets = {
        m.member_id: [p for t in m.target_assignment.topic_partitions for p in t.partitions]
        for m in group.members
    }
    assert targets == {"m1": [0], "m2": [1]}


async def test_the_group_moves_with_its_offsets_partition(broker: broker_module.Broker) -> None:
    """What group_placement does when `__consumer_offsets` leadership leaves and comes
    back: unload the partition's groups, later load them from the log."""
    assert (await heartbeat(broker, "m1", 0)).member_epoch == 1
    await broker.groups.drain()
    count = broker.offsets_topic.partition_count()
    assert count is not None
    partition = offsets_records.partition_for(GROUP, count)
    assert broker.groups.unload([partition]) == 1
    gone = await heartbeat(broker, "m1", 1, owned=[0, 1])
    assert gone.error_code == ErrorCode.unknown_member_id  # it would find the new coordinator
    broker.groups.load([partition], broker.context.clock.time_ms())
    back = await heartbeat(broker, "m1", 1, owned=[0, 1])
    assert (back.error_code, back.member_epoch) == (ErrorCode.none, 1)


async def test_a_regex_subscription_follows_the_topics_there_are(
    broker: broker_module.Broker,
) -> None:
    invalid = await heartbeat(broker, "m1", 0, subscribed_topic_regex="(")
    assert invalid.error_code == ErrorCode.invalid_regular_expression
    joined = await call(
        broker,
        HEARTBEAT,
        1,
        {
            "group_id": GROUP,
            "member_id": "m1",
            "member_epoch": 0,
            "rebalance_timeout": 30_000,
            "subscribed_topic_names": [],
            "subscribed_topic_regex": "ord.*",
            "topic_partitions": [],
        },
    )
    assert (joined.member_epoch, partitions(joined)) == (1, [0, 1])
    # a new topic the regex matches, and more partitions of one it does: new epochs
    await create_topic(broker, "ordinals", 1)
    grown = await heartbeat(broker, "m1", 1, owned=[0, 1])
    assert grown.member_epoch == 2
    assert grown.assignment is not None and len(grown.assignment.topic_partitions) == 2
    await broker.controller.create_partitions("orders", 3)
    more = await heartbeat(broker, "m1", 2, owned=[0, 1])
    assert more.member_epoch == 3
    by_topic = {t.topic_id: sorted(t.partitions) for t in more.assignment.topic_partitions}
    assert by_topic[orders_id(broker)] == [0, 1, 2]


async def test_an_empty_consumer_group_can_be_deleted(
    tmp_path: Path, broker: broker_module.Broker
) -> None:
    assert (await heartbeat(broker, "m1", 0)).member_epoch == 1
    refused = await call(broker, 42, 2, {"groups_names": [GROUP]})
    assert refused.results[0].error_code == ErrorCode.non_empty_group
    await heartbeat(broker, "m1", -1)
    deleted = await call(broker, 42, 2, {"groups_names": [GROUP]})
    assert deleted.results[0].error_code == ErrorCode.none
    assert GROUP not in broker.groups.groups
    await broker.groups.drain()
    broker.close()
    again = await loaded(tmp_path, **{"num.partitions": "2"})
    try:
        assert GROUP not in again.groups.groups  # the tombstones removed it for good
    finally:
        again.close()


async def test_kafka_4_3s_default_protocols_load(tmp_path: Path) -> None:
    server = await loaded(
        tmp_path / "kafka-default",
        **{"group.coordinator.rebalance.protocols": "classic,consumer,streams"},
    )
    try:
        assert server.groups.config.consumer_protocol_enabled
    finally:
        server.close()


async def test_a_groups_own_heartbeat_interval_is_what_its_members_are_told(
    broker: broker_module.Broker,
) -> None:
    """consumer.heartbeat.interval.ms set on the GROUP resource (kafka-configs.sh
    --entity-type groups) overrides the broker's for that group's members."""
    altered = await call(
        broker,
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": 32,
                    "resource_name": GROUP,
                    "configs": [
                        {
                            "name": "consumer.heartbeat.interval.ms",
                            "config_operation": 0,
                            "value": "7000",
                        }
                    ],
                }
            ],
            "validate_only": False,
        },
    )
    assert [r.error_code for r in altered.responses] == [ErrorCode.none]
    joined = await heartbeat(broker, "m1", 0)
    assert joined.error_code == ErrorCode.none
    assert joined.heartbeat_interval.total_seconds() == 7
