"""Partitions grouped into a request's per-topic entries, and a response's error codes
read back per partition."""

from kio.schema.errors import ErrorCode
from strom.server import topic_entries


def test_group_keeps_the_order_given() -> None:
    grouped = topic_entries.group([("b", 2), ("a", 1), ("b", 0), ("a", 3)])
    assert list(grouped.items()) == [("b", [2, 0]), ("a", [1, 3])]
    assert topic_entries.group([]) == {}


def test_read_errors_answers_each_partition_asked_about() -> None:
    asked = [("a", 0), ("a", 1), ("b", 0)]
    results = [
        ("a", 0, ErrorCode.none),
        ("b", 0, ErrorCode.invalid_txn_state),
        ("c", 9, ErrorCode.none),  # not asked about: ignored
    ]
    assert topic_entries.read_errors(asked, results) == {
        ("a", 0): ErrorCode.none,
        ("a", 1): ErrorCode.unknown_server_error,  # left out of the response
        ("b", 0): ErrorCode.invalid_txn_state,
    }
