"""The server-side assignors of consumer-protocol groups: every subscribed partition to
exactly one subscriber, balanced, and `uniform` sticky when members come and go."""

from __future__ import annotations

import uuid

import pytest
from strom.coordinator import assignors

ORDERS = uuid.UUID(int=1)
AUDIT = uuid.UUID(int=2)


def member(
    *topics: uuid.UUID, current: assignors.Assignment | None = None
) -> assignors.AssignorMember:
    return assignors.AssignorMember(frozenset(topics), current or {})


def counts(result: dict[str, assignors.Assignment]) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in result.items()}


def owners(result: dict[str, assignors.Assignment]) -> dict[tuple[uuid.UUID, int], str]:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            for partition in partitions:
                assert (topic_id, partition) not in seen, "a partition given twice"
                seen[(topic_id, partition)] = member_id
    return seen


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_every_partition_goes_to_one_member_and_counts_differ_by_at_most_one(name: str) -> None:
    assign = assignors.ASSIGNORS[name]
    result = assign({"a": member(ORDERS), "b": member(ORDERS), "c": member(ORDERS)}, {ORDERS: 7})
    assert len(owners(result)) == 7
    assert sorted(counts(result).values()) == [2, 2, 3]


def test_range_gives_contiguous_ranges_in_member_order() -> None:
    result = assignors.range_({"b": member(ORDERS), "a": member(ORDERS)}, {ORDERS: 5})
    assert result == {"a": {ORDERS: frozenset({0, 1, 2})}, "b": {ORDERS: frozenset({3, 4})}}


def test_uniform_keeps_partitions_where_balance_allows() -> None:
    alone = assignors.uniform({"a": member(ORDERS)}, {ORDERS: 6})
    assert alone == {"a": {ORDERS: frozenset(range(6))}}
    # b joins: a gives up three and keeps three of its own, b gets only what a gave up
    pair = assignors.uniform(
        {"a": member(ORDERS, current=alone["a"]), "b": member(ORDERS)}, {ORDERS: 6}
    )
    assert counts(pair) == {"a": 3, "b": 3}
    assert pair["a"][ORDERS] < alone["a"][ORDERS]
    # c joins: a and b each give one, keep the rest
    trio = assignors.uniform(
        {
            "a": member(ORDERS, current=pair["a"]),
            "b": member(ORDERS, current=pair["b"]),
            "c": member(ORDERS),
        },
        {ORDERS: 6},
    )
    assert counts(trio) == {"a": 2, "b": 2, "c": 2}
    assert trio["a"][ORDERS] < pair["a"][ORDERS] and trio["b"][ORDERS] < pair["b"][ORDERS]
    # b leaves: its partitions go, a and c keep theirs
    after = assignors.uniform(
        {"a": member(ORDERS, current=trio["a"]), "c": member(ORDERS, current=trio["c"])},
        {ORDERS: 6},
    )
    assert counts(after) == {"a": 3, "c": 3}
    assert trio["a"][ORDERS] < after["a"][ORDERS] and trio["c"][ORDERS] < after["c"][ORDERS]


def test_uniform_gives_partitions_only_to_subscribers() -> None:
    result = assignors.uniform(
        {"a": member(ORDERS), "b": member(ORDERS, AUDIT), "c": member(AUDIT)},
        {ORDERS: 4, AUDIT: 2},
    )
    assert len(owners(result)) == 6
    assert AUDIT not in result["a"] and ORDERS not in result["c"]
    assert sorted(counts(result).values()) == [2, 2, 2]


def test_uniform_drops_partitions_of_unsubscribed_or_shrunk_topics() -> None:
    stale = {ORDERS: frozenset({0, 1, 5}), AUDIT: frozenset({0})}
    result = assignors.uniform({"a": member(ORDERS, current=stale)}, {ORDERS: 3, AUDIT: 1})
    assert result == {"a": {ORDERS: frozenset({0, 1, 2})}}
