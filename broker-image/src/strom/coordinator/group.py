"""One consumer group as the coordinator holds it in memory: its state, generation,
members (static ones by group.instance.id too) and committed offsets.

No I/O and no protocol decisions here: the protocol (`classic`, `rebalance`), the offsets
(`offsets`) and the replay of `__consumer_offsets` (`runtime`) change a group through
this model, and every state change goes through `Group.transition`, checked against
the table in `states`.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from strom.coordinator import consumer_group, states

CLASSIC = "classic"
CONSUMER = "consumer"


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_group_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offset_metadata_max_bytes: int = 4096
    # KIP-848's consumer protocol
    consumer_protocol_enabled: bool = True
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    consumer_migration_policy: str = "bidirectional"


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


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
        self.state = states.GroupState.EMPTY
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
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        # Offsets committed inside transactions (TxnOffsetCommit), by producer id: they
        # become `offsets` when the producer's commit marker reaches the group's
        # `__consumer_offsets` partition, and go at its abort marker.
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = {}
        # When each offset was written, in log order (Kafka compares record offsets): a
        # transaction's offset must not replace a plain commit written after it.
        self._written = 0
        self._written_at: dict[tuple[str, int], int] = {}
        self._pending_written_at: dict[tuple[int, tuple[str, int]], int] = {}
        # Set while the group runs the consumer protocol (KIP-848); the classic state
        # then stays Empty, without classic members.
        self.consumer: consumer_group.ConsumerGroup | None = None

    @property
    def group_type(self) -> str:
        return CLASSIC if self.consumer is None else CONSUMER

    def state_name(self) -> str:
        """The state as ListGroups and the describe APIs name it, of either protocol."""
        return self.state.value if self.consumer is None else self.consumer.state.value

    def member_count(self) -> int:
        """Members of either protocol."""
        return len(self.members) + (len(self.consumer.members) if self.consumer else 0)

    def is_empty(self) -> bool:
        """No members of either protocol (offsets may expire, the group may go)."""
        return (
            self.state == states.GroupState.EMPTY
            and not self.members
            and (self.consumer is None or not self.consumer.members)
        )

    def transition(self, state: states.GroupState, now_ms: int) -> None:
        """Move to `state`; raises InvalidTransition outside Kafka's table."""
        states.check_transition(self.group_id, self.state, state)
        self.state = state
        self.state_timestamp_ms = now_ms

    def restore_state(self, state: states.GroupState, timestamp_ms: int) -> None:
        """The state a group is loaded in from `__consumer_offsets`: not a transition,
        as Kafka builds a loaded group in its state directly."""
        self.state = state
        self.state_timestamp_ms = timestamp_ms

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

    def is_empty_husk(self) -> bool:
        """Nothing worth keeping: no members, no offsets, never had a protocol."""
        return (
            self.is_empty()
            and not self.offsets
            and not self.pending_txn_offsets
            and self.protocol_type is None
        )

    def has_pending_offset(self, key: tuple[str, int]) -> bool:
        """An open transaction has committed an offset for this partition (OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT then)."""
        return any(key in pending for pending in self.pending_txn_offsets.values())

    def commit_offsets(self, offsets: Mapping[tuple[str, int], CommittedOffset]) -> None:
        """Plain commits, written (or replayed) in log order."""
        for key, committed in offsets.items():
            self._written += 1
            self.offsets[key] = committed
            self._written_at[key] = self._written

    def drop_offset(self, key: tuple[str, int]) -> None:
        self.offsets.pop(key, None)
        self._written_at.pop(key, None)

    def pend_offsets(
        self, producer_id: int, offsets: Mapping[tuple[str, int], CommittedOffset]
    ) -> None:
        """A transaction's commits (TxnOffsetCommit), written (or replayed) in log order."""
        pending = self.pending_txn_offsets.setdefault(producer_id, {})
        for key, committed in offsets.items():
            self._written += 1
            pending[key] = committed
            self._pending_written_at[(producer_id, key)] = self._written

    def end_transaction(self, producer_id: int, commit: bool) -> int:
        """A marker of the producer's transaction: its pending offsets become committed
        (or are dropped); one older than a plain commit of its partition loses, as in
        Kafka's replayEndTransactionMarker. Returns how many changed."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if not pending:
            return 0
        for key, committed in pending.items():
            written = self._pending_written_at.pop((producer_id, key), 0)
            if commit and written > self._written_at.get(key, -1):
                self.offsets[key] = committed
                self._written_at[key] = written
        return len(pending)
