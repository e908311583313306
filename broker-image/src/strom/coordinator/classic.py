"""The classic group protocol's requests: JoinGroup (with KIP-394's member id round trip
and KIP-345's static members), SyncGroup, Heartbeat and LeaveGroup.

JoinGroup and SyncGroup answers wait for the rebalance (`rebalance` resolves them). A
SyncGroup from the leader stores the generation's assignment in `__consumer_offsets`
and hands it out only once it is written; if it cannot be written the members get
NOT_COORDINATOR and the group rebalances, as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from kio.schema.errors import ErrorCode

from strom.coordinator import consumer_records, offsets_log, rebalance, runtime, states
from strom.coordinator import group as group_model

log = logging.getLogger(__name__)

# Set on JoinGroup with an empty member id, from JoinGroup v4 on (KIP-394).
MEMBER_ID_REQUIRED_MIN_VERSION = 4

State = states.GroupState
Group = group_model.Group
JoinResult = group_model.JoinResult
SyncResult = group_model.SyncResult


class ClassicProtocol:
    def __init__(
        self,
        groups: dict[str, Group],
        config: group_model.CoordinatorConfig,
        writer: runtime.Runtime,
    ) -> None:
        self.groups = groups
        self.config = config
        self._runtime = writer
        self.rebalance = rebalance.Rebalancer(config, writer)

    # JoinGroup -----------------------------------------------------------------------

    async def join(
        self,
        *,
        group_id: str,
        candidate: group_model.Member,
        version: int,
        now_ms: int,
    ) -> JoinResult:
        member_id = candidate.member_id
        if not group_id:
            return JoinResult(ErrorCode.invalid_group_id, member_id=member_id)
        if not (
            self.config.min_session_timeout_ms
            <= candidate.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return JoinResult(ErrorCode.invalid_session_timeout, member_id=member_id)
        if candidate.rebalance_timeout_ms < 0:
            # JoinGroup v0 had no rebalance timeout
            candidate.rebalance_timeout_ms = candidate.session_timeout_ms
        group = self.groups.get(group_id)
        if group is not None and group.consumer is not None:
            # Empty (with members, `classic_members` serves the join)
            log.info("group %s: the empty consumer group becomes a classic group", group_id)
            group.consumer = None
            self._runtime.write_behind(
                group_id, consumer_records.group_tombstones(group_id), now_ms
            )
        if group is None or group.state == State.DEAD:
            if member_id:
                return JoinResult(ErrorCode.unknown_member_id, member_id=member_id)
            group = self.groups[group_id] = Group(group_id, now_ms)
        if not group.supports(candidate.protocol_type, candidate.protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id)
        if member_id in group.pending_members:
            # The second JoinGroup of KIP-394, with the id the first one handed out.
            del group.pending_members[member_id]
            candidate.group_instance_id = None
            return await self._add_member_and_rebalance(group, candidate, now_ms)
        if not member_id:
            return await self._join_unknown_member(group, candidate, version, now_ms)
        return await self._join_known_member(group, candidate, now_ms)

    async def _join_unknown_member(
        self, group: Group, candidate: group_model.Member, version: int, now_ms: int
    ) -> JoinResult:
        candidate.member_id = f"{candidate.client_id}-{uuid.uuid4()}"
        instance_id = candidate.group_instance_id
        if instance_id and instance_id in group.static_members:
            return await self._rejoin_static_member(group, instance_id, candidate, now_ms)
        if len(group.members) + len(group.pending_members) >= self.config.max_group_size:
            return JoinResult(ErrorCode.group_max_size_reached)
        if not instance_id and version >= MEMBER_ID_REQUIRED_MIN_VERSION:
            # KIP-394: hand out the id first; the member joins for real with it.
            group.pending_members[candidate.member_id] = now_ms + candidate.session_timeout_ms
            return JoinResult(ErrorCode.member_id_required, member_id=candidate.member_id)
        return await self._add_member_and_rebalance(group, candidate, now_ms)

    async def _add_member_and_rebalance(
        self, group: Group, member: group_model.Member, now_ms: int
    ) -> JoinResult:
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = waiter
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        group.members[member.member_id] = member
        if member.group_instance_id:
            group.static_members[member.group_instance_id] = member.member_id
        if group.protocol_type is None:
            group.protocol_type = member.protocol_type
        if group.leader_id is None:
            group.leader_id = member.member_id
        self.rebalance.maybe_prepare(group, now_ms, f"member {member.member_id} joined")
        self.rebalance.maybe_complete_join(group, now_ms)
        return await waiter

    async def _rejoin_static_member(
        self, group: Group, instance_id: str, candidate: group_model.Member, now_ms: int
    ) -> JoinResult:
        # A static member coming back (e.g. after a restart) replaces its old member id
        # without a rebalance when nothing it subscribes to changed (KIP-345).
        new_member_id = candidate.member_id
        old_id = group.static_members[instance_id]
        old = group.members.pop(old_id)
        rebalance.fence(old)
        before = (old.session_timeout_ms, old.protocols, group.leader_id)
        old.member_id = new_member_id
        old.session_timeout_ms = candidate.session_timeout_ms
        old.heartbeat_deadline_ms = now_ms + candidate.session_timeout_ms
        group.members[new_member_id] = old
        group.static_members[instance_id] = new_member_id
        if group.leader_id == old_id:
            group.leader_id = new_member_id
        changed = old.protocols != candidate.protocols
        old.protocols = list(candidate.protocols)
        if group.state == State.STABLE and not changed:
            generation = group.generation_id
            try:
                await self._runtime.write(group.group_id, [runtime.group_entry(group)], now_ms)
            except offsets_log.StoreFailed as error:
                # Kafka puts the old member id back and answers the store's error.
                log.error(
                    "group %s: static member %s not stored: %s", group.group_id, instance_id, error
                )
                if group.members.get(new_member_id) is old and group.generation_id == generation:
                    del group.members[new_member_id]
                    old.member_id = old_id
                    old.session_timeout_ms, old.protocols, group.leader_id = before
                    group.members[old_id] = old
                    group.static_members[instance_id] = old_id
                return JoinResult(ErrorCode.not_coordinator)  # the new id is void
            return JoinResult(
                ErrorCode.none,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader_id=group.leader_id or "",
                member_id=new_member_id,
                skip_assignment=True,
            )
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        old.join_waiter = waiter
        self.rebalance.maybe_prepare(group, now_ms, f"static member {instance_id} rejoined")
        self.rebalance.maybe_complete_join(group, now_ms)
        return await waiter

    async def _join_known_member(
        self, group: Group, candidate: group_model.Member, now_ms: int
    ) -> JoinResult:
        member_id, protocols = candidate.member_id, candidate.protocols
        if group.is_static_member_fenced(candidate.group_instance_id, member_id):
            return JoinResult(ErrorCode.fenced_instance_id, member_id=member_id)
        member = group.members.get(member_id)
        if member is None:
            return JoinResult(ErrorCode.unknown_member_id, member_id=member_id)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state == State.PREPARING_REBALANCE:
            member.protocols = list(protocols)
            waiter = _replace_join_waiter(member)
            self.rebalance.maybe_complete_join(group, now_ms)
        elif group.state == State.COMPLETING_REBALANCE and member.protocols == protocols:
            # The join response got lost: answer it again, same generation.
            return rebalance.join_result_for(group, member)
        elif (
            group.state == State.STABLE
            and member.member_id != group.leader_id
            and member.protocols == protocols
        ):
            return rebalance.join_result_for(group, member)
        else:
            member.protocols = list(protocols)
            waiter = _replace_join_waiter(member)
            self.rebalance.prepare(group, now_ms, f"member {member_id} rejoined")
            self.rebalance.maybe_complete_join(group, now_ms)
        return await waiter

    # SyncGroup -----------------------------------------------------------------------

    async def sync(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: list[tuple[str, bytes]],
        now_ms: int,
    ) -> SyncResult:
        group = self.groups.get(group_id)
        if group is None or group.state == State.DEAD:
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_static_member_fenced(group_instance_id, member_id):
            return SyncResult(ErrorCode.fenced_instance_id)
        member = group.members.get(member_id)
        if member is None:
            return SyncResult(ErrorCode.unknown_member_id)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state == State.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.rebalance_in_progress)
        if group.state == State.STABLE:
            return _sync_result(group, member)
        if group.state != State.COMPLETING_REBALANCE:
            return SyncResult(ErrorCode.unknown_member_id)
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        rebalance.answer_sync(member, SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_waiter = waiter
        if member_id == group.leader_id:
            await self._store_assignment(group, dict(assignments), now_ms)
        return await waiter

    async def _store_assignment(self, group: Group, given: dict[str, bytes], now_ms: int) -> None:
        """Write the generation's assignment; hand it out once written, unless the group
        moved on meanwhile."""
        generation = group.generation_id

        def still_waiting() -> bool:
            return group.state == State.COMPLETING_REBALANCE and group.generation_id == generation

        def hand_out() -> None:
            if not still_waiting():
                return
            for each in group.members.values():
                each.assignment = given.get(each.member_id, b"")
            group.transition(State.STABLE, now_ms)
            for each in group.members.values():
                rebalance.answer_sync(each, _sync_result(group, each))

        entry = runtime.group_entry(group, given)
        try:
            await self._runtime.write(group.group_id, [entry], now_ms, on_written=hand_out)
        except offsets_log.StoreFailed as error:
            log.error("group %s: assignment not stored: %s", group.group_id, error)
            if still_waiting():
                # Kafka's resetAndPropagateAssignmentError, then a new rebalance.
                for each in group.members.values():
                    rebalance.answer_sync(each, SyncResult(ErrorCode.not_coordinator))
                self.rebalance.prepare(group, now_ms, "its assignment could not be stored")

    # Heartbeat and LeaveGroup --------------------------------------------------------

    def heartbeat(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        now_ms: int,
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or group.state in (State.DEAD, State.EMPTY):
            return ErrorCode.unknown_member_id
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.fenced_instance_id
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state == State.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(
        self, group_id: str, leaving: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        group = self.groups.get(group_id)
        if group is None or group.state == State.DEAD:
            return ErrorCode.unknown_member_id, []
        results = []
        for member_id, instance_id in leaving:
            if instance_id:
                member_id = group.static_members.get(instance_id, member_id)
            member = group.members.get(member_id)
            if member is None:
                if member_id in group.pending_members:
                    del group.pending_members[member_id]
                    results.append((member_id, instance_id, ErrorCode.none))
                else:
                    results.append((member_id, instance_id, ErrorCode.unknown_member_id))
                continue
            rebalance.remove_member(group, member)
            results.append((member_id, instance_id, ErrorCode.none))
            log.info("group %s: member %s left", group_id, member_id)
            self.rebalance.member_gone(group, now_ms, f"member {member_id} left")
        return ErrorCode.none, results

    def tick(self, now_ms: int) -> None:
        for group in list(self.groups.values()):
            self.rebalance.tick(group, now_ms)


def _replace_join_waiter(member: group_model.Member) -> asyncio.Future[JoinResult]:
    # A member that sends JoinGroup again while one is parked (its client timed out and
    # retried) gets the answer on the new request only.
    if member.join_waiter is not None and not member.join_waiter.done():
        member.join_waiter.set_result(
            JoinResult(ErrorCode.unknown_member_id, member_id=member.member_id)
        )
    waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
    member.join_waiter = waiter
    return waiter


def _sync_result(group: Group, member: group_model.Member) -> SyncResult:
    return SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment)
