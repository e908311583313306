"""What one Fetch request reads and answers, given its session id and epoch (KIP-227):
Kafka's FetchManager.newContext and its four FetchContexts. No I/O.

- sessionless (epoch -1, or before Fetch v7): read what was asked, answer all of it;
- full (epoch 0): the same, then keep a new session of those partitions if the cache
  has room, and tell the client its id;
- incremental (the session's next epoch): fold the request's added, changed and forgotten
  partitions into the session, read every partition of the session, and answer only
  those with something new;
- a session error: FETCH_SESSION_ID_NOT_FOUND (no such session, or evicted),
  INVALID_FETCH_SESSION_EPOCH (not the epoch expected), FETCH_SESSION_TOPIC_ID_ERROR
  (a session of topic ids used by a request of names, or the other way round).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from strom.protocol import fetch_metadata
from strom.protocol.fetch_metadata import FetchMetadata
from strom.server import fetch_session_cache as sessions
from strom.server.fetch_session_cache import PartitionAnswer, PartitionKey, PartitionRequest

# The first Fetch version that names topics by id: a session keeps one way of naming.
TOPIC_IDS_VERSION = 13


class Kind(enum.Enum):
    SESSIONLESS = "sessionless"
    FULL = "full"
    INCREMENTAL = "incremental"
    ERROR = "error"


class FetchContext:
    """A sessionless fetch: read what was asked, answer all of it."""

    kind = Kind.SESSIONLESS

    def __init__(self, requested: dict[PartitionKey, PartitionRequest]) -> None:
        self._requested = requested

    @property
    def error(self) -> ErrorCode:
        return ErrorCode.none

    def partitions(self) -> list[tuple[PartitionKey, PartitionRequest]]:
        """What to read, in order."""
        return list(self._requested.items())

    def respond(
        self, answers: Sequence[tuple[PartitionKey, PartitionAnswer]], now_ms: int
    ) -> tuple[ErrorCode, int, list[bool]]:
        """The response's error and session id, and which answers it holds."""
        return ErrorCode.none, fetch_metadata.INVALID_SESSION_ID, [True] * len(answers)


class SessionErrorContext(FetchContext):
    kind = Kind.ERROR

    def __init__(self, error: ErrorCode) -> None:
        super().__init__({})
        self._error = error

    @property
    def error(self) -> ErrorCode:
        return self._error

    def respond(
        self, answers: Sequence[tuple[PartitionKey, PartitionAnswer]], now_ms: int
    ) -> tuple[ErrorCode, int, list[bool]]:
        return self._error, fetch_metadata.INVALID_SESSION_ID, []


class FullFetchContext(FetchContext):
    kind = Kind.FULL

    def __init__(
        self,
        cache: sessions.FetchSessionCache,
        requested: dict[PartitionKey, PartitionRequest],
        *,
        privileged: bool,
        uses_topic_ids: bool,
    ) -> None:
        super().__init__(requested)
        self._cache = cache
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids

    def respond(
        self, answers: Sequence[tuple[PartitionKey, PartitionAnswer]], now_ms: int
    ) -> tuple[ErrorCode, int, list[bool]]:
        cached: dict[PartitionKey, sessions.CachedPartition] = {}
        for key, answer in answers:
            partition = sessions.CachedPartition(self._requested[key])
            partition.must_respond(answer, remember=True)
            cached[key] = partition
        session_id = self._cache.maybe_create(
            now_ms,
            privileged=self._privileged,
            uses_topic_ids=self._uses_topic_ids,
            partitions=cached,
        )
        return ErrorCode.none, session_id, [True] * len(answers)


class IncrementalFetchContext(FetchContext):
    kind = Kind.INCREMENTAL

    def __init__(self, session: sessions.FetchSession) -> None:
        super().__init__({})
        self._session = session
        self._epoch = session.epoch  # what it must still be when the response is made

    def partitions(self) -> list[tuple[PartitionKey, PartitionRequest]]:
        return [(key, cached.request) for key, cached in self._session.partitions.items()]

    def respond(
        self, answers: Sequence[tuple[PartitionKey, PartitionAnswer]], now_ms: int
    ) -> tuple[ErrorCode, int, list[bool]]:
        session = self._session
        if session.epoch != self._epoch:
            # Another request of this session came in while this one waited (a client
            # resending): only one of them may move the session on.
            return ErrorCode.invalid_fetch_session_epoch, session.id, []
        included = []
        for key, answer in answers:
            cached = session.partitions.get(key)
            respond = cached is None or cached.must_respond(answer, remember=True)
            if respond and answer.records_size > 0 and cached is not None:
                session.moved_to_end(key)
            included.append(respond)
        return ErrorCode.none, session.id, included


def new_context(
    cache: sessions.FetchSessionCache,
    version: int,
    metadata: FetchMetadata,
    *,
    privileged: bool,
    requested: dict[PartitionKey, PartitionRequest],
    forgotten: list[PartitionKey],
    now_ms: int,
) -> FetchContext:
    """Kafka's FetchManager.newContext."""
    if metadata.is_full:
        if metadata.session_id != fetch_metadata.INVALID_SESSION_ID:
            cache.remove(metadata.session_id)
        if metadata.epoch == fetch_metadata.FINAL_EPOCH:
            return FetchContext(requested)
        return FullFetchContext(
            cache,
            requested,
            privileged=privileged,
            uses_topic_ids=version >= TOPIC_IDS_VERSION,
        )
    session = cache.get(metadata.session_id)
    if session is None:
        return SessionErrorContext(ErrorCode.fetch_session_id_not_found)
    if session.epoch != metadata.epoch:
        return SessionErrorContext(ErrorCode.invalid_fetch_session_epoch)
    if session.uses_topic_ids != (version >= TOPIC_IDS_VERSION):
        return SessionErrorContext(ErrorCode.fetch_session_topic_id_error)
    session.update(requested, forgotten)
    if not session.partitions:
        cache.remove(session.id)
        return FetchContext(requested)
    cache.touch(session, now_ms)
    session.epoch = fetch_metadata.next_epoch(session.epoch)
    return IncrementalFetchContext(session)
