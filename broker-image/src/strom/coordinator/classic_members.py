"""Classic members inside a consumer group (Kafka's classicGroupJoinToConsumerGroup and
its Sync/Heartbeat/Leave siblings): members of a converted classic group, and classic
consumers joining a consumer group, keep speaking JoinGroup, SyncGroup, Heartbeat and
LeaveGroup while the broker assigns.

A JoinGroup updates the member from its embedded subscription and reconciles it, the
partitions it still owns being those its subscription lists (cooperative clients; eager
ones revoke everything before they join); the answer names no leader, so the client
assigns nothing, and its generation is the member epoch. SyncGroup hands out the member's
current assignment in the consumer protocol's format. Heartbeat answers
REBALANCE_IN_PROGRESS when the member should join again: the group epoch moved past it,
it has partitions to revoke, or partitions it waits for were released.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid

from kio.schema.errors import ErrorCode

from strom.coordinator import consumer, consumer_records, conversion, embedded_protocol
from strom.coordinator import consumer_group as model
from strom.coordinator import group as group_model

log = logging.getLogger(__name__)

# JoinGroup v4+ without a member id gets one and must join again with it (KIP-394).
MEMBER_ID_REQUIRED_MIN_VERSION = 4
Group = group_model.Group
JoinResult = group_model.JoinResult
SyncResult = group_model.SyncResult


class ClassicMembers:
    def __init__(
        self, protocol: consumer.ConsumerProtocol, config: group_model.CoordinatorConfig
    ) -> None:
        self._protocol = protocol
        self.config = config

    async def join(
        self,
        group: Group,
        candidate: group_model.Member,
        version: int,
        topics: model.TopicLookup,
        now_ms: int,
    ) -> JoinResult:
        group_consumer = group.consumer
        assert group_consumer is not None
        member_id = candidate.member_id
        instance_id = candidate.group_instance_id
        if not member_id:
            member_id = f"{candidate.client_id}-{uuid.uuid4()}"
            if instance_id is None and version >= MEMBER_ID_REQUIRED_MIN_VERSION:
                return JoinResult(ErrorCode.member_id_required, member_id=member_id)
        if candidate.protocol_type != group_model.CONSUMER or not candidate.protocols:
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id)
        try:
            subscription = embedded_protocol.parse_subscription(candidate.protocols[0][1])
        except embedded_protocol.MalformedProtocol:
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id)
        records: list[consumer_records.Entry] = []
        member = group_consumer.members.get(member_id)
        owner_id = group_consumer.static_members.get(instance_id) if instance_id else None
        if member is None and owner_id is not None and owner_id != member_id:
            # the static member is back under a new id: it takes over the old one
            old = group_consumer.members[owner_id]
            target = group_consumer.target.pop(owner_id, {})
            group_consumer.remove_member(owner_id)
            group_consumer.target[member_id] = target
            records += consumer_records.member_tombstones(group.group_id, owner_id)
            member = dataclasses.replace(old, member_id=member_id)
        if member is None:
            if len(group_consumer.members) >= self.config.max_group_size:
                return JoinResult(ErrorCode.group_max_size_reached, member_id=member_id)
            member = model.ConsumerMember(member_id)
        updated = dataclasses.replace(
            member,
            instance_id=instance_id,
            rack_id=subscription.rack_id or member.rack_id,
            client_id=candidate.client_id,
            client_host=candidate.client_host,
            subscribed_topics=tuple(sorted(set(subscription.topics))),
            rebalance_timeout_ms=candidate.rebalance_timeout_ms,
            classic=model.ClassicMemberInfo(
                candidate.session_timeout_ms, tuple(candidate.protocols)
            ),
        )
        self._protocol.update_member(group, member, updated, topics, records)
        owned = conversion.by_topic_id(
            {topic: frozenset(partitions) for topic, partitions in subscription.owned}, topics
        )
        owned_list = [(topic_id, sorted(partitions)) for topic_id, partitions in owned.items()]
        reconciled = self._protocol.reconcile(group, updated, owned_list, now_ms, records)
        group_consumer.session_deadlines[member_id] = now_ms + candidate.session_timeout_ms
        if not await self._protocol.write(group.group_id, records, now_ms):
            return JoinResult(ErrorCode.not_coordinator, member_id=member_id)
        return JoinResult(
            ErrorCode.none,
            generation_id=reconciled.member_epoch,
            protocol_type=group_model.CONSUMER,
            protocol_name=candidate.protocols[0][0],
            leader_id="",  # the broker assigns: no client leads
            member_id=member_id,
        )

    def sync(
        self,
        group: Group,
        *,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        now_ms: int,
    ) -> SyncResult:
        group_consumer = group.consumer
        assert group_consumer is not None
        found = _classic_member(group_consumer, member_id, group_instance_id, generation_id)
        if isinstance(found, ErrorCode):
            return SyncResult(found)
        assert found.classic is not None
        name = found.classic.protocols[0][0]
        if (protocol_type is not None and protocol_type != group_model.CONSUMER) or (
            protocol_name is not None and protocol_name != name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if (
            group_consumer.group_epoch > found.member_epoch
            and found.state != model.MemberState.UNREVOKED_PARTITIONS
        ):
            return SyncResult(ErrorCode.rebalance_in_progress)
        group_consumer.session_deadlines[member_id] = now_ms + found.classic.session_timeout_ms
        assignment = conversion.classic_assignment(found, group_consumer.topic_names())
        return SyncResult(ErrorCode.none, group_model.CONSUMER, name, assignment)

    def heartbeat(
        self,
        group: Group,
        *,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        now_ms: int,
    ) -> ErrorCode:
        group_consumer = group.consumer
        assert group_consumer is not None
        found = _classic_member(group_consumer, member_id, group_instance_id, generation_id)
        if isinstance(found, ErrorCode):
            return found
        assert found.classic is not None
        group_consumer.session_deadlines[member_id] = now_ms + found.classic.session_timeout_ms
        if (
            found.member_epoch < group_consumer.group_epoch
            or found.state == model.MemberState.UNREVOKED_PARTITIONS
            or (
                found.state == model.MemberState.UNRELEASED_PARTITIONS
                and not group_consumer.waiting_on_unreleased(found)
            )
        ):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(
        self, group: Group, leaving: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        group_consumer = group.consumer
        assert group_consumer is not None
        results: list[tuple[str, str | None, ErrorCode]] = []
        for member_id, instance_id in leaving:
            found = group_consumer.members.get(member_id)
            if instance_id:
                owner = group_consumer.static_members.get(instance_id)
                if owner is None:
                    results.append((member_id, instance_id, ErrorCode.unknown_member_id))
                    continue
                if member_id and owner != member_id:
                    results.append((member_id, instance_id, ErrorCode.fenced_instance_id))
                    continue
                found = group_consumer.members.get(owner)
            if found is None:
                results.append((member_id, instance_id, ErrorCode.unknown_member_id))
                continue
            self._protocol.remove_member(group, found.member_id, "left", now_ms)
            results.append((member_id, instance_id, ErrorCode.none))
        return ErrorCode.none, results


def _classic_member(
    group_consumer: model.ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    generation_id: int,
) -> model.ConsumerMember | ErrorCode:
    """Kafka's validateConsumerGroupMember, then the member must use the classic protocol
    and be in the generation (its member epoch)."""
    if instance_id:
        owner = group_consumer.static_members.get(instance_id)
        if owner is None:
            return ErrorCode.unknown_member_id
        if owner != member_id:
            return ErrorCode.fenced_instance_id
    member = group_consumer.members.get(member_id)
    if member is None or member.classic is None:
        return ErrorCode.unknown_member_id
    if generation_id != member.member_epoch:
        return ErrorCode.illegal_generation
    return member
