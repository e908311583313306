"""What a run does: the workload sizes and repetitions of the quick and full modes."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

KIB = 1024
GIB = 1024 * 1024 * 1024


@dataclass(frozen=True)
class Plan:
    mode: str
    rounds: int  # each round runs every workload once on Strom, then on Kafka (A B A B)
    settle_s: float  # wait before reading an idle broker's memory
    p1_partitions: int
    p1_records_1kib: int  # also C1's data: C1 reads back everything P1-1KiB wrote
    p1_records_100b: int
    p1_warmup_fraction: float  # ProducerPerformance --warmup-records, left out of the figure
    producer_properties: tuple[str, ...]
    l1_rate: int
    l1_duration_s: float
    l1_warmup_s: float
    l1_record_size: int
    l1_acks: str
    m1_partitions: int
    s1_partitions: int  # S1: the topic whose broker is stopped and started again
    s1_rounds: int  # S1 runs in the first s1_rounds rounds only (0: not at all)
    s1_records: int  # produced to the S1 topic before the stop, spread over its partitions
    c2_rounds: int  # C2 (topic creation on a cluster) in the first c2_rounds rounds (0: never)
    c2_topics: int  # C2-100x10: this many topics ...
    c2_topic_partitions: int  # ... of this many partitions each, in one createTopics request
    c2_big_partitions: int  # C2-10k: one topic of this many partitions (0: not run)
    c2_partitions_per_request: int  # at most this many partitions per request (Kafka's limit)
    segment_bytes: int
    tool_timeout_s: float

    def warmup_records(self, records: int) -> int:
        return int(records * self.p1_warmup_fraction)

    @property
    def c1_bytes(self) -> int:
        return self.p1_records_1kib * KIB

    def as_settings(self) -> dict[str, Any]:
        return asdict(self)


_COMMON: dict[str, Any] = {
    "p1_partitions": 6,
    "p1_warmup_fraction": 0.2,
    "producer_properties": ("acks=1", "batch.size=65536", "linger.ms=5"),
    "l1_rate": 5000,
    "l1_record_size": KIB,
    "l1_acks": "1",
    "m1_partitions": 1000,
    "s1_partitions": 10_000,
    "s1_records": 20_000,
    "c2_topics": 100,
    "c2_topic_partitions": 10,
    # Kafka refuses one request making more than 10,000 metadata records, and a topic of
    # 10,000 partitions makes 10,001: created with 5,000, then grown by createPartitions.
    "c2_partitions_per_request": 5_000,
    "segment_bytes": GIB,
}

QUICK = Plan(
    mode="quick",
    rounds=3,
    settle_s=0.5,
    p1_records_1kib=40_000,
    p1_records_100b=150_000,
    l1_duration_s=3.5,
    l1_warmup_s=1.5,
    tool_timeout_s=120.0,
    s1_rounds=0,  # 10,000 partitions on Kafka do not fit the quick budget
    c2_rounds=1,  # C2-100x10 once per side (~20 s in all, a 3-node Kafka start is most of it)
    c2_big_partitions=0,  # C2-10k: another ~10-30 s on Kafka, past the quick budget
    **_COMMON,
)

FULL = Plan(
    mode="full",
    rounds=5,
    settle_s=5.0,
    p1_records_1kib=GIB // KIB,  # 1 GiB of values: C1 consumes 1 GiB already on disk
    p1_records_100b=3_000_000,
    l1_duration_s=30.0,
    l1_warmup_s=5.0,
    tool_timeout_s=900.0,
    s1_rounds=3,
    c2_rounds=3,
    c2_big_partitions=10_000,
    **_COMMON,
)

# `make bench-profile`: P1 against Strom only, sized like the full run's P1 but shorter.
PROFILE = Plan(
    mode="profile",
    rounds=1,
    settle_s=1.0,
    p1_records_1kib=300_000,
    p1_records_100b=1_000_000,
    l1_duration_s=0.0,
    l1_warmup_s=0.0,
    tool_timeout_s=600.0,
    s1_rounds=0,
    c2_rounds=0,
    c2_big_partitions=0,
    **_COMMON,
)

PLANS = {plan.mode: plan for plan in (QUICK, FULL, PROFILE)}
