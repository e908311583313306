"""The classic consumer group protocol: Kafka's group state machine and committed offsets.

States (as Kafka's GroupCoordinator): Empty -> PreparingRebalance -> CompletingRebalance
-> Stable, back to PreparingRebalance when membership or subscriptions change, and Dead
when deleted. JoinGroup and SyncGroup answers wait for the rebalance, so they are
futures resolved by later requests or by `tick` (timeouts). Time comes from `now_ms`
arguments only, so tests drive the clock; the broker calls `tick` periodically.

Every change that must survive a restart (a generation's assignment, a commit, a
deletion) goes to the `store` as a record of `__consumer_offsets`.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from strom.coordinator import offsets_records as records

log = logging.getLogger(__name__)

# Set on JoinGroup with an empty member id, from JoinGroup v4 on (KIP-394).
MEMBER_ID_REQUIRED_MIN_VERSION = 4
CONSUMER_PROTOCOL = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_group_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offset_metadata_max_bytes: int = 4096


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    heartbeat_deadline_ms: int = 0
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""


class Group:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # member id -> deadline (KIP-394)
        self.rebalance_deadline_ms: int | None = None
        self.initial_delay_until_ms: int | None = None  # KIP-134 delay of a new group
        self.offsets: dict[tuple[str, int], records.CommittedOffset] = {}

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        """Another incarnation of this static member has joined since (KIP-345)."""
        if not instance_id:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Kafka's rule: a new member must share the group's protocol type and at least
        one protocol with every current member."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        return bool({name for name, _ in protocols} & self._common_protocols())

    def _common_protocols(self) -> set[str]:
        return set.intersection(*({name for name, _ in m.protocols} for m in self.members.values()))

    def select_protocol(self) -> str | None:
        """The common protocol most members list first (each votes once, like Kafka)."""
        if not self.members:
            return None
        common = self._common_protocols()
        votes = collections.Counter(
            next(name for name, _ in m.protocols if name in common) for m in self.members.values()
        )
        return max(votes, key=lambda name: votes[name]) if votes else None

    def all_joined(self) -> bool:
        return all(m.join_waiter is not None for m in self.members.values()) and not (
            self.pending_members
        )

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def to_record(self) -> records.GroupRecord:
        protocol = self.protocol_name
        return records.GroupRecord(
            protocol_type=self.protocol_type or "",
            generation_id=self.generation_id,
            protocol_name=protocol,
            leader_id=self.leader_id,
            state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(
                records.MemberRecord(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata_for(protocol) if protocol else b"",
                    m.assignment,
                )
                for m in self.members.values()
            ),
        )


StoreCallback = Callable[[str, list[tuple[bytes, bytes | None]]], None]


class StoreFailed(Exception):
    """The store could not write __consumer_offsets (e.g. a full disk)."""


class GroupCoordinator:
    """All groups this broker coordinates. `store(group_id, [(key, value)])` persists."""

    def __init__(self, config: CoordinatorConfig, store: StoreCallback) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self._store = store

    # Loading -------------------------------------------------------------------------

    def load(self, entries: Iterable[tuple[bytes, bytes | None]], now_ms: int) -> None:
        """Replay `__consumer_offsets` records in log order (later records win)."""
        for key_bytes, value in entries:
            try:
                key = records.parse_key(key_bytes)
                if isinstance(key, records.OffsetKey):
                    group = self._group_for_load(key.group_id, now_ms)
                    if value is None:
                        group.offsets.pop((key.topic, key.partition), None)
                    else:
                        group.offsets[(key.topic, key.partition)] = records.parse_offset_value(
                            value
                        )
                elif value is None:
                    self.groups.pop(key.group_id, None)
                else:
                    self._restore_group(key.group_id, records.parse_group_value(value), now_ms)
            except records.RecordFormatError as error:
                log.warning("skipping unreadable __consumer_offsets record: %s", error)
        for group_id in [g for g, group in self.groups.items() if _is_empty_husk(group)]:
            del self.groups[group_id]

    def _group_for_load(self, group_id: str, now_ms: int) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, now_ms)
        return group

    def _restore_group(self, group_id: str, stored: records.GroupRecord, now_ms: int) -> None:
        group = self._group_for_load(group_id, now_ms)
        group.generation_id = stored.generation_id
        group.protocol_type = stored.protocol_type or None
        group.protocol_name = stored.protocol_name
        group.leader_id = stored.leader_id
        group.members.clear()
        group.static_members.clear()
        for m in stored.members:
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout_ms=m.session_timeout_ms,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                protocol_type=stored.protocol_type,
                protocols=[(stored.protocol_name or "", m.subscription)],
                assignment=m.assignment,
                # Members get a full session to find the restarted coordinator.
                heartbeat_deadline_ms=now_ms + m.session_timeout_ms,
            )
            group.members[m.member_id] = member
            if m.group_instance_id:
                group.static_members[m.group_instance_id] = m.member_id
        group.transition(GroupState.STABLE if group.members else GroupState.EMPTY, now_ms)
        group.state_timestamp_ms = stored.state_timestamp_ms or now_ms

    # JoinGroup -----------------------------------------------------------------------

    async def join(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        version: int,
        now_ms: int,
    ) -> JoinResult:
        if not group_id:
            return JoinResult(ErrorCode.invalid_group_id, member_id=member_id)
        if not (
            self.config.min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return JoinResult(ErrorCode.invalid_session_timeout, member_id=member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 had no rebalance timeout
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            if member_id:
                return JoinResult(ErrorCode.unknown_member_id, member_id=member_id)
            group = self.groups[group_id] = Group(group_id, now_ms)
        if not group.supports(protocol_type, protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id)

        candidate = Member(
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=protocol_type,
            protocols=list(protocols),
        )
        if member_id in group.pending_members:
            # The second JoinGroup of KIP-394, with the id the first one handed out.
            del group.pending_members[member_id]
            candidate.group_instance_id = None
            return await self._add_member_and_rebalance(group, candidate, now_ms)
        if not member_id:
            return await self._join_unknown_member(group, candidate, version, now_ms)
        return await self._join_known_member(group, member_id, group_instance_id, protocols, now_ms)

    async def _join_unknown_member(
        self, group: Group, candidate: Member, version: int, now_ms: int
    ) -> JoinResult:
        candidate.member_id = f"{candidate.client_id}-{uuid.uuid4()}"
        instance_id = candidate.group_instance_id
        if instance_id and instance_id in group.static_members:
            return await self._rejoin_static_member(
                group,
                instance_id,
                candidate.member_id,
                candidate.protocols,
                candidate.session_timeout_ms,
                now_ms,
            )
        if len(group.members) + len(group.pending_members) >= self.config.max_group_size:
            return JoinResult(ErrorCode.group_max_size_reached)
        if not instance_id and version >= MEMBER_ID_REQUIRED_MIN_VERSION:
            # KIP-394: hand out the id first; the member joins for real with it.
            group.pending_members[candidate.member_id] = now_ms + candidate.session_timeout_ms
            return JoinResult(ErrorCode.member_id_required, member_id=candidate.member_id)
        return await self._add_member_and_rebalance(group, candidate, now_ms)

    async def _add_member_and_rebalance(
        self, group: Group, member: Member, now_ms: int
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
        self._maybe_prepare_rebalance(group, now_ms, f"member {member.member_id} joined")
        self._maybe_complete_join(group, now_ms)
        return await waiter

    async def _rejoin_static_member(
        self,
        group: Group,
        instance_id: str,
        new_member_id: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        now_ms: int,
    ) -> JoinResult:
        # A static member coming back (e.g. after a restart) replaces its old member id
        # without a rebalance when nothing it subscribes to changed (KIP-345).
        old_id = group.static_members[instance_id]
        old = group.members.pop(old_id)
        self._fence(old)
        old.member_id = new_member_id
        old.session_timeout_ms = session_timeout_ms
        old.heartbeat_deadline_ms = now_ms + session_timeout_ms
        group.members[new_member_id] = old
        group.static_members[instance_id] = new_member_id
        if group.leader_id == old_id:
            group.leader_id = new_member_id
        changed = old.protocols != list(protocols)
        old.protocols = list(protocols)
        if group.state == GroupState.STABLE and not changed:
            self._persist_group(group)
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
        self._maybe_prepare_rebalance(group, now_ms, f"static member {instance_id} rejoined")
        self._maybe_complete_join(group, now_ms)
        return await waiter

    async def _join_known_member(
        self,
        group: Group,
        member_id: str,
        group_instance_id: str | None,
        protocols: list[tuple[str, bytes]],
        now_ms: int,
    ) -> JoinResult:
        if group.is_static_member_fenced(group_instance_id, member_id):
            return JoinResult(ErrorCode.fenced_instance_id, member_id=member_id)
        member = group.members.get(member_id)
        if member is None:
            return JoinResult(ErrorCode.unknown_member_id, member_id=member_id)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state == GroupState.PREPARING_REBALANCE:
            member.protocols = list(protocols)
            waiter = self._replace_join_waiter(member)
            self._maybe_complete_join(group, now_ms)
        elif group.state == GroupState.COMPLETING_REBALANCE and member.protocols == list(protocols):
            # The join response got lost: answer it again, same generation.
            return self._join_result_for(group, member)
        elif (
            group.state == GroupState.STABLE
            and member.member_id != group.leader_id
            and member.protocols == list(protocols)
        ):
            return self._join_result_for(group, member)
        else:
            member.protocols = list(protocols)
            waiter = self._replace_join_waiter(member)
            self._prepare_rebalance(group, now_ms, f"member {member_id} rejoined")
            self._maybe_complete_join(group, now_ms)
        return await waiter

    def _replace_join_waiter(self, member: Member) -> asyncio.Future[JoinResult]:
        # A member that sends JoinGroup again while one is parked (its client timed
        # out and retried) gets the answer on the new request only.
        if member.join_waiter is not None and not member.join_waiter.done():
            member.join_waiter.set_result(
                JoinResult(ErrorCode.unknown_member_id, member_id=member.member_id)
            )
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = waiter
        return waiter

    def _join_result_for(self, group: Group, member: Member) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        protocol = group.protocol_name or ""
        return JoinResult(
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

    # Rebalancing ---------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, now_ms: int, reason: str) -> None:
        if group.state in (
            GroupState.EMPTY,
            GroupState.STABLE,
            GroupState.COMPLETING_REBALANCE,
        ):
            self._prepare_rebalance(group, now_ms, reason)

    def _prepare_rebalance(self, group: Group, now_ms: int, reason: str) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE:
            # Members waiting for their assignment must rejoin the new generation.
            for member in group.members.values():
                self._answer_sync(member, SyncResult(ErrorCode.rebalance_in_progress))
        delay = group.rebalance_timeout_ms()
        if group.state == GroupState.EMPTY:
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
        group.transition(GroupState.PREPARING_REBALANCE, now_ms)

    def _maybe_complete_join(self, group: Group, now_ms: int) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        initial_until = group.initial_delay_until_ms
        if initial_until is not None and now_ms < initial_until:
            return
        if group.all_joined():
            self._complete_join(group, now_ms)

    def _complete_join(self, group: Group, now_ms: int) -> None:
        group.initial_delay_until_ms = None
        # Members that did not rejoin in time leave the group.
        for member in [m for m in group.members.values() if m.join_waiter is None]:
            self._remove_member(group, member)
        group.pending_members.clear()
        group.generation_id += 1
        group.rebalance_deadline_ms = None
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupState.EMPTY, now_ms)
            self._persist_group(group)
            return
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.protocol_name = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE, now_ms)
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
                waiter.set_result(self._join_result_for(group, member))

    def _remove_member(self, group: Group, member: Member) -> None:
        group.members.pop(member.member_id, None)
        if member.group_instance_id:
            group.static_members.pop(member.group_instance_id, None)
        self._fence(member)
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _fence(self, member: Member) -> None:
        fenced = JoinResult(ErrorCode.unknown_member_id, member_id=member.member_id)
        if member.join_waiter is not None and not member.join_waiter.done():
            member.join_waiter.set_result(fenced)
        member.join_waiter = None
        self._answer_sync(member, SyncResult(ErrorCode.unknown_member_id))

    def _answer_sync(self, member: Member, result: SyncResult) -> None:
        if member.sync_waiter is not None and not member.sync_waiter.done():
            member.sync_waiter.set_result(result)
        member.sync_waiter = None

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
        if group is None or group.state == GroupState.DEAD:
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
        if group.state == GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.rebalance_in_progress)
        if group.state == GroupState.STABLE:
            return self._sync_result(group, member)
        if group.state != GroupState.COMPLETING_REBALANCE:
            return SyncResult(ErrorCode.unknown_member_id)
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        self._answer_sync(member, SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_waiter = waiter
        if member_id == group.leader_id:
            given = dict(assignments)
            for each in group.members.values():
                each.assignment = given.get(each.member_id, b"")
            self._persist_group(group)
            group.transition(GroupState.STABLE, now_ms)
            for each in group.members.values():
                self._answer_sync(each, self._sync_result(group, each))
        return await waiter

    def _sync_result(self, group: Group, member: Member) -> SyncResult:
        return SyncResult(
            ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment
        )

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
        if group is None or group.state in (GroupState.DEAD, GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.fenced_instance_id
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(
        self, group_id: str, leaving: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
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
            self._remove_member(group, member)
            results.append((member_id, instance_id, ErrorCode.none))
            log.info("group %s: member %s left", group_id, member_id)
            self._member_gone(group, now_ms, f"member {member_id} left")
        return ErrorCode.none, results

    def _member_gone(self, group: Group, now_ms: int, reason: str) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms, reason)
        self._maybe_complete_join(group, now_ms)

    # Timers --------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Expire sessions, pending members and rebalance timeouts due at `now_ms`."""
        for group in list(self.groups.values()):
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
                    self._remove_member(group, member)
                    self._member_gone(group, now_ms, f"member {member.member_id} expired")
            if group.state == GroupState.PREPARING_REBALANCE:
                rebalance_deadline = group.rebalance_deadline_ms
                if rebalance_deadline is not None and now_ms >= rebalance_deadline:
                    self._complete_join(group, now_ms)
                else:
                    self._maybe_complete_join(group, now_ms)
            elif (
                group.state == GroupState.COMPLETING_REBALANCE
                and now_ms >= group.state_timestamp_ms + group.rebalance_timeout_ms()
            ):
                # The leader never sent the assignment (or members never asked for it):
                # drop who did not sync and try again, as Kafka's pending-sync timeout does.
                for member in [m for m in group.members.values() if m.sync_waiter is None]:
                    self._remove_member(group, member)
                self._member_gone(group, now_ms, "members did not sync in time")

    def expire_offsets(self, now_ms: int) -> int:
        """Drop committed offsets older than offsets.retention (Kafka 2.1+ rules): for a
        group without members, counted from when it became empty; for standalone
        commits, from the commit itself. Returns how many were dropped."""
        dropped = 0
        retention = self.config.offsets_retention_ms
        for group in list(self.groups.values()):
            if group.state != GroupState.EMPTY:
                continue
            expired = [
                key
                for key, committed in group.offsets.items()
                if now_ms - max(committed.commit_timestamp_ms, group.state_timestamp_ms)
                >= retention
            ]
            dropped += self._drop_offsets(group, expired)
        return dropped

    def _drop_offsets(self, group: Group, keys: list[tuple[str, int]]) -> int:
        """Forget these committed offsets and store their tombstones; a group left with
        neither members nor offsets is deleted, as Kafka's cleanup does."""
        if not keys:
            return 0
        for key in keys:
            del group.offsets[key]
        self._store_or_log(
            group.group_id,
            [(records.offset_key(records.OffsetKey(group.group_id, t, p)), None) for t, p in keys],
        )
        if group.state == GroupState.EMPTY and not group.offsets and not group.members:
            self._delete_group(group)
        return len(keys)

    # Offsets -------------------------------------------------------------------------

    def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[tuple[str, int, int, int, str | None]],
        now_ms: int,
    ) -> ErrorCode | dict[tuple[str, int], ErrorCode]:
        """Commit (topic, partition, offset, leader epoch, metadata) entries.

        Returns one error for the whole request, or an error per partition."""
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            if generation_id >= 0:
                return ErrorCode.illegal_generation
            group = self.groups[group_id] = Group(group_id, now_ms)
        if generation_id < 0 and group.state == GroupState.EMPTY:
            pass  # a commit from outside the group's protocol: admin tools, assign() users
        elif group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.fenced_instance_id
        elif group.state == GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        elif member_id not in group.members:
            return ErrorCode.unknown_member_id
        elif generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        else:
            member = group.members[member_id]
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        errors: dict[tuple[str, int], ErrorCode] = {}
        entries: list[tuple[bytes, bytes | None]] = []
        accepted: dict[tuple[str, int], records.CommittedOffset] = {}
        for topic, partition, offset, leader_epoch, metadata in offsets:
            if (
                metadata is not None
                and len(metadata.encode()) > self.config.offset_metadata_max_bytes
            ):
                errors[(topic, partition)] = ErrorCode.offset_metadata_too_large
                continue
            committed = records.CommittedOffset(offset, leader_epoch, metadata or "", now_ms)
            accepted[(topic, partition)] = committed
            entries.append(
                (
                    records.offset_key(records.OffsetKey(group_id, topic, partition)),
                    records.offset_value(committed),
                )
            )
            errors[(topic, partition)] = ErrorCode.none
        if entries:
            try:
                self._store(group_id, entries)
            except StoreFailed as error:
                # Kafka answers NOT_COORDINATOR when its log cannot take the commit: the
                # client looks the coordinator up again and retries.
                log.error("group %s: offsets not committed: %s", group_id, error)
                return ErrorCode.not_coordinator
        group.offsets.update(accepted)  # only what is stored is acknowledged
        return errors

    def fetch_offsets(
        self, group_id: str, wanted: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], records.CommittedOffset | None]:
        """Committed offsets of `wanted` partitions (None: all the group has)."""
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if wanted is None:
            return dict(stored)
        return {key: stored.get(key) for key in wanted}

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> ErrorCode | dict[tuple[str, int], ErrorCode]:
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.group_id_not_found
        subscribed = self._subscribed_topics(group)
        results: dict[tuple[str, int], ErrorCode] = {}
        deleted = []
        for topic, partition in partitions:
            if topic in subscribed:
                results[(topic, partition)] = ErrorCode.group_subscribed_to_topic
                continue
            if (topic, partition) in group.offsets and (topic, partition) not in deleted:
                deleted.append((topic, partition))
            results[(topic, partition)] = ErrorCode.none
        self._drop_offsets(group, deleted)
        return results

    def forget_topic(self, topic: str) -> int:
        """A deleted topic's committed offsets go too (Kafka's onPartitionsDeleted), so a
        topic created again under the same name starts without them. Returns the count."""
        return sum(
            self._drop_offsets(group, [key for key in group.offsets if key[0] == topic])
            for group in list(self.groups.values())
        )

    def _subscribed_topics(self, group: Group) -> set[str]:
        if group.state == GroupState.EMPTY or group.protocol_type != CONSUMER_PROTOCOL:
            return set()
        topics: set[str] = set()
        for member in group.members.values():
            topics |= consumer_subscription(member.metadata_for(group.protocol_name or ""))
        return topics

    # Admin ---------------------------------------------------------------------------

    def list_groups(self, states: set[str] | None) -> list[Group]:
        return [
            g
            for g in self.groups.values()
            if g.state != GroupState.DEAD and (not states or g.state.value.lower() in states)
        ]

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.state == GroupState.DEAD:
                results[group_id] = ErrorCode.group_id_not_found
            elif group.state != GroupState.EMPTY:
                results[group_id] = ErrorCode.non_empty_group
            else:
                self._delete_group(group)
                results[group_id] = ErrorCode.none
        return results

    def _delete_group(self, group: Group) -> None:
        entries: list[tuple[bytes, bytes | None]] = [
            (records.offset_key(records.OffsetKey(group.group_id, t, p)), None)
            for t, p in group.offsets
        ]
        entries.append((records.group_key(records.GroupKey(group.group_id)), None))
        group.offsets.clear()
        group.transition(GroupState.DEAD, group.state_timestamp_ms)
        del self.groups[group.group_id]
        self._store_or_log(group.group_id, entries)

    def _persist_group(self, group: Group) -> None:
        self._store_or_log(
            group.group_id,
            [
                (
                    records.group_key(records.GroupKey(group.group_id)),
                    records.group_value(group.to_record()),
                )
            ],
        )

    def _store_or_log(self, group_id: str, entries: list[tuple[bytes, bytes | None]]) -> None:
        """Writes whose failure does not stop the protocol: group metadata and tombstones.
        Memory goes on; a restart before the next successful write finds the previous
        state (members rejoin, a deleted offset or group may come back)."""
        try:
            self._store(group_id, entries)
        except StoreFailed as error:
            log.error("group %s: __consumer_offsets not written: %s", group_id, error)


def _is_empty_husk(group: Group) -> bool:
    return not group.members and not group.offsets and group.protocol_type is None


def consumer_subscription(metadata: bytes) -> set[str]:
    """Topics in a consumer protocol subscription (ConsumerProtocolSubscription, any
    version: int16 version, then an array of strings)."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        position = 6
        topics = set()
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", metadata, position)
            position += 2
            topics.add(metadata[position : position + length].decode())
            position += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()
