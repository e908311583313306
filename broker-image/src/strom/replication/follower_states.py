"""What a partition leader knows of its followers: Kafka's Replica state on the leader.

Each follower's fetches tell the leader its log end offset (the offset it fetches from).
From them the leader derives when the follower was last caught up (Kafka's rule: a fetch
from at least the leader's end offset catches it up now; one from at least the leader's
end offset at its previous fetch means it was caught up then), which decides whether it
stays in the ISR (`replica.lag.time.max.ms`) and whether it may join it; and the
smallest end offset over the ISR, which is the high watermark.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

UNKNOWN = -1


@dataclass(slots=True)
class FollowerState:
    node_id: int
    log_end_offset: int = UNKNOWN  # unknown until its first fetch in this leader epoch
    last_caught_up_ms: int = UNKNOWN
    last_fetch_ms: int = UNKNOWN
    leader_end_at_last_fetch: int = UNKNOWN

    def fetched(self, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.leader_end_at_last_fetch:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_ms = now_ms
        self.leader_end_at_last_fetch = leader_end_offset

    def caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """Kafka's isCaughtUp: at the leader's end, or caught up within the lag allowed."""
        return (
            self.log_end_offset == leader_end_offset
            or now_ms - self.last_caught_up_ms <= max_lag_ms
        )


class Followers:
    """The followers of a partition led here, reset at each new leader epoch."""

    def __init__(self) -> None:
        self._states: dict[int, FollowerState] = {}

    def reset(self, replicas: Iterable[int], isr: Iterable[int], leader: int, now_ms: int) -> None:
        """A new leadership: nothing is known of the followers' logs yet; those in the ISR
        count as caught up now, so they are not dropped before they can fetch."""
        in_sync = set(isr)
        self._states = {
            r: FollowerState(r, last_caught_up_ms=now_ms if r in in_sync else UNKNOWN)
            for r in replicas
            if r != leader
        }

    def keep_only(self, replicas: Iterable[int], leader: int) -> None:
        """The replica set changed (a reassignment): new replicas start unknown."""
        wanted = [r for r in replicas if r != leader]
        self._states = {r: self._states.get(r) or FollowerState(r) for r in wanted}

    def get(self, node_id: int) -> FollowerState | None:
        return self._states.get(node_id)

    def min_end_offset(self, members: Iterable[int], leader_end_offset: int) -> int:
        """The smallest log end offset over `members` (the leader's own counts as
        `leader_end_offset`); UNKNOWN if a member has not fetched yet."""
        smallest = leader_end_offset
        for node_id in members:
            state = self._states.get(node_id)
            if state is None:
                continue  # the leader itself, or not a replica any more
            if state.log_end_offset == UNKNOWN:
                return UNKNOWN
            smallest = min(smallest, state.log_end_offset)
        return smallest

    def out_of_sync(
        self, isr: Iterable[int], leader_end_offset: int, now_ms: int, max_lag_ms: int
    ) -> list[int]:
        lagging = []
        for node_id in isr:
            state = self._states.get(node_id)
            if state is not None and not state.caught_up(leader_end_offset, now_ms, max_lag_ms):
                lagging.append(node_id)
        return lagging
