"""A follower's side of its fetch session with one leader (KIP-227), Kafka's
FetchSessionHandler: what the next Fetch request sends, and what the answer means for the
session.

The first fetch is full and asks the leader for a session. While the session lives, each
fetch sends only the partitions that are new or changed since the last request (a new
fetch offset, leader epoch, ...) and names those to forget; the leader reads the rest as
it last heard of them. Any session error, a failed request or an answer naming
partitions outside the session goes back to a full fetch: FETCH_SESSION_ID_NOT_FOUND
(the leader forgot the session, or evicted it) asks for a new session, anything else
closes this one and asks for a new one. No I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strom.protocol import fetch_metadata
from strom.protocol.fetch_metadata import FetchMetadata

PartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """What a follower asks of one partition; any change is sent in the next fetch."""

    topic_id: uuid.UUID | None
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchPlan:
    metadata: FetchMetadata
    to_send: dict[PartitionKey, PartitionFetch]
    to_forget: list[tuple[PartitionKey, uuid.UUID | None]]


class FetchSessionBuilder:
    def __init__(self) -> None:
        self.next_metadata = fetch_metadata.INITIAL
        # What the leader's session holds, as of the last request built.
        self._session: dict[PartitionKey, PartitionFetch] = {}

    def build(self, wanted: dict[PartitionKey, PartitionFetch]) -> FetchPlan:
        """The next request for `wanted`, in the order given."""
        previous, self._session = self._session, dict(wanted)
        if self.next_metadata.is_full:
            return FetchPlan(self.next_metadata, dict(wanted), [])
        changed = {key: fetch for key, fetch in wanted.items() if previous.get(key) != fetch}
        forgotten = [(key, fetch.topic_id) for key, fetch in previous.items() if key not in wanted]
        return FetchPlan(self.next_metadata, changed, forgotten)

    def handle_response(
        self, error: ErrorCode, session_id: int, answered: Iterable[PartitionKey]
    ) -> bool:
        """Move the session on after an answer; False: ignore the answer's partitions,
        as the next fetch is a full one."""
        if error != ErrorCode.none:
            self.next_metadata = (
                fetch_metadata.INITIAL
                if error == ErrorCode.fetch_session_id_not_found
                else self.next_metadata.next_close_existing()
            )
            return False
        if not self.next_metadata.is_full and any(k not in self._session for k in answered):
            self.next_metadata = self.next_metadata.next_close_existing()
            return False
        if session_id == fetch_metadata.INVALID_SESSION_ID:
            self.next_metadata = fetch_metadata.INITIAL  # no session (now): full again
        elif self.next_metadata.is_full:
            self.next_metadata = FetchMetadata(session_id, fetch_metadata.INITIAL_EPOCH)
            self.next_metadata = self.next_metadata.next_incremental()
        else:
            self.next_metadata = self.next_metadata.next_incremental()
        return True

    def handle_error(self) -> None:
        """The request failed (no answer): the next fetch is full, closing the session."""
        self.next_metadata = self.next_metadata.next_close_existing()
