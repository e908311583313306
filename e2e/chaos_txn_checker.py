"""The transactional chaos test's verdict (issue 18, docs/transactions-design.md step 11).

Pure functions over a recorded history (no cluster, no clients; test_chaos_txn_checker.py
shows each rule failing on a bad history). The history: transactional producers' input
transactions on `in`, consume-transform-produce transactions from `in` to `out`,
read_committed reads of both topics (tailing readers during the run, full reads after
it), the group's committed offsets on `in` after the run, and LSO samples.

The rules take their names from Jepsen's Kafka queue workload (jepsen.tests.kafka:
lost-write, G1a aborted read, duplicate, inconsistent-offsets, nonmonotonic-poll,
poll-skip), applied to Kafka's transactional promises:

- lost writes: a record of a transaction whose commit was acknowledged is absent from a
  full final read of its topic;
- aborted reads: a read_committed reader (a tailing reader, a final read, a transform's
  consumer) saw a record of an aborted transaction, or one no recorded transaction wrote;
- torn transactions: a committed transaction partly present in a final read; a reader
  that went past a record of a visible transaction (its offset known from any reader)
  without reading it; a transaction's records in one partition read in another order
  than produced, or in different orders by two readers;
- inconsistent offsets: two readers saw different values at one offset, or a reader's
  offsets in a partition did not increase;
- duplicates: a value at more than one offset of its topic (an input record twice in
  `in`, an output twice in `out`), or an input record whose outputs appear more than once
  in `out` (transformed and committed twice);
- offsets/output agreement: on each `in` partition the group's committed offset covers
  exactly the input records whose transformed outputs are committed (so the count of
  covered records equals the count of transformed ones);
- non-monotonic LSO: an observer saw a partition's last stable offset go down;
- indeterminate transactions: a transaction whose commit raised (outcome unknown) is
  wholly visible or wholly absent in the final reads.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import combinations


class Outcome(enum.Enum):
    COMMITTED = "committed"  # commit_transaction returned
    ABORTED = "aborted"  # abort_transaction returned, or the commit was never asked for
    UNKNOWN = "unknown"  # the commit was asked for and raised: it may have happened


@dataclasses.dataclass(frozen=True)
class Record:
    """A record a transaction produced: its value is unique within its topic."""

    partition: int
    value: str


@dataclasses.dataclass(frozen=True)
class Txn:
    transactional_id: str
    sequence: int  # the transactional id's transactions are numbered from 0
    topic: str
    records: tuple[Record, ...]  # in the order produced
    outcome: Outcome

    @property
    def name(self) -> str:
        return f"{self.transactional_id}#{self.sequence}"


@dataclasses.dataclass(frozen=True)
class Consumed:
    """A record a transform's consumer read from `in`."""

    partition: int
    offset: int
    value: str


@dataclasses.dataclass(frozen=True)
class Transform:
    """One consume-transform-produce transaction: `txn.records[i]` (in `out`) is the output
    of `consumed[i]`; `offsets`: the (`in` partition, next offset) pairs it sent with
    send_offsets_to_transaction."""

    txn: Txn
    consumed: tuple[Consumed, ...]
    offsets: tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class Read:
    """What one read_committed reader saw of one topic."""

    reader: str
    topic: str
    records: Mapping[int, Sequence[tuple[int, str]]]  # partition -> (offset, value), as read
    positions: Mapping[int, int]  # partition -> the next offset it would have read, at its end
    final: bool = False  # from the start to the end, after every transaction had ended


@dataclasses.dataclass(frozen=True)
class LsoSample:
    """A partition's last stable offset (ListOffsets latest, read_committed) as seen by one
    observer; an observer's samples of a partition are taken one after the other."""

    observer: str
    topic: str
    partition: int
    at: float  # seconds since the run started
    lso: int


@dataclasses.dataclass
class History:
    inputs: list[Txn]
    transforms: list[Transform]
    reads: list[Read]
    group_offsets: Mapping[int, int]  # `in` partition -> committed offset (negative: none)
    lso_samples: list[LsoSample]
    in_topic: str = "in"
    out_topic: str = "out"

    def transactions(self) -> Iterator[Txn]:
        yield from self.inputs
        for transform in self.transforms:
            yield transform.txn

    def final_reads(self, topic: str) -> list[Read]:
        return [read for read in self.reads if read.final and read.topic == topic]


EXAMPLES = 3  # values quoted in one anomaly's description


def _quote(values: Iterable[object]) -> str:
    shown = list(values)
    more = f" and {len(shown) - EXAMPLES} more" if len(shown) > EXAMPLES else ""
    return ", ".join(repr(v) for v in shown[:EXAMPLES]) + more


def _writers(history: History) -> dict[tuple[str, str], Txn]:
    """(topic, value) -> the transaction that produced it."""
    return {
        (txn.topic, record.value): txn for txn in history.transactions() for record in txn.records
    }


def _places(history: History) -> dict[tuple[str, str], set[tuple[int, int]]]:
    """(topic, value) -> every (partition, offset) any reader saw it at."""
    found: dict[tuple[str, str], set[tuple[int, int]]] = defaultdict(set)
    for read in history.reads:
        for partition, records in read.records.items():
            for offset, value in records:
                found[(read.topic, value)].add((partition, offset))
    return found


def _held(read: Read) -> set[tuple[int, str]]:
    return {(p, value) for p, records in read.records.items() for _, value in records}


def lost_writes(history: History) -> list[str]:
    found = []
    for topic in (history.in_topic, history.out_topic):
        finals = history.final_reads(topic)
        if not finals:
            found.append(f"no full final read of {topic}: its lost writes cannot be judged")
        for read in finals:
            held = _held(read)
            for txn in history.transactions():
                if txn.topic != topic or txn.outcome is not Outcome.COMMITTED:
                    continue
                missing = [r.value for r in txn.records if (r.partition, r.value) not in held]
                if missing:
                    found.append(
                        f"{txn.name} committed {len(txn.records)} records to {topic}; "
                        f"{read.reader}'s final read lacks {len(missing)}: {_quote(missing)}"
                    )
    return found


def aborted_reads(history: History) -> list[str]:
    writers = _writers(history)
    found = []

    def judge(reader: str, topic: str, partition: int, offset: int, value: str) -> None:
        where = f"{reader} read {value!r} at {topic} p{partition} offset {offset}"
        writer = writers.get((topic, value))
        if writer is None:
            found.append(f"{where}: no recorded transaction wrote it")
        elif writer.outcome is Outcome.ABORTED:
            found.append(f"{where}, of aborted transaction {writer.name}")

    for read in history.reads:
        for partition, records in read.records.items():
            for offset, value in records:
                judge(read.reader, read.topic, partition, offset, value)
    for transform in history.transforms:
        consumer = f"{transform.txn.transactional_id}'s consumer"
        for c in transform.consumed:
            judge(consumer, history.in_topic, c.partition, c.offset, c.value)
    return found


def torn_transactions(history: History) -> list[str]:
    return [
        *_partly_in_final_reads(history),
        *_passed_without_reading(history),
        *_read_out_of_order(history),
    ]


def _partly_in_final_reads(history: History) -> Iterator[str]:
    for txn in history.transactions():
        if txn.outcome is not Outcome.COMMITTED:
            continue  # an aborted one is absent (aborted reads), an unknown one is judged below
        for read in history.final_reads(txn.topic):
            held = _held(read)
            present = [r for r in txn.records if (r.partition, r.value) in held]
            if 0 < len(present) < len(txn.records):
                yield (
                    f"committed {txn.name} is torn in {read.reader}'s final read: "
                    f"{len(present)} of its {len(txn.records)} records present"
                )


def _passed_without_reading(history: History) -> Iterator[str]:
    """A reader's position past a record of a visible transaction that it did not read (the
    final reads are judged whole above). Offsets come from every reader, so a record only
    one reader saw still counts."""
    writers, places = _writers(history), _places(history)
    for read in history.reads:
        if read.final:
            continue
        held = _held(read)
        missed: dict[Txn, list[tuple[int, int, str]]] = defaultdict(list)
        for (topic, value), seen_at in sorted(places.items()):
            writer = writers.get((topic, value))
            if topic != read.topic or writer is None or writer.outcome is Outcome.ABORTED:
                continue
            for partition, offset in sorted(seen_at):
                if offset < read.positions.get(partition, 0) and (partition, value) not in held:
                    missed[writer].append((partition, offset, value))
        for txn, records in missed.items():
            seen = sum((r.partition, r.value) in held for r in txn.records)
            yield (
                f"{read.reader} went past {len(records)} record(s) of {txn.name} without reading "
                f"them (it read {seen} of its {len(txn.records)}): "
                + _quote(f"p{p}@{o} {v}" for p, o, v in records)
            )


def _read_out_of_order(history: History) -> Iterator[str]:
    """Within one partition a transaction's records are read in the order produced, and
    every reader sees them in the same order."""
    order_of: dict[tuple[str, int], list[tuple[str, dict[str, int]]]] = defaultdict(list)
    for read in history.reads:
        for partition, records in read.records.items():
            index = {value: i for i, (_, value) in enumerate(records)}
            order_of[(read.topic, partition)].append((read.reader, index))
    for txn in history.transactions():
        by_partition: dict[int, list[str]] = defaultdict(list)
        for record in txn.records:
            by_partition[record.partition].append(record.value)
        for partition, produced in sorted(by_partition.items()):
            if len(produced) < 2:
                continue
            orders = []
            for reader, index in order_of[(txn.topic, partition)]:
                order = sorted((v for v in produced if v in index), key=index.__getitem__)
                orders.append((reader, order))
                if order != [v for v in produced if v in index]:
                    yield (
                        f"{reader} read {txn.name}'s records in {txn.topic} p{partition} as "
                        f"{order}, produced as {produced}"
                    )
            for (a, order_a), (b, order_b) in combinations(orders, 2):
                common = set(order_a) & set(order_b)
                if [v for v in order_a if v in common] != [v for v in order_b if v in common]:
                    yield (
                        f"{a} and {b} read {txn.name}'s records in {txn.topic} p{partition} in "
                        f"different orders: {order_a} and {order_b}"
                    )


def inconsistent_offsets(history: History) -> list[str]:
    found = []
    values_at: dict[tuple[str, int, int], dict[str, str]] = defaultdict(dict)
    for read in history.reads:
        for partition, records in read.records.items():
            previous = -1
            for offset, value in records:
                if offset <= previous:
                    found.append(
                        f"{read.reader} read {read.topic} p{partition} offset {offset} after "
                        f"offset {previous}"
                    )
                previous = max(previous, offset)
                values_at[(read.topic, partition, offset)].setdefault(value, read.reader)
    for (topic, partition, offset), readers in sorted(values_at.items()):
        if len(readers) > 1:
            found.append(
                f"{topic} p{partition} offset {offset} holds different values to different "
                "readers: " + ", ".join(f"{v!r} ({r})" for v, r in sorted(readers.items()))
            )
    return found


def duplicates(history: History) -> list[str]:
    places = _places(history)
    found = [
        f"{value!r} is at {len(at)} offsets of {topic}: "
        + ", ".join(f"p{p}@{o}" for p, o in sorted(at))
        for (topic, value), at in sorted(places.items())
        if len(at) > 1
    ]
    source_of = {
        output.value: consumed.value
        for transform in history.transforms
        for output, consumed in zip(transform.txn.records, transform.consumed, strict=True)
    }
    outputs_of: dict[str, set[tuple[int, int, str]]] = defaultdict(set)
    for (topic, value), at in places.items():
        if topic == history.out_topic and value in source_of:
            outputs_of[source_of[value]].update((p, o, value) for p, o in at)
    found.extend(
        f"input {source!r} has {len(outputs)} outputs in {history.out_topic}: "
        + ", ".join(f"p{p}@{o} {v!r}" for p, o, v in sorted(outputs))
        for source, outputs in sorted(outputs_of.items())
        if len(outputs) > 1
    )
    return found


def offsets_disagree_with_output(history: History) -> list[str]:
    """On each `in` partition, the visible input records below the group's committed offset
    are exactly those whose outputs the final read of `out` holds. Offsets count commit
    markers and aborted records too, so the rule compares records, not offset arithmetic."""
    finals_in = history.final_reads(history.in_topic)
    finals_out = history.final_reads(history.out_topic)
    if not finals_in or not finals_out:
        return ["offsets/output agreement needs full final reads of both topics"]
    source_of = {
        output.value: consumed
        for transform in history.transforms
        for output, consumed in zip(transform.txn.records, transform.consumed, strict=True)
    }
    transformed: dict[int, set[str]] = defaultdict(set)  # `in` partition -> input values
    for values in finals_out[0].records.values():
        for _, value in values:
            source = source_of.get(value)
            if source is not None:
                transformed[source.partition].add(source.value)
    found = []
    read_in = finals_in[0]
    for partition in sorted(set(read_in.records) | set(transformed) | set(history.group_offsets)):
        committed = max(0, history.group_offsets.get(partition, 0))
        covered = {v for o, v in read_in.records.get(partition, ()) if o < committed}
        done = transformed[partition]
        if covered != done:
            found.append(
                f"{history.in_topic} p{partition}: the group's committed offset {committed} "
                f"covers {len(covered)} input records, {len(done)} have committed outputs; "
                f"covered without output: {_quote(sorted(covered - done)) or 'none'}; "
                f"output but not covered: {_quote(sorted(done - covered)) or 'none'}"
            )
    return found


def non_monotonic_lso(history: History) -> list[str]:
    last: dict[tuple[str, str, int], LsoSample] = {}
    found = []
    for sample in sorted(history.lso_samples, key=lambda s: s.at):
        key = (sample.observer, sample.topic, sample.partition)
        before = last.get(key)
        if before is not None and sample.lso < before.lso:
            found.append(
                f"{sample.observer}: {sample.topic} p{sample.partition}'s LSO went from "
                f"{before.lso} ({before.at:.1f}s) down to {sample.lso} ({sample.at:.1f}s)"
            )
        if before is None or sample.lso >= before.lso:
            last[key] = sample
    return found


def indeterminate_transactions(history: History) -> list[str]:
    found = []
    for txn in history.transactions():
        if txn.outcome is not Outcome.UNKNOWN:
            continue
        for read in history.final_reads(txn.topic):
            held = _held(read)
            present = sum((r.partition, r.value) in held for r in txn.records)
            if 0 < present < len(txn.records):
                found.append(
                    f"{txn.name} (commit outcome unknown) is partly visible in {read.reader}'s "
                    f"final read: {present} of its {len(txn.records)} records"
                )
    return found


RULES: dict[str, Callable[[History], list[str]]] = {
    "lost writes": lost_writes,
    "aborted reads": aborted_reads,
    "torn transactions": torn_transactions,
    "inconsistent offsets": inconsistent_offsets,
    "duplicates": duplicates,
    "offsets/output agreement": offsets_disagree_with_output,
    "non-monotonic LSO": non_monotonic_lso,
    "indeterminate transactions": indeterminate_transactions,
}


@dataclasses.dataclass
class Verdict:
    anomalies: dict[str, list[str]]  # rule -> what it found
    figures: dict[str, int]

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    def summary(self, limit: int = 10) -> str:
        lines = [", ".join(f"{name} {n}" for name, n in self.figures.items())]
        for rule, found in self.anomalies.items():
            lines.append(f"{rule}: {len(found)}")
            lines.extend(f"  {line}" for line in found[:limit])
        return "\n".join(lines)


def figures(history: History) -> dict[str, int]:
    """The run's size, for the report: what a clean verdict was reached over."""
    counts: dict[str, int] = {}
    for kind, txns in (
        ("input", history.inputs),
        ("transform", [t.txn for t in history.transforms]),
    ):
        for outcome in Outcome:
            counts[f"{kind} {outcome.value}"] = sum(t.outcome is outcome for t in txns)
        for outcome in (Outcome.COMMITTED, Outcome.ABORTED):
            counts[f"{kind} records {outcome.value}"] = sum(
                len(t.records) for t in txns if t.outcome is outcome
            )
    for topic in (history.in_topic, history.out_topic):
        finals = history.final_reads(topic)
        counts[f"final {topic}"] = sum(len(r) for r in finals[0].records.values()) if finals else 0
    counts["reads"] = len(history.reads)
    counts["LSO samples"] = len(history.lso_samples)
    return counts


def check(history: History) -> Verdict:
    return Verdict({rule: judge(history) for rule, judge in RULES.items()}, figures(history))
