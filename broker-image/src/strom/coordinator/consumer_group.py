"""A consumer-protocol group (KIP-848) as the coordinator holds it: the group epoch, the
target assignment and its epoch, the members with their member epochs and current
assignments, and which member epoch owns each partition now.

No I/O and no protocol decisions: `consumer` runs the heartbeat over this model,
`reconciliation` moves one member towards its target, `assignors` compute targets.
"""

from __future__ import annotations

import collections
import enum
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

Assignment = dict[uuid.UUID, frozenset[int]]

# Member epochs with a meaning of their own (ConsumerGroupHeartbeat's).
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.Enum):
    """Kafka's MemberState: where a member is in reaching its target assignment."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # waits for the member to revoke
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # waits for other members to revoke


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"  # the group epoch is ahead of the target assignment's
    RECONCILING = "Reconciling"  # some member has not reached the target assignment
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class ClassicMemberInfo:
    """A member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat) inside
    a consumer group: Kafka's ClassicMemberMetadata."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, ConsumerProtocolSubscription)


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topics: tuple[str, ...] = ()  # sorted
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberInfo | None = None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """What an assignment depends on of a subscribed topic."""

    topic_id: uuid.UUID
    partition_count: int


class TopicLookup(Protocol):
    def __call__(self, name: str) -> TopicMetadata | None:
        """The topic's metadata, None if there is no such topic."""
        ...

    def names(self) -> Iterable[str]:
        """Every topic a subscription may name (internal topics left out)."""
        ...


class NoTopics:
    def __call__(self, name: str) -> TopicMetadata | None:
        return None

    def names(self) -> Iterable[str]:
        return ()


def subscription_metadata(names: set[str], topics: TopicLookup) -> dict[str, TopicMetadata]:
    """The metadata of the subscribed topics that exist."""
    found = {name: topics(name) for name in sorted(names)}
    return {name: meta for name, meta in found.items() if meta is not None}


class ConsumerGroup:
    def __init__(self) -> None:
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}  # member id -> target assignment
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        # each member's regex -> the topic names it matches now
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        self.session_deadlines: dict[str, int] = {}
        # member id -> (the member epoch it must revoke in, the deadline)
        self.revocation_deadlines: dict[str, tuple[int, int]] = {}
        self._owner_epochs: dict[tuple[uuid.UUID, int], int] = {}

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def owner_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The member epoch holding a partition (assigned or not yet revoked); -1 if free."""
        return self._owner_epochs.get((topic_id, partition), -1)

    def put_member(self, member: ConsumerMember) -> None:
        """Add or replace a member, moving the partitions it holds to its new state."""
        previous = self.members.get(member.member_id)
        if previous is not None:
            self._release(previous)
        self.members[member.member_id] = member
        if member.instance_id:
            self.static_members[member.instance_id] = member.member_id
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    self._owner_epochs[(topic_id, partition)] = member.member_epoch

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        if member.instance_id and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        self.session_deadlines.pop(member_id, None)
        self.revocation_deadlines.pop(member_id, None)
        return member

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    if self._owner_epochs.get((topic_id, partition)) == member.member_epoch:
                        del self._owner_epochs[(topic_id, partition)]

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Some partition of the member's target is still held by another member."""
        for topic_id, partitions in self.target.get(member.member_id, {}).items():
            assigned = member.assigned.get(topic_id, frozenset())
            if any(self.owner_epoch(topic_id, p) != -1 for p in partitions - assigned):
                return True
        return False

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {meta.topic_id: name for name, meta in self.subscription_metadata.items()}

    def subscribed_topic_names(self) -> set[str]:
        names = {topic for m in self.members.values() for topic in m.subscribed_topics}
        for matched in self.resolved_regexes.values():
            names |= matched
        return names

    def member_topics(self, member: ConsumerMember) -> set[str]:
        """The topics a member subscribes to: those it names, those its regex matches."""
        matched = self.resolved_regexes.get(member.subscribed_regex or "", frozenset())
        return set(member.subscribed_topics) | matched

    def resolve_regexes(self, topics: TopicLookup) -> None:
        """Match the members' regexes against the topics there are now (Kafka resolves
        them in the background; here on each heartbeat, one pass over the names)."""
        regexes = {m.subscribed_regex for m in self.members.values() if m.subscribed_regex}
        if not regexes:
            self.resolved_regexes = {}
            return
        names = list(topics.names())
        self.resolved_regexes = {
            regex: frozenset(n for n in names if re.fullmatch(regex, n)) for regex in regexes
        }

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members ask for (Kafka's computePreferredServerAssignor)."""
        votes = collections.Counter(
            m.server_assignor for m in self.members.values() if m.server_assignor
        )
        return max(sorted(votes), key=lambda name: votes[name]) if votes else default

    # The member checks of OffsetCommit and OffsetFetch (Kafka's ConsumerGroup
    # validateOffsetCommit / validateOffsetFetch) ---------------------------------------

    def commit_error(self, member_id: str, member_epoch: int, api_version: int) -> ErrorCode:
        if member_epoch < 0 and not self.members:
            return ErrorCode.none  # admin tools, assign() users of an empty group
        # OffsetCommit before v9 has no STALE_MEMBER_EPOCH
        return self._member_error(member_id, member_epoch, stale=api_version >= 9)

    def fetch_error(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        if member_id is None and member_epoch < 0:
            return ErrorCode.none  # a request that names no member: admin tools
        return self._member_error(member_id or "", member_epoch, stale=True)

    def _member_error(self, member_id: str, member_epoch: int, *, stale: bool) -> ErrorCode:
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            # a classic member's epoch is its generation
            if stale and member.classic is None:
                return ErrorCode.stale_member_epoch
            return ErrorCode.illegal_generation
        return ErrorCode.none
