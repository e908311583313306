"""Rebalances of the classic protocol: preparing one, completing the join phase (a new
generation, its leader and protocol), removing and fencing members, and the timers
(sessions, KIP-394 pending members, rebalance and sync timeouts).

JoinGroup and SyncGroup answers are futures parked on the members; this module resolves
them. Time comes from `now_ms` arguments only.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from strom.coordinator import group as group_model
from strom.coordinator import runtime, states

log = logging.getLogger(__name__)

State = states.GroupState


class Rebalancer:
    def __init__(self, config: group_model.CoordinatorConfig, writer: runtime.Runtime) -> None:
        self.config = config
        self._runtime = writer

    def maybe_prepare(self, group: group_model.Group, now_ms: int, reason: str) -> None:
        if group.state in (State.EMPTY, State.STABLE, State.COMPLETING_REBALANCE):
            self.prepare(group, now_ms, reason)

    def prepare(self, group: group_model.Group, now_ms: int, reason: str) -> None:
        if group.state == State.COMPLETING_REBALANCE:
            # Members waiting for their assignment must rejoin the new generation.
            for member in group.members.values():
                answer_sync(member, group_model.SyncResult(ErrorCode.rebalance_in_progress))
        delay = group.rebalance_timeout_ms()
        if group.state == State.EMPTY:
            # The first members of a group: wait a little for the others (KIP-134).
            delay = min(self.config.initial_rebalance_delay_ms, delay)
            group.rebalance_deadline_ms = now_ms + delay
            group.initial_delay_until_ms = now_ms + delay
        else:
            group.rebalance_deadline_ms = now_ms + delay
        log.info(
            "group %s: preparing to rebalance in generation %d (%s)",
            group.group_id,
            group.generation_id,
            reason,
        )
        group.transition(State.PREPARING_REBALANCE, now_ms)

    def maybe_complete_join(self, group: group_model.Group, now_ms: int) -> None:
        if group.state != State.PREPARING_REBALANCE:
            return
        if group.initial_delay_until_ms is not None:
            # A new group's first rebalance ends at its timer (`tick`), never on a join,
            # even with group.initial.rebalance.delay.ms=0: Kafka's maybeCompleteJoinPhase
            # waits while the previous state is Empty. Members that join right after the
            # first one (two static members subscribing at once) share generation 1.
            return
        if group.all_joined():
            self.complete_join(group, now_ms)

    def complete_join(self, group: group_model.Group, now_ms: int) -> None:
        group.initial_delay_until_ms = None
        # Members that did not rejoin in time leave the group.
        for member in [m for m in group.members.values() if m.join_waiter is None]:
            remove_member(group, member)
        group.pending_members.clear()
        group.generation_id += 1
        group.rebalance_deadline_ms = None
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(State.EMPTY, now_ms)
            self._runtime.write_behind(group.group_id, [runtime.group_entry(group)], now_ms)
            return
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.protocol_name = group.select_protocol()
        group.transition(State.COMPLETING_REBALANCE, now_ms)
        log.info(
            "group %s: generation %d with %d member(s), protocol %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )
        for member in group.members.values():
            member.assignment = b""
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            waiter, member.join_waiter = member.join_waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result(join_result_for(group, member))

    def member_gone(self, group: group_model.Group, now_ms: int, reason: str) -> None:
        if group.state in (State.STABLE, State.COMPLETING_REBALANCE):
            self.prepare(group, now_ms, reason)
        self.maybe_complete_join(group, now_ms)

    def tick(self, group: group_model.Group, now_ms: int) -> None:
        """Expire sessions, pending members and rebalance timeouts due at `now_ms`."""
        for member_id, deadline in list(group.pending_members.items()):
            if now_ms >= deadline:
                del group.pending_members[member_id]
        for member in list(group.members.values()):
            waiting_to_join = member.join_waiter is not None
            if not waiting_to_join and now_ms >= member.heartbeat_deadline_ms:
                log.info(
                    "group %s: member %s expired after %d ms without a heartbeat",
                    group.group_id,
                    member.member_id,
                    member.session_timeout_ms,
                )
                remove_member(group, member)
                self.member_gone(group, now_ms, f"member {member.member_id} expired")
        if group.state == State.PREPARING_REBALANCE:
            rebalance_deadline = group.rebalance_deadline_ms
            if rebalance_deadline is not None and now_ms >= rebalance_deadline:
                self.complete_join(group, now_ms)
            else:
                self.maybe_complete_join(group, now_ms)
        elif (
            group.state == State.COMPLETING_REBALANCE
            and now_ms >= group.state_timestamp_ms + group.rebalance_timeout_ms()
        ):
            # The leader never sent the assignment (or members never asked for it):
            # drop who did not sync and try again, as Kafka's pending-sync timeout does.
            for member in [m for m in group.members.values() if m.sync_waiter is None]:
                remove_member(group, member)
            self.member_gone(group, now_ms, "members did not sync in time")


def join_result_for(group: group_model.Group, member: group_model.Member) -> group_model.JoinResult:
    is_leader = member.member_id == group.leader_id
    protocol = group.protocol_name or ""
    return group_model.JoinResult(
        ErrorCode.none,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader_id=group.leader_id or "",
        member_id=member.member_id,
        members=[
            (m.member_id, m.group_instance_id, m.metadata_for(protocol))
            for m in group.members.values()
        ]
        if is_leader
        else [],
    )


def remove_member(group: group_model.Group, member: group_model.Member) -> None:
    group.members.pop(member.member_id, None)
    if member.group_instance_id:
        group.static_members.pop(member.group_instance_id, None)
    fence(member)
    if group.leader_id == member.member_id:
        group.leader_id = next(iter(group.members), None)


def fence(member: group_model.Member) -> None:
    fenced = group_model.JoinResult(ErrorCode.unknown_member_id, member_id=member.member_id)
    if member.join_waiter is not None and not member.join_waiter.done():
        member.join_waiter.set_result(fenced)
    member.join_waiter = None
    answer_sync(member, group_model.SyncResult(ErrorCode.unknown_member_id))


def answer_join(member: group_model.Member, result: group_model.JoinResult) -> None:
    if member.join_waiter is not None and not member.join_waiter.done():
        member.join_waiter.set_result(result)
    member.join_waiter = None


def answer_sync(member: group_model.Member, result: group_model.SyncResult) -> None:
    if member.sync_waiter is not None and not member.sync_waiter.done():
        member.sync_waiter.set_result(result)
    member.sync_waiter = None
