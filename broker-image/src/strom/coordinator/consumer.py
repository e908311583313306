"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat, as Kafka's
GroupMetadataManager.consumerGroupHeartbeat runs it, and the timers of its members.

A heartbeat (1) creates or updates the member, bumping the group epoch when its
subscription or the subscribed topics' partitions changed; (2) computes a new target
assignment when the group epoch is ahead of it; (3) moves the member one step towards
its target (`reconciliation`). A member that stops heartbeating for the session timeout,
or keeps partitions it was asked to revoke past its rebalance timeout, is removed and
the group epoch bumped, so the others get its partitions.

An Empty classic group (committed offsets and all) becomes a consumer group when a
member joins with ConsumerGroupHeartbeat, and an Empty consumer group becomes classic
again on a JoinGroup, as Kafka does. A classic group with members converts online when
group.consumer.migration.policy allows (upgrade, bidirectional) and its members use the
consumer protocol: they keep their partitions and go on with JoinGroup, SyncGroup and
Heartbeat inside the consumer group (`classic_members`); otherwise the heartbeat answers
GROUP_ID_NOT_FOUND, as Kafka does. When the last consumer-protocol member leaves and
classic members stay, the group is classic again (`conversion`).

Every change is written to `__consumer_offsets` in Kafka's record types
(`consumer_records`), so a coordinator that restarts or takes the group over from another
broker (its `__consumer_offsets` partition moved) knows the group, its epochs, members and
assignments. A heartbeat is answered once its records are written, as in Kafka (leaving
members and timers write in the background).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strom.coordinator import (
    assignors,
    consumer_records,
    conversion,
    offsets_log,
    reconciliation,
    runtime,
    states,
)
from strom.coordinator import consumer_group as model
from strom.coordinator import group as group_model

log = logging.getLogger(__name__)

TopicLookup = model.TopicLookup
Group = group_model.Group


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat request; None fields did not change since the last one."""

    group_id: str
    member_id: str
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: reconciliation.Owned = None


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: model.Assignment | None = None


class ConsumerProtocol:
    def __init__(
        self,
        groups: dict[str, Group],
        config: group_model.CoordinatorConfig,
        writer: runtime.Runtime,
        session_timeout_ms: Callable[[str], int],
        heartbeat_interval_ms: Callable[[str], int],
    ) -> None:
        self.groups = groups
        self.config = config
        self._runtime = writer
        self._session_timeout_ms = session_timeout_ms
        self._heartbeat_interval_ms = heartbeat_interval_ms

    async def heartbeat(
        self, request: Heartbeat, topics: TopicLookup, now_ms: int
    ) -> HeartbeatResult:
        """Answered once the records of what it changed are written, as Kafka does."""
        try:
            self._validate(request)
            if request.member_epoch in (model.LEAVE_EPOCH, model.STATIC_LEAVE_EPOCH):
                return self._leave(request, now_ms)
            result, records = self._heartbeat(request, topics, now_ms)
        except HeartbeatError as error:
            return HeartbeatResult(error.code, error.message)
        if not await self.write(request.group_id, records, now_ms):
            return HeartbeatResult(ErrorCode.not_coordinator, "__consumer_offsets not written")
        return result

    def _validate(self, request: Heartbeat) -> None:
        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(ErrorCode.invalid_request, message)

        if not request.group_id:
            raise invalid("GroupId can't be empty.")
        if request.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if request.rack_id == "":
            raise invalid("RackId can't be empty.")
        if request.subscribed_topic_regex:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as error:
                raise HeartbeatError(
                    ErrorCode.invalid_regular_expression,
                    f"SubscribedTopicRegex {request.subscribed_topic_regex!r} is invalid: {error}",
                ) from error
        epoch = request.member_epoch
        if epoch > 0 or epoch == model.LEAVE_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
        elif epoch == model.JOIN_EPOCH:
            if request.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or request.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if not request.subscribed_topic_names and not request.subscribed_topic_regex:
                raise invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
                )
        elif epoch == model.STATIC_LEAVE_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
            if request.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        assignor = request.server_assignor
        if assignor is not None and assignor not in self.config.consumer_assignors:
            raise HeartbeatError(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.consumer_assignors)}.",
            )

    # The heartbeat ---------------------------------------------------------------------

    def _heartbeat(
        self, request: Heartbeat, topics: TopicLookup, now_ms: int
    ) -> tuple[HeartbeatResult, list[consumer_records.Entry]]:
        joining = request.member_epoch == model.JOIN_EPOCH
        group = self.consumer_group(request.group_id, create=joining, topics=topics, now_ms=now_ms)
        consumer = group.consumer
        assert consumer is not None
        member_id = request.member_id or str(uuid.uuid4())  # v0 lets the coordinator pick
        records: list[consumer_records.Entry] = []
        member = self._member(group.group_id, consumer, request, member_id, records)
        updated = dataclasses.replace(
            member,
            client_id=request.client_id,
            client_host=request.client_host,
            instance_id=request.instance_id or member.instance_id,
            rack_id=request.rack_id or member.rack_id,
            rebalance_timeout_ms=(
                member.rebalance_timeout_ms
                if request.rebalance_timeout_ms == -1
                else request.rebalance_timeout_ms
            ),
            server_assignor=request.server_assignor or member.server_assignor,
            subscribed_topics=(
                member.subscribed_topics
                if request.subscribed_topic_names is None
                else tuple(sorted(set(request.subscribed_topic_names)))
            ),
            # "" clears the regex (librdkafka sends it when it has none)
            subscribed_regex=(
                member.subscribed_regex
                if request.subscribed_topic_regex is None
                else request.subscribed_topic_regex or None
            ),
        )
        self.update_member(group, member, updated, topics, records)
        reconciled = self.reconcile(group, updated, request.owned, now_ms, records)
        consumer.session_deadlines[member_id] = now_ms + self._session_timeout_ms(group.group_id)
        full = joining or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.owned is not None
        )
        changed = reconciled.assigned != member.assigned
        result = HeartbeatResult(
            ErrorCode.none,
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._heartbeat_interval_ms(group.group_id),
            assignment=reconciled.assigned if full or changed else None,
        )
        return result, records

    async def write(
        self, group_id: str, records: list[consumer_records.Entry], now_ms: int
    ) -> bool:
        """Write the records of a change (memory has it already); False if
        `__consumer_offsets` did not take them: the member is told to find the
        coordinator again, and a new one knows only what was written."""
        if not records:
            return True
        try:
            await self._runtime.write(group_id, records, now_ms)
        except offsets_log.StoreFailed as error:
            log.error("group %s: changes not written: %s", group_id, error)
            return False
        return True

    def update_member(
        self,
        group: Group,
        member: model.ConsumerMember,
        updated: model.ConsumerMember,
        topics: TopicLookup,
        records: list[consumer_records.Entry],
    ) -> None:
        """Store a new or changed member; a changed subscription, or subscribed topics whose
        partitions changed, bump the group epoch, and a group epoch ahead of the target
        assignment's gets a new one."""
        consumer = group.consumer
        assert consumer is not None
        bump = (updated.subscribed_topics, updated.subscribed_regex) != (
            member.subscribed_topics,
            member.subscribed_regex,
        )
        if updated != member or member.member_id not in consumer.members:
            records.append(consumer_records.member_metadata(group.group_id, updated))
        consumer.put_member(updated)
        consumer.resolve_regexes(topics)
        metadata = model.subscription_metadata(consumer.subscribed_topic_names(), topics)
        if metadata != consumer.subscription_metadata:
            consumer.subscription_metadata = metadata
            records.append(consumer_records.subscription_metadata(group.group_id, metadata))
            bump = True
        if bump:
            consumer.group_epoch += 1
            records.append(consumer_records.group_epoch(group.group_id, consumer.group_epoch))
            log.info(
                "group %s: group epoch %d (member %s)",
                group.group_id,
                consumer.group_epoch,
                updated.member_id,
            )
        if consumer.group_epoch > consumer.assignment_epoch:
            records += self._assign(group.group_id, consumer)

    def reconcile(
        self,
        group: Group,
        member: model.ConsumerMember,
        owned: reconciliation.Owned,
        now_ms: int,
        records: list[consumer_records.Entry],
    ) -> model.ConsumerMember:
        """Move the member one step towards its target assignment; returns it as stored."""
        consumer = group.consumer
        assert consumer is not None
        if member.is_reconciled_to(consumer.assignment_epoch):
            return member
        reconciled = reconciliation.reconcile(
            member,
            consumer.assignment_epoch,
            consumer.target.get(member.member_id, {}),
            consumer.owner_epoch,
            owned,
        )
        if reconciled != member:
            records.append(consumer_records.current_assignment(group.group_id, reconciled))
            consumer.put_member(reconciled)
            if reconciled.classic is None:  # classic members have their join/sync timers
                self._track_revocation(consumer, reconciled, now_ms)
        return reconciled

    def consumer_group(
        self, group_id: str, *, create: bool, topics: TopicLookup, now_ms: int
    ) -> Group:
        """The consumer group `group_id`; with `create`, a new one, or a classic group
        converted: an Empty one always, one with members as the migration policy allows."""
        group = self.groups.get(group_id)
        if group is not None and group.consumer is not None:
            return group
        if not create:
            # Kafka 4: a heartbeat to a group it does not know tells the member to rejoin.
            raise HeartbeatError(ErrorCode.unknown_member_id, f"Group {group_id} not found.")
        if group is None or group.state == states.GroupState.DEAD:
            group = self.groups[group_id] = Group(group_id, now_ms)
        elif not group.is_empty() or group.pending_members:
            try:
                conversion.convert_classic(group, topics, self.config, self._runtime, now_ms)
            except conversion.NotConvertible as error:
                raise HeartbeatError(
                    ErrorCode.group_id_not_found,
                    f"Group {group_id} is not a consumer group and cannot become one: {error}.",
                ) from error
            return group
        else:
            log.info("group %s: the empty classic group becomes a consumer group", group_id)
        # The classic side starts over; committed offsets stay with the group.
        group.protocol_type = None
        group.protocol_name = None
        group.leader_id = None
        group.generation_id = 0
        group.consumer = model.ConsumerGroup()
        return group

    def _member(
        self,
        group_id: str,
        consumer: model.ConsumerGroup,
        request: Heartbeat,
        member_id: str,
        records: list[consumer_records.Entry],
    ) -> model.ConsumerMember:
        instance_id = request.instance_id
        existing = consumer.members.get(member_id)
        if request.member_epoch == model.JOIN_EPOCH:
            if instance_id is not None:
                return self._static_member_joins(
                    group_id, consumer, instance_id, member_id, existing, records
                )
            if existing is None and len(consumer.members) >= self.config.max_group_size:
                raise HeartbeatError(
                    ErrorCode.group_max_size_reached,
                    "The consumer group has reached its maximum capacity of "
                    f"{self.config.max_group_size} members.",
                )
            return existing or model.ConsumerMember(member_id)
        if instance_id is not None:
            owner = consumer.static_members.get(instance_id)
            if owner is None:
                raise HeartbeatError(
                    ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown."
                )
            if owner != member_id:
                raise HeartbeatError(
                    ErrorCode.fenced_instance_id,
                    f"Static member {member_id} with instance id {instance_id} is fenced by"
                    f" member {owner}.",
                )
        if existing is None:
            raise HeartbeatError(
                ErrorCode.unknown_member_id, f"Member {member_id} is not a member of the group."
            )
        _check_epoch(existing, request)
        return existing

    def _static_member_joins(
        self,
        group_id: str,
        consumer: model.ConsumerGroup,
        instance_id: str,
        member_id: str,
        existing: model.ConsumerMember | None,
        records: list[consumer_records.Entry],
    ) -> model.ConsumerMember:
        owner_id = consumer.static_members.get(instance_id)
        if owner_id is None or owner_id == member_id:
            return existing or model.ConsumerMember(member_id, instance_id=instance_id)
        owner = consumer.members[owner_id]
        if owner.member_epoch != model.STATIC_LEAVE_EPOCH:
            raise HeartbeatError(
                ErrorCode.unreleased_instance_id,
                f"Static member {member_id} with instance id {instance_id} cannot join the group"
                f" because the instance id is owned by {owner_id} member.",
            )
        # The static member is back under a new member id: it takes over its partitions.
        target = consumer.target.pop(owner_id, {})
        consumer.remove_member(owner_id)
        consumer.target[member_id] = target
        records += consumer_records.member_tombstones(group_id, owner_id)
        records.append(consumer_records.target_member(group_id, member_id, target))
        return dataclasses.replace(
            owner, member_id=member_id, member_epoch=0, previous_member_epoch=0
        )

    def _assign(self, group_id: str, consumer: model.ConsumerGroup) -> list[consumer_records.Entry]:
        """A new target assignment for the group epoch; returns its records (the targets
        that changed, then the epoch)."""
        name = consumer.preferred_assignor(self.config.consumer_assignors[0])
        ids = {topic: meta.topic_id for topic, meta in consumer.subscription_metadata.items()}
        members = {
            member_id: assignors.AssignorMember(
                subscribed=frozenset(ids[t] for t in consumer.member_topics(m) if t in ids),
                current=consumer.target.get(member_id, {}),
            )
            for member_id, m in consumer.members.items()
        }
        counts = {
            meta.topic_id: meta.partition_count for meta in consumer.subscription_metadata.values()
        }
        previous, consumer.target = consumer.target, assignors.ASSIGNORS[name](members, counts)
        consumer.assignment_epoch = consumer.group_epoch
        log.info(
            "group %s: target assignment for epoch %d by the %s assignor",
            group_id,
            consumer.assignment_epoch,
            name,
        )
        records = [
            consumer_records.target_member(group_id, member_id, target)
            for member_id, target in consumer.target.items()
            if previous.get(member_id) != target
        ]
        records.append(consumer_records.target_epoch(group_id, consumer.assignment_epoch))
        return records

    def _track_revocation(
        self, consumer: model.ConsumerGroup, member: model.ConsumerMember, now_ms: int
    ) -> None:
        if member.state == model.MemberState.UNREVOKED_PARTITIONS:
            deadline = now_ms + max(member.rebalance_timeout_ms, 0)
            consumer.revocation_deadlines[member.member_id] = (member.member_epoch, deadline)
        else:
            consumer.revocation_deadlines.pop(member.member_id, None)

    # Leaving and timers ----------------------------------------------------------------

    def _leave(self, request: Heartbeat, now_ms: int) -> HeartbeatResult:
        group = self.groups.get(request.group_id)
        consumer = group.consumer if group is not None else None
        if group is None or consumer is None:
            raise HeartbeatError(
                ErrorCode.group_id_not_found, f"Group {request.group_id} is not a consumer group."
            )
        member_id = request.member_id
        if request.instance_id is not None:
            owner = consumer.static_members.get(request.instance_id)
            if owner is None:
                raise HeartbeatError(
                    ErrorCode.unknown_member_id, f"Instance id {request.instance_id} is unknown."
                )
            if owner != member_id:
                raise HeartbeatError(ErrorCode.fenced_instance_id)
            if request.member_epoch == model.STATIC_LEAVE_EPOCH:
                # Gone for now: its partitions wait for it for a session timeout.
                member = dataclasses.replace(
                    consumer.members[owner],
                    member_epoch=model.STATIC_LEAVE_EPOCH,
                    pending_revocation={},
                )
                consumer.put_member(member)
                consumer.revocation_deadlines.pop(owner, None)
                self._runtime.write_behind(
                    group.group_id,
                    [consumer_records.current_assignment(group.group_id, member)],
                    now_ms,
                )
                return HeartbeatResult(
                    ErrorCode.none, member_id=member_id, member_epoch=model.STATIC_LEAVE_EPOCH
                )
        if member_id not in consumer.members:
            raise HeartbeatError(
                ErrorCode.unknown_member_id, f"Member {member_id} is not a member of the group."
            )
        self.remove_member(group, member_id, "left", now_ms)
        return HeartbeatResult(
            ErrorCode.none, member_id=member_id, member_epoch=request.member_epoch
        )

    def remove_member(self, group: Group, member_id: str, reason: str, now_ms: int) -> None:
        consumer = group.consumer
        if consumer is None or member_id not in consumer.members:
            return
        downgrade = conversion.can_downgrade(consumer, self.config, leaving=member_id)
        consumer.remove_member(member_id)
        records = consumer_records.member_tombstones(group.group_id, member_id)
        if downgrade:
            # Kafka converts instead of bumping the epoch: the classic generation is the
            # one the members have, so their commits go on until they rejoin.
            self._runtime.write_behind(group.group_id, records, now_ms)
            log.info("group %s: member %s %s", group.group_id, member_id, reason)
            conversion.convert_to_classic(group, self.config, self._runtime, now_ms)
            return
        consumer.group_epoch += 1
        records.append(consumer_records.group_epoch(group.group_id, consumer.group_epoch))
        self._runtime.write_behind(group.group_id, records, now_ms)
        log.info(
            "group %s: member %s %s, group epoch %d",
            group.group_id,
            member_id,
            reason,
            consumer.group_epoch,
        )
        if not consumer.members:
            group.state_timestamp_ms = now_ms  # offsets retention counts from here

    def tick(self, now_ms: int) -> None:
        """Remove members past their session timeout, or past their rebalance timeout
        with partitions still to revoke."""
        for group in list(self.groups.values()):
            consumer = group.consumer
            if consumer is None:
                continue
            for member_id in list(consumer.members):
                # members loaded from __consumer_offsets get a full session to come back
                consumer.session_deadlines.setdefault(
                    member_id, now_ms + self._session_timeout_ms(group.group_id)
                )
            for member_id, deadline in list(consumer.session_deadlines.items()):
                if now_ms >= deadline:
                    self.remove_member(group, member_id, "expired (session timeout)", now_ms)
            for member_id, (epoch, deadline) in list(consumer.revocation_deadlines.items()):
                member = consumer.members.get(member_id)
                if (
                    member is not None
                    and member.member_epoch == epoch
                    and member.state == model.MemberState.UNREVOKED_PARTITIONS
                    and now_ms >= deadline
                ):
                    self.remove_member(
                        group, member_id, "did not revoke in its rebalance timeout", now_ms
                    )


def _check_epoch(member: model.ConsumerMember, request: Heartbeat) -> None:
    """Kafka's throwIfMemberEpochIsInvalid: an epoch ahead is fenced; one behind only if
    it is the previous epoch and the member owns no more than it is assigned (the answer
    bumping its epoch got lost)."""
    received = request.member_epoch
    if received > member.member_epoch:
        raise HeartbeatError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({received}) than the one"
            f" known by the group coordinator ({member.member_epoch}).",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not _is_subset(request.owned, member.assigned)
    ):
        raise HeartbeatError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({received}) than the one"
            f" known by the group coordinator ({member.member_epoch}).",
        )


def _is_subset(owned: reconciliation.Owned, assigned: model.Assignment) -> bool:
    if owned is None:
        return False
    return all(
        topic_id in assigned and set(partitions) <= assigned[topic_id]
        for topic_id, partitions in owned
    )
