"""Kafka's online migration between the group protocols.

Upgrade (GroupMetadataManager.convertToConsumerGroup): when a member joins with
ConsumerGroupHeartbeat, the classic members become members of a consumer group in the
classic generation, each with the partitions the classic leader gave it and its
subscription, and go on heartbeating with the classic protocol (`classic_members`). The
group's epoch and its target assignment's are the generation, so nothing moves until the
joining member bumps the epoch.

Downgrade (convertToClassicGroup): when the last consumer-protocol member leaves a group
whose other members are classic ones, it becomes a classic group again, in the group epoch
as its generation with the members' current assignments, and rebalances at once so its
members join the classic way.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from strom.coordinator import consumer_group as model
from strom.coordinator import consumer_records, embedded_protocol, rebalance, runtime, states
from strom.coordinator import group as group_model

log = logging.getLogger(__name__)

UPGRADE_POLICIES = ("upgrade", "bidirectional")
DOWNGRADE_POLICIES = ("downgrade", "bidirectional")


class NotConvertible(Exception):
    """Why a classic group with members cannot become a consumer group."""


def convert_classic(
    group: group_model.Group,
    topics: model.TopicLookup,
    config: group_model.CoordinatorConfig,
    writer: runtime.Runtime,
    now_ms: int,
) -> None:
    if config.consumer_migration_policy not in UPGRADE_POLICIES:
        raise NotConvertible("group.consumer.migration.policy does not allow it")
    if group.protocol_type != group_model.CONSUMER or any(
        m.protocol_type != group_model.CONSUMER for m in group.members.values()
    ):
        raise NotConvertible("it does not use the consumer protocol")
    epoch = group.generation_id
    try:
        members = [_member(group, classic, epoch, topics) for classic in group.members.values()]
    except embedded_protocol.MalformedProtocol as error:
        raise NotConvertible(f"its consumer protocol is malformed: {error}") from error
    log.info(
        "group %s: the classic group with %d member(s) becomes a consumer group",
        group.group_id,
        len(members),
    )
    for classic in group.members.values():
        # parked JoinGroup/SyncGroup answers: rejoin, now into the consumer group
        rebalance.answer_join(
            classic,
            group_model.JoinResult(ErrorCode.rebalance_in_progress, member_id=classic.member_id),
        )
        rebalance.answer_sync(classic, group_model.SyncResult(ErrorCode.rebalance_in_progress))
    group.members.clear()
    group.static_members.clear()
    group.pending_members.clear()
    group.protocol_type = group.protocol_name = group.leader_id = None
    group.generation_id = 0
    group.rebalance_deadline_ms = group.initial_delay_until_ms = None
    group.restore_state(states.GroupState.EMPTY, now_ms)

    consumer = group.consumer = model.ConsumerGroup()
    consumer.group_epoch = consumer.assignment_epoch = epoch
    records: list[consumer_records.Entry] = []
    for member in members:
        assert member.classic is not None
        consumer.put_member(member)
        consumer.target[member.member_id] = member.assigned
        consumer.session_deadlines[member.member_id] = now_ms + member.classic.session_timeout_ms
        records.append(consumer_records.member_metadata(group.group_id, member))
        records.append(
            consumer_records.target_member(group.group_id, member.member_id, member.assigned)
        )
        records.append(consumer_records.current_assignment(group.group_id, member))
    consumer.subscription_metadata = model.subscription_metadata(
        consumer.subscribed_topic_names(), topics
    )
    records.append(
        consumer_records.subscription_metadata(group.group_id, consumer.subscription_metadata)
    )
    records.append(consumer_records.group_epoch(group.group_id, epoch))
    records.append(consumer_records.target_epoch(group.group_id, epoch))
    writer.write_behind(group.group_id, records, now_ms)


def can_downgrade(
    consumer: model.ConsumerGroup, config: group_model.CoordinatorConfig, *, leaving: str
) -> bool:
    """Whether the group turns classic once `leaving` is gone: the members left all speak
    the classic protocol (Kafka's validateOnlineDowngradeWithFencedMember)."""
    staying = [m for m in consumer.members.values() if m.member_id != leaving]
    return (
        config.consumer_migration_policy in DOWNGRADE_POLICIES
        and bool(staying)
        and all(m.classic is not None for m in staying)
    )


def convert_to_classic(
    group: group_model.Group,
    config: group_model.CoordinatorConfig,
    writer: runtime.Runtime,
    now_ms: int,
) -> None:
    consumer = group.consumer
    assert consumer is not None
    log.info("group %s: only classic members are left, it becomes a classic group", group.group_id)
    names = consumer.topic_names()
    records = [
        entry
        for member_id in consumer.members
        for entry in consumer_records.member_tombstones(group.group_id, member_id)
    ]
    records += consumer_records.group_tombstones(group.group_id)
    group.consumer = None
    group.protocol_type = group_model.CONSUMER
    group.generation_id = consumer.group_epoch
    for member in consumer.members.values():
        info = member.classic
        assert info is not None
        group.members[member.member_id] = group_model.Member(
            member_id=member.member_id,
            group_instance_id=member.instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            session_timeout_ms=info.session_timeout_ms,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            protocol_type=group_model.CONSUMER,
            protocols=list(info.protocols),
            assignment=classic_assignment(member, names),
            heartbeat_deadline_ms=now_ms + info.session_timeout_ms,
        )
        if member.instance_id:
            group.static_members[member.instance_id] = member.member_id
    group.protocol_name = group.select_protocol()
    group.leader_id = next(iter(group.members))
    group.restore_state(states.GroupState.STABLE, now_ms)
    records.append(runtime.group_entry(group))
    writer.write_behind(group.group_id, records, now_ms)
    rebalance.Rebalancer(config, writer).prepare(group, now_ms, "it became a classic group")


def classic_assignment(member: model.ConsumerMember, names: Mapping[uuid.UUID, str]) -> bytes:
    """A classic member's assigned partitions as its SyncGroup answer carries them: a
    ConsumerProtocolAssignment of the version of its subscription."""
    assert member.classic is not None
    version = embedded_protocol.version_of(member.classic.protocols[0][1])
    partitions = {
        names[topic_id]: indexes
        for topic_id, indexes in member.assigned.items()
        if topic_id in names
    }
    return embedded_protocol.encode_assignment(partitions, version)


def _member(
    group: group_model.Group,
    classic: group_model.Member,
    epoch: int,
    topics: model.TopicLookup,
) -> model.ConsumerMember:
    metadata = classic.metadata_for(group.protocol_name or "")
    subscription = embedded_protocol.parse_subscription(metadata)
    assigned = by_topic_id(embedded_protocol.parse_assignment(classic.assignment), topics)
    return model.ConsumerMember(
        classic.member_id,
        instance_id=classic.group_instance_id,
        rack_id=subscription.rack_id,
        client_id=classic.client_id,
        client_host=classic.client_host,
        subscribed_topics=tuple(sorted(set(subscription.topics))),
        rebalance_timeout_ms=classic.rebalance_timeout_ms,
        member_epoch=epoch,
        previous_member_epoch=epoch,
        assigned=assigned,
        classic=model.ClassicMemberInfo(classic.session_timeout_ms, tuple(classic.protocols)),
    )


def by_topic_id(
    partitions: Mapping[str, frozenset[int]], topics: model.TopicLookup
) -> model.Assignment:
    """An assignment by topic name as one by topic id (unknown topics left out)."""
    out: model.Assignment = {}
    for name, indexes in partitions.items():
        meta = topics(name)
        if meta is not None and indexes:
            out[meta.topic_id] = indexes
    return out
