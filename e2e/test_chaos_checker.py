"""The chaos test's checker finds each kind of anomaly it reports (no cluster: the ack
log and the topic's contents are written out by hand), so a clean chaos run means a clean
cluster, not a blind checker."""

from __future__ import annotations

from chaos_checker import UNKNOWN_OFFSET, Ack, Commit, check


def ack(producer: str, partition: int, offset: int, sequence: int) -> Ack:
    return Ack(producer, partition, offset, f"{producer}-{sequence}", at=float(sequence))


# py wrote py-0..py-2 to partition 0 (offsets 0..2); java wrote java-0 to partition 1
ACKS = [ack("py", 0, 0, 0), ack("java", 1, 0, 0), ack("py", 0, 1, 1), ack("py", 0, 2, 2)]
HELD = {0: [(0, "py-0"), (1, "py-1"), (2, "py-2")], 1: [(0, "java-0")]}


def test_a_topic_holding_every_acknowledged_record_in_place_is_clean() -> None:
    verdict = check(ACKS, {**HELD, 1: [(0, "java-0"), (1, "java-1")]})
    assert verdict.ok, verdict.summary()
    assert verdict.acks == 4
    assert verdict.unacknowledged_present == 1  # java-1: written, its ack never came


def test_an_acknowledged_record_missing_is_lost() -> None:
    verdict = check(ACKS, {0: [(0, "py-0"), (1, "py-1")], 1: [(0, "java-0")]})
    assert [a.value for a in verdict.lost] == ["py-2"]
    assert not verdict.ok


def test_a_value_held_twice_is_duplicated() -> None:
    verdict = check(ACKS, {**HELD, 1: [(0, "java-0"), (1, "py-1")]})
    assert verdict.duplicated == {"py-1": 2}
    assert not verdict.lost


def test_a_record_at_another_offset_than_acknowledged_is_misplaced() -> None:
    # the log lost py-1 at offset 1 and got it back later (a truncation and a retry)
    verdict = check(ACKS, {0: [(0, "py-0"), (1, "py-2"), (2, "py-1")], 1: [(0, "java-0")]})
    assert {(a.value, there) for a, there in verdict.misplaced} == {
        ("py-1", "py-2"),
        ("py-2", "py-1"),
    }


def test_acks_of_a_producer_and_partition_must_come_in_offset_order() -> None:
    swapped = [ACKS[0], ACKS[1], ACKS[3], ACKS[2]]  # told offset 2 before offset 1
    verdict = check(swapped, HELD)
    assert [(late.offset, early.offset) for late, early in verdict.reordered] == [(1, 2)]
    # another producer's acks in the same partition are not ordered against these
    # (java was told offset 4 before py was told offset 3)
    other = [*ACKS, Ack("java", 0, 4, "java-9", 9.0), Ack("py", 0, 3, "py-3", 9.5)]
    assert not check(other, {0: [*HELD[0], (3, "py-3"), (4, "java-9")], 1: HELD[1]}).reordered


def test_a_group_commit_below_an_acknowledged_one_moved_back() -> None:
    commits = [Commit(0, 5, 1.0), Commit(1, 3, 1.0), Commit(0, 7, 2.0)]
    assert check(ACKS, HELD, commits, {0: 7, 1: 3}).ok
    assert check(ACKS, HELD, commits, {0: 9, 1: 4}).ok  # moved on after the last ack
    behind = check(ACKS, HELD, commits, {0: 5, 1: 3})
    assert len(behind.commits_moved_back) == 1
    assert "partition 0" in behind.commits_moved_back[0]
    regressed = check(ACKS, HELD, [*commits, Commit(0, 6, 3.0)], {0: 7, 1: 3})
    assert len(regressed.commits_moved_back) == 1
    assert "committed 6" in regressed.commits_moved_back[0]


def test_an_ack_without_an_offset_is_judged_where_its_value_is() -> None:
    """librdkafka acknowledges a timed-out batch that a later batch's acknowledgement
    proves written without its offset: in place and in order if it is there, lost if not."""
    unknown = [*ACKS[:2], ack("py", 0, UNKNOWN_OFFSET, 1), ACKS[3]]
    assert check(unknown, HELD).ok
    out_of_order = check(unknown, {0: [(0, "py-0"), (1, "py-2"), (2, "py-1")], 1: [(0, "java-0")]})
    assert [later.value for later, _ in out_of_order.reordered] == ["py-2"]
    missing = check(unknown, {0: [(0, "py-0"), (2, "py-2")], 1: [(0, "java-0")]})
    assert [a.value for a in missing.lost] == ["py-1"]
