"""The follower's side of a fetch session (Kafka's FetchSessionHandlerTest, in our words):
full, then only what changed, and back to full on any session error or failed request."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode
from strom.protocol.fetch_metadata import FetchMetadata
from strom.replication.fetch_session_builder import FetchSessionBuilder, PartitionFetch

TOPIC_ID = uuid.uuid4()
A, B = ("t", 0), ("t", 1)


def at(offset: int, epoch: int = 1) -> PartitionFetch:
    return PartitionFetch(TOPIC_ID, offset, epoch, epoch, 0, 1024)


def test_full_then_only_what_changed_and_what_to_forget() -> None:
    builder = FetchSessionBuilder()
    full = builder.build({A: at(0), B: at(0)})
    assert (full.metadata, list(full.to_send), full.to_forget) == (FetchMetadata(0, 0), [A, B], [])
    assert builder.handle_response(ErrorCode.none, 42, [A, B])

    quiet = builder.build({A: at(0), B: at(0)})
    assert (quiet.metadata, quiet.to_send, quiet.to_forget) == (FetchMetadata(42, 1), {}, [])
    assert builder.handle_response(ErrorCode.none, 42, [])

    moved = builder.build({A: at(5)})  # A appended to, B left out (backing off)
    assert (moved.metadata, moved.to_send, moved.to_forget) == (
        FetchMetadata(42, 2),
        {A: at(5)},
        [(B, TOPIC_ID)],
    )
    assert builder.handle_response(ErrorCode.none, 42, [A])
    assert builder.next_metadata == FetchMetadata(42, 3)


def test_a_leader_without_a_session_gets_full_fetches() -> None:
    builder = FetchSessionBuilder()
    builder.build({A: at(0)})
    assert builder.handle_response(ErrorCode.none, 0, [A])
    assert builder.build({A: at(0)}).metadata == FetchMetadata(0, 0)


def test_session_errors_and_failures_go_back_to_a_full_fetch() -> None:
    builder = FetchSessionBuilder()
    builder.build({A: at(0)})
    builder.handle_response(ErrorCode.none, 42, [A])
    builder.build({A: at(0)})
    assert not builder.handle_response(ErrorCode.fetch_session_id_not_found, 0, [])
    retry = builder.build({A: at(0)})
    assert (retry.metadata, list(retry.to_send)) == (FetchMetadata(0, 0), [A])

    builder.handle_response(ErrorCode.none, 43, [A])
    builder.build({A: at(0)})
    assert not builder.handle_response(ErrorCode.invalid_fetch_session_epoch, 0, [])
    assert builder.next_metadata == FetchMetadata(43, 0)  # close it, ask for a new one

    builder.handle_response(ErrorCode.none, 44, [A])
    builder.build({A: at(0)})
    builder.handle_error()
    assert builder.next_metadata == FetchMetadata(44, 0)


def test_an_answer_outside_the_session_ends_it() -> None:
    builder = FetchSessionBuilder()
    builder.build({A: at(0)})
    builder.handle_response(ErrorCode.none, 42, [A])
    builder.build({A: at(0)})
    assert not builder.handle_response(ErrorCode.none, 42, [B])
    assert builder.next_metadata == FetchMetadata(42, 0)
