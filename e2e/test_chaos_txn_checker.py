"""The transactional chaos checker finds each kind of anomaly it reports (no cluster: the
histories are written by hand), so a clean transactional chaos run means a clean cluster,
not a blind checker. Each rule is shown quiet on the clean history and loud on a bad one."""

from __future__ import annotations

import dataclasses

from chaos_txn_checker import (
    RULES,
    Consumed,
    History,
    LsoSample,
    Outcome,
    Read,
    Record,
    Transform,
    Txn,
    aborted_reads,
    check,
    duplicates,
    inconsistent_offsets,
    indeterminate_transactions,
    lost_writes,
    non_monotonic_lso,
    offsets_disagree_with_output,
    torn_transactions,
)

COMMITTED, ABORTED, UNKNOWN = Outcome.COMMITTED, Outcome.ABORTED, Outcome.UNKNOWN

# Input transactions: A and C committed, B aborted. `in` then holds (markers take offsets):
#   p0: a0@0 a2@1 commit@2 b0@3 abort@4        p1: a1@0 commit@1 b1@2 abort@3 c0@4 commit@5
A = Txn("p", 0, "in", (Record(0, "a0"), Record(1, "a1"), Record(0, "a2")), COMMITTED)
B = Txn("q", 0, "in", (Record(0, "b0"), Record(1, "b1")), ABORTED)
C = Txn("p", 1, "in", (Record(1, "c0"),), COMMITTED)
# Transforms: t#0 committed a0 and a1; t#1 took a2 and aborted; t#2 took a2 again, and c0.
#   out p0: a0>t0@0 commit@1 a2>t1@2 abort@3 a2>t2@4 commit@5
#   out p1: a1>t0@0 commit@1 c0>t2@2 commit@3
T0 = Transform(
    Txn("t", 0, "out", (Record(0, "a0>t0"), Record(1, "a1>t0")), COMMITTED),
    (Consumed(0, 0, "a0"), Consumed(1, 0, "a1")),
    ((0, 1), (1, 1)),
)
T1 = Transform(
    Txn("t", 1, "out", (Record(0, "a2>t1"),), ABORTED), (Consumed(0, 1, "a2"),), ((0, 2),)
)
T2 = Transform(
    Txn("t", 2, "out", (Record(0, "a2>t2"), Record(1, "c0>t2")), COMMITTED),
    (Consumed(0, 1, "a2"), Consumed(1, 4, "c0")),
    ((0, 2), (1, 5)),
)
FINAL_IN = Read(
    "final-in", "in", {0: [(0, "a0"), (1, "a2")], 1: [(0, "a1"), (4, "c0")]}, {0: 5, 1: 6}, True
)
FINAL_OUT = Read(
    "final-out",
    "out",
    {0: [(0, "a0>t0"), (4, "a2>t2")], 1: [(0, "a1>t0"), (2, "c0>t2")]},
    {0: 6, 1: 4},
    True,
)
# a tailing reader of `in` that stopped early: it read p0 up to a0 and nothing of p1
TAIL_IN = Read("tail-in", "in", {0: [(0, "a0")], 1: []}, {0: 1, 1: 0})
LSOS = [LsoSample("watcher", "in", 0, at, lso) for at, lso in ((1.0, 0), (2.0, 3), (3.0, 5))]


def history(**changes: object) -> History:
    clean = History(
        inputs=[A, B, C],
        transforms=[T0, T1, T2],
        reads=[FINAL_IN, FINAL_OUT, TAIL_IN],
        group_offsets={0: 2, 1: 5},
        lso_samples=LSOS,
    )
    return dataclasses.replace(clean, **changes)  # type: ignore[arg-type]


def read(name: str, topic: str, records: dict[int, list[tuple[int, str]]], final: bool) -> Read:
    """A reader whose position is just past the last offset it read in each partition."""
    positions = {p: (rs[-1][0] + 1 if rs else 0) for p, rs in records.items()}
    return Read(name, topic, records, positions, final)


def test_the_clean_history_has_no_anomaly() -> None:
    verdict = check(history())
    assert verdict.ok, verdict.summary()
    assert set(verdict.anomalies) == set(RULES)
    assert verdict.figures["input committed"] == 2
    assert verdict.figures["input aborted"] == 1
    assert verdict.figures["transform committed"] == 2
    assert verdict.figures["final out"] == 4


def test_a_committed_record_missing_from_the_final_read_is_a_lost_write() -> None:
    without_c0 = read("final-in", "in", {0: [(0, "a0"), (1, "a2")], 1: [(0, "a1")]}, True)
    found = lost_writes(history(reads=[without_c0, FINAL_OUT]))
    assert len(found) == 1 and "p#1" in found[0] and "'c0'" in found[0]
    # an aborted transaction's records are expected to be missing
    assert not lost_writes(history(inputs=[A, dataclasses.replace(C, outcome=ABORTED)]))
    # no final read: the rule says it cannot judge rather than passing
    assert lost_writes(history(reads=[FINAL_OUT])) == [
        "no full final read of in: its lost writes cannot be judged"
    ]


def test_a_record_of_an_aborted_transaction_read_committed_is_an_aborted_read() -> None:
    saw_b0 = read("tail-2", "in", {0: [(0, "a0"), (1, "a2"), (3, "b0")]}, False)
    saw_aborted_output = read("tail-out", "out", {0: [(0, "a0>t0"), (2, "a2>t1")]}, False)
    consumed_b1 = dataclasses.replace(T2, consumed=(Consumed(0, 1, "a2"), Consumed(1, 2, "b1")))
    found = aborted_reads(
        history(
            reads=[FINAL_IN, FINAL_OUT, saw_b0, saw_aborted_output],
            transforms=[T0, T1, consumed_b1],
        )
    )
    assert len(found) == 3
    assert "tail-2 read 'b0'" in found[0] and "aborted transaction q#0" in found[0]
    assert "'a2>t1'" in found[1] and "t#1" in found[1]
    assert "t's consumer read 'b1'" in found[2]
    phantom = read("tail-3", "in", {1: [(7, "zz")]}, False)
    assert aborted_reads(history(reads=[FINAL_IN, FINAL_OUT, phantom])) == [
        "tail-3 read 'zz' at in p1 offset 7: no recorded transaction wrote it"
    ]


def test_a_committed_transaction_partly_in_the_final_read_is_torn() -> None:
    without_a2 = read("final-in", "in", {0: [(0, "a0")], 1: [(0, "a1"), (4, "c0")]}, True)
    found = torn_transactions(history(reads=[without_a2, FINAL_OUT]))
    assert found == ["committed p#0 is torn in final-in's final read: 2 of its 3 records present"]


def test_a_reader_past_a_visible_record_it_did_not_read_saw_a_torn_transaction() -> None:
    # tail-in read a0 but its position in p1 is past a1 (offset 0, known from the final
    # read): A is torn for it; C's c0 (offset 4) is still ahead of it
    skipping = Read("tail-in", "in", {0: [(0, "a0")], 1: []}, {0: 1, 1: 2})
    found = torn_transactions(history(reads=[FINAL_IN, FINAL_OUT, skipping]))
    assert found == [
        "tail-in went past 1 record(s) of p#0 without reading them (it read 1 of its 3): 'p1@0 a1'"
    ]
    # past c0 without reading any of C: the whole transaction skipped
    past_c0 = Read("tail-in", "in", {0: [(0, "a0")], 1: [(0, "a1")]}, {0: 1, 1: 6})
    (skipped,) = torn_transactions(history(reads=[FINAL_IN, FINAL_OUT, past_c0]))
    assert "of p#1" in skipped and "it read 0 of its 1" in skipped


def test_a_transaction_read_in_another_order_than_produced_is_torn() -> None:
    # both readers agree that p0 holds a2 then a0, but A produced a0 before a2
    swapped = {0: [(0, "a2"), (1, "a0")], 1: [(0, "a1"), (4, "c0")]}
    reads = [read("final-in", "in", swapped, True), FINAL_OUT, read("tail-2", "in", swapped, False)]
    found = torn_transactions(history(reads=reads))
    assert len(found) == 2
    assert all("as ['a2', 'a0'], produced as ['a0', 'a2']" in line for line in found)


def test_two_readers_seeing_a_transaction_in_different_orders_is_torn() -> None:
    other = read("tail-2", "in", {0: [(0, "a2"), (1, "a0")]}, False)
    found = torn_transactions(history(reads=[FINAL_IN, FINAL_OUT, other]))
    assert (
        "final-in and tail-2 read p#0's records in in p0 in different orders: "
        "['a0', 'a2'] and ['a2', 'a0']"
    ) in found
    assert not inconsistent_offsets(history()) and inconsistent_offsets(
        history(reads=[FINAL_IN, other])
    )


def test_readers_disagreeing_on_an_offset_or_going_backwards_are_inconsistent() -> None:
    disagrees = read("tail-2", "in", {0: [(0, "a0"), (1, "c0")]}, False)
    assert inconsistent_offsets(history(reads=[FINAL_IN, disagrees])) == [
        "in p0 offset 1 holds different values to different readers: 'a2' (final-in), 'c0' (tail-2)"
    ]
    backwards = read("tail-3", "in", {0: [(0, "a0"), (1, "a2"), (0, "a0")]}, False)
    assert inconsistent_offsets(history(reads=[FINAL_IN, backwards])) == [
        "tail-3 read in p0 offset 0 after offset 1"
    ]


def test_an_input_twice_in_in_or_transformed_twice_is_a_duplicate() -> None:
    twice = read("final-in", "in", {0: [(0, "a0"), (1, "a2"), (5, "a0")], 1: [(0, "a1")]}, True)
    found = duplicates(history(reads=[twice, FINAL_OUT]))
    assert found == ["'a0' is at 2 offsets of in: p0@0, p0@5"]
    # t#3 transformed a0 again and committed: a0 has two outputs in `out`
    t3 = Transform(
        Txn("u", 0, "out", (Record(1, "a0>u0"),), COMMITTED), (Consumed(0, 0, "a0"),), ((0, 1),)
    )
    out_twice = read(
        "final-out",
        "out",
        {0: [(0, "a0>t0"), (4, "a2>t2")], 1: [(0, "a1>t0"), (2, "c0>t2"), (4, "a0>u0")]},
        True,
    )
    found = duplicates(history(transforms=[T0, T1, T2, t3], reads=[FINAL_IN, out_twice]))
    assert found == ["input 'a0' has 2 outputs in out: p0@0 'a0>t0', p1@4 'a0>u0'"]
    assert not duplicates(history())


def test_committed_offsets_must_cover_exactly_the_transformed_inputs() -> None:
    assert not offsets_disagree_with_output(history())
    # the group committed p0 only up to a0, though a2's output is committed
    (behind,) = offsets_disagree_with_output(history(group_offsets={0: 1, 1: 5}))
    assert behind.startswith("in p0: the group's committed offset 1 covers 1 input records, 2")
    assert "output but not covered: 'a2'" in behind
    # t#2 aborted after all (its outputs absent), yet its offsets are committed
    t2_aborted = dataclasses.replace(T2, txn=dataclasses.replace(T2.txn, outcome=ABORTED))
    out_without_t2 = read("final-out", "out", {0: [(0, "a0>t0")], 1: [(0, "a1>t0")]}, True)
    found = offsets_disagree_with_output(
        history(transforms=[T0, T1, t2_aborted], reads=[FINAL_IN, out_without_t2])
    )
    assert [line.split(":")[0] for line in found] == ["in p0", "in p1"]
    assert "covered without output: 'c0'" in found[1]
    # nothing committed on p1: its inputs must have no outputs
    assert "in p1" in offsets_disagree_with_output(history(group_offsets={0: 2}))[0]


def test_an_lso_going_down_for_one_observer_is_non_monotonic() -> None:
    assert not non_monotonic_lso(history())
    down = [*LSOS, LsoSample("watcher", "in", 0, 4.0, 3)]
    assert non_monotonic_lso(history(lso_samples=down)) == [
        "watcher: in p0's LSO went from 5 (3.0s) down to 3 (4.0s)"
    ]
    # another observer, or another partition, is its own sequence
    other = [*LSOS, LsoSample("reader", "in", 0, 4.0, 3), LsoSample("watcher", "in", 1, 4.0, 0)]
    assert not non_monotonic_lso(history(lso_samples=other))


def test_a_transaction_of_unknown_outcome_is_all_or_nothing() -> None:
    a_unknown = dataclasses.replace(A, outcome=UNKNOWN)
    c_unknown = dataclasses.replace(C, outcome=UNKNOWN)
    assert not indeterminate_transactions(history(inputs=[a_unknown, B, c_unknown]))
    without_c0 = read("final-in", "in", {0: [(0, "a0"), (1, "a2")], 1: [(0, "a1")]}, True)
    assert not indeterminate_transactions(history(inputs=[A, B, c_unknown], reads=[without_c0]))
    without_a2 = read("final-in", "in", {0: [(0, "a0")], 1: [(0, "a1"), (4, "c0")]}, True)
    assert indeterminate_transactions(history(inputs=[a_unknown, B, C], reads=[without_a2])) == [
        "p#0 (commit outcome unknown) is partly visible in final-in's final read: 2 of its 3 "
        "records"
    ]
    # an unknown outcome partly visible is not a committed torn transaction nor a lost write
    assert not lost_writes(history(inputs=[a_unknown, B, C], reads=[without_a2, FINAL_OUT]))


def test_every_rule_is_run_and_reported() -> None:
    bad = history(lso_samples=[*LSOS, LsoSample("watcher", "in", 0, 4.0, 3)])
    verdict = check(bad)
    assert not verdict.ok
    assert [rule for rule, found in verdict.anomalies.items() if found] == ["non-monotonic LSO"]
    assert "non-monotonic LSO: 1" in verdict.summary()
