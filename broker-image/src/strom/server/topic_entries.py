"""Partitions as Kafka's requests carry them, in per-topic entries, and a response's
per-partition error codes read back; for the requests one broker sends another about a
transaction (AddPartitionsToTxn `verify_only`, WriteTxnMarkers), whose entries differ
only in their fields' names."""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode


def group(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """Each topic's partition indexes, topics and indexes in the order given."""
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    return by_topic


def read_errors(
    asked: Iterable[tuple[str, int]], results: Iterable[tuple[str, int, ErrorCode]]
) -> dict[tuple[str, int], ErrorCode]:
    """The error code of each partition asked about, from a response's (topic, partition
    index, error code) results: UNKNOWN_SERVER_ERROR for one the response leaves out; a
    result for a partition not asked about is ignored."""
    answers = dict.fromkeys(asked, ErrorCode.unknown_server_error)
    for topic, index, error in results:
        key = (str(topic), int(index))
        if key in answers:
            answers[key] = error
    return answers
