"""The figures a run reports: per-side summaries of the rounds, the Strom/Kafka ratio, and
whether the ratio meets the broker's target. Pure: no processes, no files."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HIGHER = "higher"
LOWER = "lower"


@dataclass(frozen=True)
class Target:
    """A goal for the Strom/Kafka ratio, e.g. `>= 0.8` (from the benchmark issue)."""

    op: str  # ">=" or "<="
    ratio: float
    strom_at_most: float | None = None  # and an absolute bound on Strom's median

    def met_by(self, ratio: float, strom_median: float | None = None) -> bool:
        met = ratio >= self.ratio if self.op == ">=" else ratio <= self.ratio
        if self.strom_at_most is not None:
            met = met and strom_median is not None and strom_median < self.strom_at_most
        return met

    def __str__(self) -> str:
        text = f"{self.op} {self.ratio:g}"
        if self.strom_at_most is not None:
            text += f", Strom < {self.strom_at_most:g}"
        return text


@dataclass(frozen=True)
class FigureSpec:
    id: str
    unit: str
    better: str  # HIGHER or LOWER
    title: str
    target: Target | None = None
    pending: str | None = None  # why the figure cannot be measured yet


_P1 = Target(">=", 0.8)
_C1 = Target(">=", 1.0)
_L1 = Target("<=", 2.0)
_M1 = Target("<=", 0.5)
_C2 = Target("<=", 1.0)  # both sides 3-node clusters (see clusters)
_P2 = Target(">=", 0.8)
_F1 = Target("<=", 1.0, strom_at_most=2.0)  # and Strom's failover under 2 s
_SP1 = Target(">=", 0.9)  # Spark, not the broker, should be the bottleneck

SPECS: tuple[FigureSpec, ...] = (
    FigureSpec("P1-1KiB", "MB/s", HIGHER, "produce 1 KiB records, 6 partitions, acks=1", _P1),
    FigureSpec("P1-1KiB-records", "records/s", HIGHER, "same run, records per second", _P1),
    FigureSpec("P1-100B", "MB/s", HIGHER, "produce 100 B records, 6 partitions, acks=1", _P1),
    FigureSpec("P1-100B-records", "records/s", HIGHER, "same run, records per second", _P1),
    FigureSpec("P2", "MB/s", HIGHER, "produce 1 KiB, 3 brokers, RF=3, min ISR 2, acks=all", _P2),
    FigureSpec("P2-records", "records/s", HIGHER, "same run, records per second", _P2),
    FigureSpec("TX1", "records/s", HIGHER, "transactional produce: 100 x 1 KiB per commit"),
    FigureSpec("TX1-txns", "transactions/s", HIGHER, "same run, transactions per second"),
    FigureSpec("C1", "MB/s", HIGHER, "consume P1-1KiB's records from the start", _C1),
    FigureSpec("C1-records", "records/s", HIGHER, "same run, records per second", _C1),
    FigureSpec("L1-p50", "ms", LOWER, "end-to-end latency at 5,000 msg/s, 1 KiB"),
    FigureSpec("L1-p99", "ms", LOWER, "end-to-end latency at 5,000 msg/s, 1 KiB", _L1),
    FigureSpec("L1-p99.9", "ms", LOWER, "end-to-end latency at 5,000 msg/s, 1 KiB"),
    FigureSpec("F1", "s", LOWER, "SIGKILL of the leader to the next acked send, RF=3", _F1),
    FigureSpec("F1-broker", "s", LOWER, "F1's trials where the leader was not the controller", _F1),
    FigureSpec("F1-controller", "s", LOWER, "F1's trials where it was the active controller too"),
    FigureSpec("M1-idle", "MiB", LOWER, "resident memory, just started, no topics", _M1),
    FigureSpec("M1-P1", "MiB", LOWER, "peak resident memory during P1", _M1),
    FigureSpec("M1-1000p", "MiB", LOWER, "after the workloads, + 1,000-partition topic", _M1),
    FigureSpec("S1-stop-10k", "s", LOWER, "SIGTERM to exit, 10,000 partitions, some written"),
    FigureSpec("S1-start-10k", "s", LOWER, "start to ready again on those 10,000 partitions"),
    FigureSpec("C2-100x10", "s", LOWER, "create 100 topics x 10 partitions, RF 1, cluster", _C2),
    FigureSpec("C2-10k", "s", LOWER, "create 1 topic x 10,000 partitions, RF 1, cluster", _C2),
    FigureSpec("SP1", "records/s", HIGHER, "clickstream Spark pipeline reading a backlog", _SP1),
)  # fmt: skip
SPECS_BY_ID = {spec.id: spec for spec in SPECS}


@dataclass(frozen=True)
class Summary:
    """Median, min and max of one side's runs of one figure."""

    median: float
    min: float
    max: float
    runs: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary | None:
        if not values:
            return None
        return cls(
            median=statistics.median(values), min=min(values), max=max(values), runs=tuple(values)
        )

    def to_json(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.min, "max": self.max, "runs": list(self.runs)}


@dataclass(frozen=True)
class Figure:
    spec: FigureSpec
    strom: Summary | None
    kafka: Summary | None

    @property
    def ratio(self) -> float | None:
        """Strom's median over Kafka's; None when a side has no runs or Kafka's is 0."""
        if self.strom is None or self.kafka is None or self.kafka.median == 0:
            return None
        return self.strom.median / self.kafka.median

    @property
    def meets_target(self) -> bool | None:
        ratio = self.ratio
        if self.spec.target is None or ratio is None:
            return None
        return self.spec.target.met_by(ratio, self.strom.median if self.strom else None)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.spec.id,
            "unit": self.spec.unit,
            "strom": self.strom.to_json() if self.strom else None,
            "kafka": self.kafka.to_json() if self.kafka else None,
            "ratio": self.ratio,
            "better": self.spec.better,
            "title": self.spec.title,
            "target": str(self.spec.target) if self.spec.target else None,
            "meets_target": self.meets_target,
        }
        if self.spec.pending:
            data["pending"] = self.spec.pending
        return data


def build_figures(
    rounds: Mapping[str, Sequence[Mapping[str, float]]],
    specs: Sequence[FigureSpec] = SPECS,
) -> list[Figure]:
    """One Figure per spec from each side's rounds ({"strom": [{id: value}, ...], "kafka": ...}).

    A round that lost a figure (its workload failed) just contributes no value to it.
    """

    def summary(side: str, figure_id: str) -> Summary | None:
        values = [r[figure_id] for r in rounds.get(side, ()) if figure_id in r]
        return Summary.of(values)

    return [
        Figure(spec, None, None)
        if spec.pending
        else Figure(spec, summary("strom", spec.id), summary("kafka", spec.id))
        for spec in specs
    ]
