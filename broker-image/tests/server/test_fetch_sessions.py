"""The fetch session rules without a broker: the cache and its eviction, and what each
kind of request reads and answers (Kafka's FetchSessionTest, in our words)."""

from __future__ import annotations

import itertools
import uuid

from kio.schema.errors import ErrorCode
from strom.protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, FetchMetadata, next_epoch
from strom.server import fetch_contexts
from strom.server.fetch_contexts import Kind
from strom.server.fetch_session_cache import (
    CachedPartition,
    FetchSessionCache,
    PartitionAnswer,
    PartitionKey,
    PartitionRequest,
)

EVICTION_MS = 1_000


def new_cache(slots: int = 10) -> FetchSessionCache:
    ids = itertools.count(1)
    return FetchSessionCache(slots, EVICTION_MS, new_id=lambda: next(ids))


def asked(*keys: PartitionKey, offset: int = 0) -> dict[PartitionKey, PartitionRequest]:
    return {key: PartitionRequest(fetch_offset=offset, max_bytes=1024) for key in keys}


def quiet(high_watermark: int = 10) -> PartitionAnswer:
    return PartitionAnswer(0, high_watermark, high_watermark, 0)


def context(
    cache: FetchSessionCache,
    metadata: FetchMetadata,
    requested: dict[PartitionKey, PartitionRequest] | None = None,
    forgotten: list[PartitionKey] | None = None,
    *,
    version: int = 12,
    privileged: bool = False,
    now_ms: int = 0,
) -> fetch_contexts.FetchContext:
    return fetch_contexts.new_context(
        cache,
        version,
        metadata,
        privileged=privileged,
        requested=requested or {},
        forgotten=forgotten or [],
        now_ms=now_ms,
    )


def open_session(
    cache: FetchSessionCache, *keys: PartitionKey, privileged: bool = False, now_ms: int = 0
) -> int:
    full = context(cache, FetchMetadata(0, INITIAL_EPOCH), asked(*keys), privileged=privileged)
    assert full.kind is Kind.FULL
    _, session_id, _ = full.respond([(key, quiet()) for key in keys], now_ms)
    return session_id


A, B, C = ("a", 0), ("a", 1), ("b", 0)


def test_epochs_wrap_to_one_and_final_stays_final() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_a_full_fetch_creates_a_session_and_answers_everything() -> None:
    cache = new_cache()
    full = context(cache, FetchMetadata(0, INITIAL_EPOCH), asked(A, B))
    assert full.partitions() == list(asked(A, B).items())
    error, session_id, included = full.respond([(A, quiet()), (B, quiet())], 0)
    assert (error, included) == (ErrorCode.none, [True, True])
    assert session_id != 0
    assert (len(cache), cache.partitions_cached, cache.created) == (1, 2, 1)


def test_an_incremental_fetch_reads_the_whole_session_and_answers_what_changed() -> None:
    cache = new_cache()
    session_id = open_session(cache, A, B)
    incremental = context(cache, FetchMetadata(session_id, 1), asked(B, offset=5))
    assert incremental.kind is Kind.INCREMENTAL
    # A keeps its cached fetch offset; B's moved with the request
    assert [(key, r.fetch_offset) for key, r in incremental.partitions()] == [(A, 0), (B, 5)]
    with_records = PartitionAnswer(100, 10, 10, 0)
    error, same_id, included = incremental.respond([(A, quiet()), (B, with_records)], 1)
    assert (error, same_id, included) == (ErrorCode.none, session_id, [False, True])
    # nothing new at all: an empty response, and the session moves on to epoch 3
    again = context(cache, FetchMetadata(session_id, 2))
    assert again.respond([(A, quiet()), (B, quiet())], 2)[2] == [False, False]
    assert cache.get(session_id) is not None and cache.get(session_id).epoch == 3  # type: ignore[union-attr]


def test_a_partition_with_records_moves_to_the_end_of_the_session() -> None:
    """So that a response limit does not starve the partitions behind it."""
    cache = new_cache()
    session_id = open_session(cache, A, B, C)
    incremental = context(cache, FetchMetadata(session_id, 1))
    incremental.respond([(A, PartitionAnswer(10, 10, 10, 0)), (B, quiet()), (C, quiet())], 1)
    following = context(cache, FetchMetadata(session_id, 2))
    assert [key for key, _ in following.partitions()] == [B, C, A]


def test_what_makes_a_partition_answered() -> None:
    cached = CachedPartition(PartitionRequest(0, 1024), 10, 10, log_start_offset=0)
    assert not cached.must_respond(quiet(10), remember=True)
    assert cached.must_respond(PartitionAnswer(0, 11, 10, 0), remember=True)  # high watermark
    assert cached.must_respond(PartitionAnswer(0, 11, 11, 0), remember=True)  # last stable
    assert cached.must_respond(PartitionAnswer(0, 11, 11, 3), remember=True)  # log start
    assert cached.must_respond(PartitionAnswer(0, 11, 11, 3, diverging=True), remember=True)
    # an error is always answered, and the partition again once the error clears
    assert cached.must_respond(PartitionAnswer(0, -1, -1, -1, errored=True), remember=True)
    assert cached.must_respond(PartitionAnswer(0, 11, 11, 3), remember=True)
    assert not cached.must_respond(PartitionAnswer(0, 11, 11, 3), remember=True)


def test_forgotten_partitions_leave_the_session_and_the_last_one_closes_it() -> None:
    cache = new_cache()
    session_id = open_session(cache, A, B)
    one_left = context(cache, FetchMetadata(session_id, 1), forgotten=[A])
    assert [key for key, _ in one_left.partitions()] == [B]
    assert cache.partitions_cached == 1
    none_left = context(cache, FetchMetadata(session_id, 2), forgotten=[B])
    assert none_left.kind is Kind.SESSIONLESS
    assert cache.get(session_id) is None
    assert cache.partitions_cached == 0


def test_session_errors() -> None:
    cache = new_cache()
    session_id = open_session(cache, A)
    unknown = context(cache, FetchMetadata(session_id + 1, 1))
    assert (unknown.kind, unknown.error) == (Kind.ERROR, ErrorCode.fetch_session_id_not_found)
    assert unknown.respond([], 0) == (ErrorCode.fetch_session_id_not_found, 0, [])
    stale = context(cache, FetchMetadata(session_id, 5))
    assert stale.error == ErrorCode.invalid_fetch_session_epoch
    by_ids = context(cache, FetchMetadata(session_id, 1), version=13)
    assert by_ids.error == ErrorCode.fetch_session_topic_id_error


def test_a_duplicate_request_in_flight_gets_an_epoch_error() -> None:
    """Two requests of one epoch both waiting: only the first to answer moves on."""
    cache = new_cache()
    session_id = open_session(cache, A)
    first = context(cache, FetchMetadata(session_id, 1))
    second = context(cache, FetchMetadata(session_id, 2))
    assert second.respond([(A, quiet())], 1)[0] == ErrorCode.none
    error, _, included = first.respond([(A, quiet())], 2)
    assert (error, included) == (ErrorCode.invalid_fetch_session_epoch, [])


def test_final_epoch_closes_the_session_and_fetches_without_one() -> None:
    cache = new_cache()
    session_id = open_session(cache, A)
    final = context(cache, FetchMetadata(session_id, FINAL_EPOCH), asked(A))
    assert final.kind is Kind.SESSIONLESS
    assert final.respond([(A, quiet())], 0) == (ErrorCode.none, 0, [True])
    assert len(cache) == 0


def test_a_full_fetch_naming_a_session_replaces_it() -> None:
    cache = new_cache()
    old = open_session(cache, A)
    full = context(cache, FetchMetadata(old, INITIAL_EPOCH), asked(A, B))
    _, new, _ = full.respond([(A, quiet()), (B, quiet())], 0)
    assert new not in (0, old)
    assert cache.get(old) is None
    assert (len(cache), cache.partitions_cached) == (1, 2)


def test_sessions_by_topic_id_from_v13() -> None:
    cache = new_cache()
    topic_id = uuid.uuid4()
    full = context(cache, FetchMetadata(0, INITIAL_EPOCH), asked((topic_id, 0)), version=13)
    _, session_id, _ = full.respond([((topic_id, 0), quiet())], 0)
    incremental = context(cache, FetchMetadata(session_id, 1), version=17)
    assert [key for key, _ in incremental.partitions()] == [(topic_id, 0)]
    assert context(cache, FetchMetadata(session_id, 2), version=12).error == (
        ErrorCode.fetch_session_topic_id_error
    )


def test_no_slots_no_sessions() -> None:
    cache = new_cache(slots=0)
    assert open_session(cache, A) == 0
    assert len(cache) == 0


def test_a_full_cache_evicts_a_stale_session() -> None:
    cache = new_cache(slots=1)
    old = open_session(cache, A, B, C, now_ms=0)
    assert open_session(cache, A, now_ms=EVICTION_MS) == 0  # fresh enough to stay
    new = open_session(cache, A, now_ms=EVICTION_MS + 1)  # unused longer than that
    assert new != 0 and cache.get(old) is None
    assert cache.evictions == 1


def test_a_young_session_is_safe_from_its_own_rank_but_not_from_followers() -> None:
    cache = new_cache(slots=1)
    consumer = open_session(cache, A, now_ms=0)
    # bigger, but the consumer's session is younger than the eviction time
    assert open_session(cache, A, B, now_ms=10) == 0
    cache.touch(cache.get(consumer), 10)  # type: ignore[arg-type]
    follower = open_session(cache, A, privileged=True, now_ms=20)
    assert follower != 0 and cache.get(consumer) is None
    # a consumer never evicts a young follower's session, whatever its size
    assert open_session(cache, A, B, C, now_ms=30) == 0


def test_an_old_session_yields_to_a_bigger_one_of_its_rank() -> None:
    cache = new_cache(slots=1)
    small = open_session(cache, A, now_ms=0)
    cache.touch(cache.get(small), EVICTION_MS + 1)  # type: ignore[arg-type]  # old but in use
    assert open_session(cache, C, now_ms=EVICTION_MS + 2) == 0  # same size: stays
    bigger = open_session(cache, A, B, now_ms=EVICTION_MS + 3)
    assert bigger != 0 and cache.get(small) is None
    assert cache.evictions == 1
