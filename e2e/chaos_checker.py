"""The chaos test's verdict: what the producers and the group were told, against what the
cluster holds once every fault is healed.

Pure functions over plain records (no cluster, no clients), so the rules are easy to read
and checked on their own (test_chaos_checker.py):

- lost: an acknowledged value that no partition holds;
- duplicated: a value that the topic holds more than once (acknowledged or not);
- misplaced: an acknowledged value that is not at the (partition, offset) it was
  acknowledged at (present elsewhere, or another value there);
- reordered: a producer's acknowledgements in one partition whose offsets do not increase
  in the order the producer was told them (Kafka's per-partition order for an idempotent
  producer: later acknowledged, later in the log);
- commits moved back: a group's committed offset below one it had been told was committed
  (at the end, or between two acknowledged commits).
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

UNKNOWN_OFFSET = -1


@dataclasses.dataclass(frozen=True)
class Ack:
    """One acknowledged record: a producer was told `value` is at (partition, offset)
    (UNKNOWN_OFFSET: acknowledged without an offset)."""

    producer: str
    partition: int
    offset: int
    value: str
    at: float  # seconds since the run started, when the producer learned it


@dataclasses.dataclass(frozen=True)
class Commit:
    """An offset commit the coordinator acknowledged: the group's position in a partition."""

    partition: int
    offset: int
    at: float


@dataclasses.dataclass
class Verdict:
    acks: int
    records_read: int
    lost: list[Ack]
    duplicated: dict[str, int]  # value -> how many times the topic holds it
    misplaced: list[tuple[Ack, str | None]]  # the ack, and what is at its offset instead
    reordered: list[tuple[Ack, Ack]]  # an ack, and an earlier one of the same producer and
    # partition at a higher offset
    commits_moved_back: list[str]
    unacknowledged_present: int  # records written whose ack never came: allowed

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.misplaced
            or self.reordered
            or self.commits_moved_back
        )

    def summary(self, limit: int = 10) -> str:
        lines = [
            f"acks: {self.acks}",
            f"records read: {self.records_read}",
            f"unacknowledged but present (allowed): {self.unacknowledged_present}",
            f"lost: {len(self.lost)}",
            *(f"  {ack}" for ack in self.lost[:limit]),
            f"duplicated: {len(self.duplicated)}",
            *(f"  {value} x{n}" for value, n in list(self.duplicated.items())[:limit]),
            f"misplaced: {len(self.misplaced)}",
            *(f"  {ack} holds {there!r}" for ack, there in self.misplaced[:limit]),
            f"reordered: {len(self.reordered)}",
            *(f"  {late} acknowledged after {early}" for late, early in self.reordered[:limit]),
            f"commits moved back: {len(self.commits_moved_back)}",
            *(f"  {line}" for line in self.commits_moved_back[:limit]),
        ]
        return "\n".join(lines)


def check(
    acks: Sequence[Ack],
    partitions: Mapping[int, Sequence[tuple[int, str]]],
    commits: Sequence[Commit] = (),
    final_commits: Mapping[int, int] | None = None,
) -> Verdict:
    """`acks` in the order each producer learned them (producers interleaved any way);
    `partitions`: partition -> its (offset, value) records from the start to the end;
    `commits`: the group's acknowledged commits in order; `final_commits`: partition -> the
    group's committed offset read after the run (None: not read)."""
    held: dict[tuple[int, int], str] = {}
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in partitions.items():
        for offset, value in records:
            held[(partition, offset)] = value
            where[value].append((partition, offset))
    counts = Counter({value: len(places) for value, places in where.items()})
    duplicated = {value: n for value, n in counts.items() if n > 1}

    lost: list[Ack] = []
    misplaced: list[tuple[Ack, str | None]] = []
    placed: list[Ack] = []
    for ack in acks:
        if ack.offset == UNKNOWN_OFFSET:
            # librdkafka's "persisted, offset unknown" (a timed-out batch that a later
            # one's acknowledgement proves written): judged where the value is.
            found = [
                offset
                for partition, offset in where.get(ack.value, ())
                if partition == ack.partition
            ]
            if found:
                ack = dataclasses.replace(ack, offset=found[0])
        if ack.value not in where:
            lost.append(ack)
        elif held.get((ack.partition, ack.offset)) != ack.value:
            misplaced.append((ack, held.get((ack.partition, ack.offset))))
        placed.append(ack)

    acked_values = {ack.value for ack in acks}
    return Verdict(
        acks=len(acks),
        records_read=sum(len(records) for records in partitions.values()),
        lost=lost,
        duplicated=duplicated,
        misplaced=misplaced,
        reordered=reordered(placed),
        commits_moved_back=commits_moved_back(commits, final_commits),
        unacknowledged_present=sum(1 for value in where if value not in acked_values),
    )


def reordered(acks: Iterable[Ack]) -> list[tuple[Ack, Ack]]:
    """Acks whose offset is not above every earlier ack of the same producer and partition
    (paired with the earlier ack of the highest offset)."""
    highest: dict[tuple[str, int], Ack] = {}
    found = []
    for ack in acks:
        key = (ack.producer, ack.partition)
        before = highest.get(key)
        if before is not None and ack.offset <= before.offset:
            found.append((ack, before))
        else:
            highest[key] = ack
    return found


def commits_moved_back(
    commits: Sequence[Commit], final_commits: Mapping[int, int] | None
) -> list[str]:
    problems = []
    last: dict[int, Commit] = {}
    for commit in commits:
        before = last.get(commit.partition)
        if before is not None and commit.offset < before.offset:
            problems.append(
                f"partition {commit.partition}: committed {commit.offset} at "
                f"{commit.at:.1f}s after {before.offset} at {before.at:.1f}s"
            )
        if before is None or commit.offset >= before.offset:
            last[commit.partition] = commit
    if final_commits is not None:
        for partition, commit in sorted(last.items()):
            final = final_commits.get(partition, -1)
            if final < commit.offset:
                problems.append(
                    f"partition {partition}: the group's committed offset is {final} after the "
                    f"run, below {commit.offset} acknowledged at {commit.at:.1f}s"
                )
    return problems
