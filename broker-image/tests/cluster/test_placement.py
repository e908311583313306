"""Replica placement: replicas and preferred leaders spread evenly, racks alternated."""

from __future__ import annotations

import collections

import pytest
from strom.cluster import placement, topics


def test_leaders_and_replicas_are_spread_within_one_per_broker() -> None:
    lists = placement.place([1, 2, 3], 0, 100, 3, start=0)
    leaders = collections.Counter(replicas[0] for replicas in lists)
    assert max(leaders.values()) - min(leaders.values()) <= 1
    assert all(len(set(replicas)) == 3 for replicas in lists)
    assert placement.place([3, 1, 2], 0, 3, 2, start=1) == [(2, 3), (3, 1), (1, 2)]


def test_consecutive_replicas_go_to_other_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assert placement.rack_alternating([1, 2, 3, 4, 5, 6], racks) == [1, 3, 5, 2, 4, 6]
    for replicas in placement.place(list(racks), 0, 12, 3, start=0, racks=racks):
        assert len({racks[r] for r in replicas}) == 3


def test_more_replicas_than_brokers_is_refused_in_kafkas_words() -> None:
    with pytest.raises(topics.InvalidReplicationFactorError, match="only 2 broker"):
        placement.place([1, 2], 0, 1, 3, start=0)
