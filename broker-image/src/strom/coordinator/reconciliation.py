"""One member's next step towards its target assignment (Kafka's CurrentAssignmentBuilder).

A member first revokes what it must give up, staying in its epoch in the
UNREVOKED_PARTITIONS state until its heartbeat no longer lists those partitions; only
then does it move to the target epoch. It gets a newly targeted partition only once no
other member holds it (UNRELEASED_PARTITIONS while one does), so no partition is ever
consumed by two members at once.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence

from strom.coordinator.consumer_group import Assignment, ConsumerMember, MemberState

# (topic id, partitions) the member says it owns; None when the heartbeat left them out
Owned = Sequence[tuple[uuid.UUID, Sequence[int]]] | None
OwnerEpoch = Callable[[uuid.UUID, int], int]


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Mapping[uuid.UUID, frozenset[int]],
    owner_epoch: OwnerEpoch,
    owned: Owned,
) -> ConsumerMember:
    if member.state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, owner_epoch, owned)
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        # Revoked: the member moves on from the epoch it revoked in.
        return _next(member, member.member_epoch + 1, target_epoch, target, owner_epoch, owned)
    return _next(member, member.member_epoch, target_epoch, target, owner_epoch, owned)


def _owns_any(owned: Owned, partitions: Assignment) -> bool:
    if owned is None:
        return True  # not told otherwise: it still holds them
    return any(p in partitions.get(topic_id, ()) for topic_id, listed in owned for p in listed)


def _next(
    member: ConsumerMember,
    member_epoch: int,
    target_epoch: int,
    target: Mapping[uuid.UUID, frozenset[int]],
    owner_epoch: OwnerEpoch,
    owned: Owned,
) -> ConsumerMember:
    assigned: Assignment = {}
    revoking: Assignment = {}
    adding: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        kept = current & wanted
        if kept:
            assigned[topic_id] = kept
        if current - kept:
            revoking[topic_id] = current - kept
        for partition in wanted - kept:
            if owner_epoch(topic_id, partition) != -1:
                unreleased = True  # another member still holds it
            else:
                adding.setdefault(topic_id, set()).add(partition)
    if revoking and _owns_any(owned, revoking):
        return _with_epoch(
            member, member_epoch, MemberState.UNREVOKED_PARTITIONS, assigned, revoking
        )
    for topic_id, partitions in adding.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with_epoch(member, target_epoch, state, assigned, {})


def _with_epoch(
    member: ConsumerMember,
    epoch: int,
    state: MemberState,
    assigned: Assignment,
    revoking: Assignment,
) -> ConsumerMember:
    return dataclasses.replace(
        member,
        member_epoch=epoch,
        previous_member_epoch=member.member_epoch,
        state=state,
        assigned=assigned,
        pending_revocation=revoking,
    )
