"""The server-side assignors of consumer-protocol groups (KIP-848): `uniform` (Kafka's
default) and `range`, pure functions of the members' subscriptions and the subscribed
topics' partition counts.

An assignor returns each member's target assignment (topic id -> partitions). Members
get their share of it through reconciliation (`reconciliation`), so an assignor only
has to be balanced and, for `uniform`, sticky: a partition stays with its member unless
balance needs it elsewhere, which keeps revocations few when members come and go.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Assignment = dict[uuid.UUID, frozenset[int]]
TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class AssignorMember:
    subscribed: frozenset[uuid.UUID]
    # the member's current target assignment, which `uniform` keeps where it can
    current: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)


Assignor = Callable[[Mapping[str, AssignorMember], Mapping[uuid.UUID, int]], dict[str, Assignment]]


def uniform(
    members: Mapping[str, AssignorMember], partition_counts: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    """Every subscribed partition to one member, counts within one of each other among
    members that could take a partition of the other (Kafka's UniformAssignor goal),
    keeping current owners where balance allows."""
    owned: dict[str, list[TopicPartition]] = {member_id: [] for member_id in sorted(members)}
    taken: set[TopicPartition] = set()
    for member_id in owned:
        member = members[member_id]
        for topic_id, partitions in sorted(member.current.items(), key=_topic_order):
            if topic_id not in member.subscribed:
                continue
            for partition in sorted(partitions):
                key = (topic_id, partition)
                if partition < partition_counts.get(topic_id, 0) and key not in taken:
                    taken.add(key)
                    owned[member_id].append(key)
    eligible = _eligible_members(members, partition_counts)
    for key in _all_partitions(partition_counts, eligible):
        if key not in taken:
            owner = min(eligible[key[0]], key=lambda m: (len(owned[m]), m))
            owned[owner].append(key)
    _balance(owned, eligible)
    return {member_id: _as_assignment(keys) for member_id, keys in owned.items()}


def _balance(
    owned: dict[str, list[TopicPartition]], eligible: Mapping[uuid.UUID, list[str]]
) -> None:
    """Move partitions from the fullest members to members with at least two fewer that
    subscribe to their topic, until no such move is left (each move lowers the sum of
    squared counts, so this ends)."""
    moved = True
    while moved:
        moved = False
        for giver in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            keys = owned[giver]
            for index in range(len(keys) - 1, -1, -1):  # newest first: cheap to take
                key = keys[index]
                candidates = [m for m in eligible[key[0]] if len(owned[m]) < len(keys) - 1]
                if candidates:
                    taker = min(candidates, key=lambda m: (len(owned[m]), m))
                    del keys[index]
                    owned[taker].append(key)
                    moved = True
                    break
            if moved:
                break


def range_(
    members: Mapping[str, AssignorMember], partition_counts: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    """Per topic, its subscribers in member id order each take a contiguous range, the
    first ones one more when the partitions do not divide evenly (the classic range)."""
    result: dict[str, Assignment] = {member_id: {} for member_id in members}
    eligible = _eligible_members(members, partition_counts)
    for topic_id, subscribers in eligible.items():
        count = partition_counts[topic_id]
        share, extra = divmod(count, len(subscribers))
        start = 0
        for index, member_id in enumerate(subscribers):
            size = share + (1 if index < extra else 0)
            if size:
                result[member_id][topic_id] = frozenset(range(start, start + size))
            start += size
    return result


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}


def _eligible_members(
    members: Mapping[str, AssignorMember], partition_counts: Mapping[uuid.UUID, int]
) -> dict[uuid.UUID, list[str]]:
    """Topic id -> its subscribers in member id order (topics without any left out)."""
    eligible: dict[uuid.UUID, list[str]] = {}
    for member_id in sorted(members):
        for topic_id in members[member_id].subscribed:
            if topic_id in partition_counts:
                eligible.setdefault(topic_id, []).append(member_id)
    return eligible


def _all_partitions(
    partition_counts: Mapping[uuid.UUID, int], eligible: Mapping[uuid.UUID, list[str]]
) -> list[TopicPartition]:
    return [
        (topic_id, partition)
        for topic_id in sorted(eligible, key=str)
        for partition in range(partition_counts[topic_id])
    ]


def _topic_order(item: tuple[uuid.UUID, frozenset[int]]) -> str:
    return str(item[0])


def _as_assignment(keys: list[TopicPartition]) -> Assignment:
    by_topic: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in keys:
        by_topic.setdefault(topic_id, set()).add(partition)
    return {topic_id: frozenset(partitions) for topic_id, partitions in by_topic.items()}
