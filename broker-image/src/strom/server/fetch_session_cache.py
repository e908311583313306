"""The broker's incremental fetch sessions (KIP-227), Kafka's FetchSession and
FetchSessionCache: what each session remembers of its partitions, and which session
makes room for a new one when the cache is full. No I/O: the time comes in as `now_ms`.

A session remembers, per partition, what the client last asked (fetch offset, epochs,
max bytes) and what it was last told (high watermark, last stable offset, log start), so
an incremental response can leave out the partitions with nothing new.

The cache holds at most `max.incremental.fetch.session.cache.slots` sessions. When it is
full a new session takes the slot of one unused for `min.incremental.fetch.session.
eviction.ms`; failing that, of a less valuable one: a follower's session (privileged) is
worth more than a consumer's, and among equals a bigger session more than a smaller.
Sessions younger than the eviction time are safe from sessions of their own rank, so two
consumers cannot take each other's slot on every fetch.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from strom.protocol import fetch_metadata

# A partition as a session names it: by topic id from Fetch v13, by topic name before.
PartitionKey = tuple[str | uuid.UUID, int]


@dataclass(slots=True)
class PartitionRequest:
    """What a fetch asks of one partition."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # the fetcher's own (a follower's), -1 for consumers


@dataclass(frozen=True, slots=True)
class PartitionAnswer:
    """What a fetch found for one partition, as far as the session cares."""

    records_size: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    errored: bool = False
    diverging: bool = False  # a follower must truncate


@dataclass(slots=True)
class CachedPartition:
    request: PartitionRequest
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1  # the leader's

    def must_respond(self, answer: PartitionAnswer, *, remember: bool) -> bool:
        """Whether the client must hear of this partition (Kafka's
        maybeUpdateResponseData); with `remember`, the session keeps what it is told."""
        changed = (
            answer.high_watermark != self.high_watermark
            or answer.last_stable_offset != self.last_stable_offset
            or answer.log_start_offset != self.log_start_offset
        )
        if remember:
            # After an error the cached high watermark is unknown, so the partition is
            # sent again once the error clears.
            self.high_watermark = -1 if answer.errored else answer.high_watermark
            self.last_stable_offset = answer.last_stable_offset
            self.log_start_offset = answer.log_start_offset
        return changed or answer.records_size > 0 or answer.errored or answer.diverging


@dataclass(eq=False, slots=True)
class FetchSession:
    id: int
    privileged: bool  # a follower's
    uses_topic_ids: bool  # created by Fetch v13+
    created_ms: int
    last_used_ms: int
    epoch: int
    # In the order partitions are read: one that returned records moves to the end, so
    # a response limit does not starve the partitions behind it.
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)
    cached_size: int = -1  # the size the cache counted at the last touch
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def update(
        self, requested: dict[PartitionKey, PartitionRequest], forgotten: list[PartitionKey]
    ) -> None:
        """An incremental request's added and changed partitions, and those it forgets."""
        for key, request in requested.items():
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(request)
            else:
                cached.request = request
        for key in forgotten:
            self.partitions.pop(key, None)

    def moved_to_end(self, key: PartitionKey) -> None:
        self.partitions[key] = self.partitions.pop(key)


class FetchSessionCache:
    def __init__(
        self,
        max_sessions: int,
        eviction_ms: int,
        *,
        new_id: Callable[[], int] = lambda: random.randint(1, 2**31 - 1),
    ) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._new_id = new_id
        self._sessions: dict[int, FetchSession] = {}
        self.partitions_cached = 0  # Kafka's NumIncrementalFetchPartitionsCached
        self.evictions = 0
        self.created = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def maybe_create(
        self,
        now_ms: int,
        *,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: dict[PartitionKey, CachedPartition],
    ) -> int:
        """A new session holding `partitions` and its id, or 0 when there is no room."""
        if len(self._sessions) >= self.max_sessions and not self._try_evict(
            privileged, len(partitions), now_ms
        ):
            return fetch_metadata.INVALID_SESSION_ID
        session_id = self._new_id()
        while session_id in self._sessions or session_id == fetch_metadata.INVALID_SESSION_ID:
            session_id = self._new_id()
        session = FetchSession(
            session_id,
            privileged,
            uses_topic_ids,
            created_ms=now_ms,
            last_used_ms=now_ms,
            epoch=fetch_metadata.next_epoch(fetch_metadata.INITIAL_EPOCH),
            partitions=partitions,
        )
        self._sessions[session_id] = session
        self.created += 1
        self.touch(session, now_ms)
        return session_id

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """The session was used: it is fresh again, and counted at its current size."""
        session.last_used_ms = now_ms
        if session.cached_size >= 0:
            self.partitions_cached -= session.cached_size
        session.cached_size = len(session.partitions)
        self.partitions_cached += session.cached_size
        old_enough = now_ms - session.created_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old_enough
        session.evictable_by_all = old_enough

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self.partitions_cached -= session.cached_size
        return session

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Make room for a new session of `size` partitions (Kafka's tryEvict)."""
        if not self._sessions:
            return False
        stalest = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self._evict(stalest)
            return True
        candidates = [
            s
            for s in self._sessions.values()
            if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        cheapest = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        # The newcomer's key sorts before any session's of its rank and size (Kafka gives
        # it id 0): it wins only against a lower rank or a smaller size.
        if (privileged, size) <= (cheapest.privileged, cheapest.cached_size):
            return False
        self._evict(cheapest)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.remove(session.id)
        self.evictions += 1
