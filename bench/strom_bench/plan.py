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
    # P2 and F1 run on 3-node clusters with replication_settings (both sides alike)
    p2_rounds: int  # P2 (acks=all produce, RF 3) in the first p2_rounds rounds (0: never)
    p2_records: int  # of p2_record_size bytes, to p1_partitions partitions (as P1-1KiB)
    p2_record_size: int
    p2_producer_properties: tuple[str, ...]
    f1_rounds: int  # F1 (failover) in the first f1_rounds rounds (0: never) ...
    f1_trials: int  # ... with this many leader kills on one cluster each time
    f1_send_interval_ms: int  # the probe producer sends one record this often
    f1_record_size: int
    min_insync_replicas: int
    # SP1 (the clickstream Spark pipeline reading a backlog) in the first sp1_rounds rounds
    sp1_rounds: int
    sp1_records: int  # page views produced before the pipeline starts
    sp1_partitions: int  # of the page-views topic (and the output topic)
    sp1_max_offsets_per_trigger: int  # rows per micro-batch: sp1_records / this batches
    # TX1 (a transactional producer, one broker of its own) in the first tx1_rounds rounds
    tx1_rounds: int
    tx1_transactions: int  # committed one after the other; the first p1_warmup_fraction untimed
    tx1_records_per_transaction: int  # record i of a transaction to partition i % p1_partitions
    tx1_record_size: int
    tx1_producer_properties: tuple[str, ...]  # besides transactional.id
    broker_session_timeout_ms: int  # broker.session.timeout.ms: drives F1
    broker_heartbeat_interval_ms: int  # broker.heartbeat.interval.ms
    segment_bytes: int
    tool_timeout_s: float

    def warmup_records(self, records: int) -> int:
        return int(records * self.p1_warmup_fraction)

    @property
    def tx1_warmup_transactions(self) -> int:
        """TX1's untimed first transactions: P1's warm-up share, counted in transactions."""
        return self.warmup_records(self.tx1_transactions)

    @property
    def c1_bytes(self) -> int:
        return self.p1_records_1kib * KIB

    def as_settings(self) -> dict[str, Any]:
        return asdict(self)

    def replication_settings(self) -> dict[str, str]:
        """What P2's and F1's cluster nodes add to their settings, the same on both sides
        (Kafka's property names): min.insync.replicas and the broker session."""
        return {
            "min.insync.replicas": str(self.min_insync_replicas),
            "broker.session.timeout.ms": str(self.broker_session_timeout_ms),
            "broker.heartbeat.interval.ms": str(self.broker_heartbeat_interval_ms),
        }


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
    "p2_record_size": KIB,
    # P1's producer settings but acks=all (idempotence is then the client's default)
    "p2_producer_properties": ("acks=all", "batch.size=65536", "linger.ms=5"),
    "f1_send_interval_ms": 10,
    "f1_record_size": 100,
    "min_insync_replicas": 2,
    "sp1_partitions": 3,
    "tx1_records_per_transaction": 100,
    "tx1_record_size": KIB,
    # P2's producer settings: a transactional producer is idempotent, so acks=all
    "tx1_producer_properties": ("acks=all", "batch.size=65536", "linger.ms=5"),
    # Kafka's defaults are 9000 and 2000: a dead leader's partitions then stay leaderless
    # for ~9 s on both brokers. P2's and F1's clusters run both with a 1 s session and 4
    # heartbeats per session (Kafka's defaults give 4.5); see bench/README.md, F1.
    "broker_session_timeout_ms": 1000,
    "broker_heartbeat_interval_ms": 250,
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
    # P2 and F1 (four 3-node cluster starts, ~100 s) do not fit the quick budget;
    # `quick --only-p2f1` runs them once at these sizes
    p2_rounds=0,
    p2_records=40_000,
    f1_rounds=0,
    f1_trials=3,
    # SP1 (a Spark JVM per side, ~1 min each) does not fit the quick budget either;
    # `quick --only-sp1` runs it once at these sizes
    sp1_rounds=0,
    sp1_records=300_000,
    sp1_max_offsets_per_trigger=50_000,
    # TX1 once per side, small (a smoke check of the transactional path: ~15 s in all, a
    # broker start per side included)
    tx1_rounds=1,
    tx1_transactions=200,
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
    p2_rounds=3,
    p2_records=GIB // KIB,  # as P1-1KiB: 1 GiB of values
    f1_rounds=1,
    f1_trials=10,
    sp1_rounds=3,
    sp1_records=1_000_000,  # ~30 s of micro-batches on 2 cores (Spark: ~30-50k rows/s)
    sp1_max_offsets_per_trigger=100_000,
    tx1_rounds=3,
    tx1_transactions=1_000,  # 100,000 x 1 KiB: ~20-30 s on Strom, 2 cores
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
    p2_rounds=1,  # profile --workload p2
    p2_records=300_000,
    f1_rounds=0,
    f1_trials=0,
    sp1_rounds=0,
    sp1_records=0,
    sp1_max_offsets_per_trigger=1,
    tx1_rounds=0,
    tx1_transactions=0,
    **_COMMON,
)

PLANS = {plan.mode: plan for plan in (QUICK, FULL, PROFILE)}
