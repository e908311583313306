"""One side's turn in a round: every workload against one fresh broker, figures collected.

In order: M1-idle (just started, no topics), P1 with 1 KiB then 100 B records (M1-P1 is the
peak sampled throughout), C1 reading back everything P1-1KiB wrote, L1, and last M1-1000p
(a 1,000-partition topic added, so its idle partitions cannot disturb the other workloads).
Then, in the plan's first ``s1_rounds`` rounds, S1 on a broker of its own: a 10,000-partition
topic with a few records spread over it, SIGTERM timed to exit (S1-stop), then a start
timed to ready (S1-start): /readyz answering 200 for Strom, an admin client seeing the node
for Kafka, as ``wait_ready`` does.
Then, in the first ``c2_rounds`` rounds, C2 on a cluster of its own (see ``run_c2``): a
3-node KRaft cluster for Kafka, ``clusters.STROM_CLUSTER`` (a 3-node Strom quorum) for Strom.
P2 and F1 (replication on 3-node clusters) come after the turn, from replicated.py.
A failed workload is recorded and leaves its figures out of this round; a dead broker ends
the turn.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from strom_bench import brokers, clusters, java_tools, memory, process_groups
from strom_bench.plan import Plan

P1_1KIB_TOPIC = "p1-1kib"
P1_100B_TOPIC = "p1-100b"
L1_TOPIC = "l1"
M1_TOPIC = "m1-partitions"
S1_TOPIC = "s1-partitions"
# Kafka's controller refuses more than 10,000 records per admin request (a topic is one
# record plus one per partition), so S1's partitions come as topics of at most this many,
# created one request each.
S1_PARTITIONS_PER_TOPIC = 5_000
ADMIN_TIMEOUT_S = 120.0
S1_ADMIN_TIMEOUT_S = 600.0  # creating 10,000 partitions
S1_STOP_TIMEOUT_S = 300.0
C2_SMALL_TOPICS = "c2-small"  # C2-100x10's topics: c2-small-0 .. c2-small-99
C2_BIG_TOPIC = "c2-big"
C2_TIMEOUT_S = 600.0


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Turn:
    """Everything one side's turn needs, and where its figures and errors go."""

    kind: str
    round_no: int
    plan: Plan
    groups: process_groups.ProcessGroups
    run_dir: Path
    kafka_template: Path | None
    kafka_cluster_templates: tuple[Path, ...] = ()  # C2's nodes, formatted (node.id 1..N)
    values: dict[str, float] = field(default_factory=dict)
    # figures measured several times in one turn (F1's trials): one dict per trial, counted
    # as runs of their own beside the rounds'
    trials: list[dict[str, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"[round {self.round_no}/{self.plan.rounds} {self.kind}]"

    def new_broker(self, workload: str = "") -> brokers.Broker:
        work_dir = self.run_dir / f"round{self.round_no}-{self.kind}{workload}"
        if self.kind == brokers.STROM:
            return brokers.StromBroker(self.groups, work_dir, self.plan.segment_bytes)
        assert self.kafka_template is not None
        return brokers.KafkaBroker(
            self.groups, work_dir, self.plan.segment_bytes, self.kafka_template
        )

    def cluster_dir(self, workload: str = "c2") -> Path:
        return self.run_dir / f"round{self.round_no}-{self.kind}-{workload}"

    def new_cluster(
        self, workload: str = "c2", settings: Mapping[str, str] | None = None
    ) -> clusters.Cluster:
        """A 3-node cluster of this side in `cluster_dir(workload)`, `settings` added to
        every node's (P2 and F1: the plan's replication_settings)."""
        work_dir = self.cluster_dir(workload)
        if self.kind == brokers.STROM:
            return clusters.STROM_CLUSTER(self.groups, work_dir, self.plan.segment_bytes, settings)
        assert self.kafka_cluster_templates
        return clusters.kafka_cluster(
            self.groups, work_dir, self.plan.segment_bytes, self.kafka_cluster_templates, settings
        )

    def record(self, figure_id: str, value: float, unit: str) -> None:
        self.values[figure_id] = value
        progress(f"{self.label} {figure_id}: {value:,.1f} {unit}")

    def attempt(self, workload: str, run: Callable[[], None]) -> None:
        """Run one workload; a tool failure is recorded and the turn goes on."""
        try:
            run()
        except java_tools.ToolFailed as e:
            self.errors.append(f"{self.label} {workload}: {e}")
            progress(f"{self.label} {workload} FAILED: {str(e).splitlines()[0]}")


def run_turn(turn: Turn) -> Turn:
    broker = turn.new_broker()
    tools = java_tools.JavaTools(turn.groups, broker.work_dir / "tools")
    try:
        _run_workloads(turn, broker, tools)
    except (brokers.BrokerFailed, process_groups.BrokerExited, java_tools.ToolFailed) as e:
        turn.errors.append(f"{turn.label} broker: {e}\n{broker.log_excerpt()}")
        progress(f"{turn.label} broker FAILED: {str(e).splitlines()[0]}")
    finally:
        broker.stop()
    if turn.round_no <= turn.plan.s1_rounds:
        run_s1(turn)
    if turn.round_no <= turn.plan.c2_rounds:
        run_c2(turn)
    return turn


def s1_topics(partitions: int) -> list[tuple[str, int]]:
    """(name, partitions) of S1's topics: ``partitions`` in all."""
    topics = []
    for number, start in enumerate(range(0, partitions, S1_PARTITIONS_PER_TOPIC)):
        count = min(S1_PARTITIONS_PER_TOPIC, partitions - start)
        topics.append((f"{S1_TOPIC}-{number}", count))
    return topics


def run_s1(turn: Turn) -> None:
    """S1 on a fresh broker: stop and start again with many partitions (see the module)."""
    plan = turn.plan
    broker = turn.new_broker("-s1")
    tools = java_tools.JavaTools(turn.groups, broker.work_dir / "tools")
    try:
        broker.start()
        broker.wait_ready(tools)
        topics = s1_topics(plan.s1_partitions)
        for topic in topics:  # one request each: Kafka's limit is per request
            tools.create_topics(broker.bootstrap, [topic], S1_ADMIN_TIMEOUT_S, broker.process)
        tools.produce(
            broker.bootstrap,
            topics[0][0],
            records=plan.s1_records,
            warmup_records=0,
            record_size=100,
            producer_properties=("acks=1", "linger.ms=5"),
            timeout_s=plan.tool_timeout_s,
            broker=broker.process,
        )
        turn.record("S1-stop-10k", broker.stop_gracefully(S1_STOP_TIMEOUT_S), "s")
        broker.log_path = broker.work_dir / "broker-restart.log"
        started = time.monotonic()
        broker.start()
        broker.wait_ready(tools)
        turn.record("S1-start-10k", time.monotonic() - started, "s")
    except (brokers.BrokerFailed, process_groups.BrokerExited, java_tools.ToolFailed) as e:
        turn.errors.append(f"{turn.label} S1: {e}\n{broker.log_excerpt()}")
        progress(f"{turn.label} S1 FAILED: {str(e).splitlines()[0]}")
    finally:
        broker.stop()


def c2_figure_id(topics: int, partitions: int) -> str:
    """C2-100x10 for 100 topics of 10 partitions; C2-10k for one topic of 10,000."""
    if topics == 1 and partitions % 1000 == 0:
        return f"C2-{partitions // 1000}k"
    return f"C2-{topics}x{partitions}"


def run_c2(turn: Turn) -> None:
    """C2 on a fresh cluster: time topic creation until every partition has a leader, RF 1.

    First C2-100x10 (100 topics x 10 partitions in one createTopics request), then, on the
    same cluster, C2-10k (one topic of 10,000 partitions, created with
    ``c2_partitions_per_request`` and grown by createPartitions, Kafka's per-request limit).
    The cluster has been seen whole by an admin client before either clock starts.
    """
    plan = turn.plan
    cluster = turn.new_cluster()
    tools = java_tools.JavaTools(turn.groups, turn.cluster_dir() / "tools")
    try:
        cluster.start()
        cluster.wait_ready(tools)
        small = tools.create_topics_timing(
            cluster.bootstrap,
            C2_SMALL_TOPICS,
            topics=plan.c2_topics,
            partitions=plan.c2_topic_partitions,
            replication_factor=1,
            timeout_s=C2_TIMEOUT_S,
            broker=cluster.processes,
        )
        _record_c2(turn, c2_figure_id(plan.c2_topics, plan.c2_topic_partitions), small)
        if plan.c2_big_partitions:
            big = tools.create_topics_timing(
                cluster.bootstrap,
                C2_BIG_TOPIC,
                topics=1,
                partitions=plan.c2_big_partitions,
                replication_factor=1,
                timeout_s=C2_TIMEOUT_S,
                broker=cluster.processes,
                partitions_per_request=plan.c2_partitions_per_request,
            )
            _record_c2(turn, c2_figure_id(1, plan.c2_big_partitions), big)
    except (brokers.BrokerFailed, process_groups.BrokerExited, java_tools.ToolFailed) as e:
        turn.errors.append(f"{turn.label} C2: {e}\n{cluster.log_excerpt()}")
        progress(f"{turn.label} C2 FAILED: {str(e).splitlines()[0]}")
    finally:
        cluster.stop()


def _record_c2(turn: Turn, figure_id: str, result: java_tools.CreateTopicsResult) -> None:
    turn.record(figure_id, result.total_s, "s")
    progress(
        f"{turn.label} {figure_id}: {result.partitions:,} partitions on {result.brokers} "
        f"broker(s), {result.requests} request(s) {result.create_ms:,.0f} ms, then leaders "
        f"known after {result.leaders_ms:,.0f} ms ({result.describe_polls} describeTopics)"
    )


def _run_workloads(turn: Turn, broker: brokers.Broker, tools: java_tools.JavaTools) -> None:
    plan = turn.plan
    broker.start()
    broker.wait_ready(tools)
    time.sleep(plan.settle_s)  # a fixed idle window before reading memory, not a wait
    broker.check_alive()
    turn.record("M1-idle", memory.rss_mib(broker.pid), "MiB")
    topics = [
        (P1_1KIB_TOPIC, plan.p1_partitions),
        (P1_100B_TOPIC, plan.p1_partitions),
        (L1_TOPIC, 1),
    ]
    tools.create_topics(broker.bootstrap, topics, ADMIN_TIMEOUT_S, broker.process)

    def produce(figure: str, topic: str, records: int, size: int) -> Callable[[], None]:
        def run() -> None:
            result = tools.produce(
                broker.bootstrap,
                topic,
                records=records,
                warmup_records=plan.warmup_records(records),
                record_size=size,
                producer_properties=plan.producer_properties,
                timeout_s=plan.tool_timeout_s,
                broker=broker.process,
            )
            turn.record(figure, result.mb_per_s, "MB/s")
            turn.record(f"{figure}-records", result.records_per_s, "records/s")

        return run

    with memory.PeakRssSampler(broker.pid) as sampler:
        turn.attempt("P1-1KiB", produce("P1-1KiB", P1_1KIB_TOPIC, plan.p1_records_1kib, 1024))
        turn.attempt("P1-100B", produce("P1-100B", P1_100B_TOPIC, plan.p1_records_100b, 100))
    broker.check_alive()
    turn.record("M1-P1", sampler.peak_mib, "MiB")

    def consume() -> None:
        if "P1-1KiB" not in turn.values:
            raise java_tools.ToolFailed("skipped: P1-1KiB did not write C1's data")
        result = tools.consume(
            broker.bootstrap,
            P1_1KIB_TOPIC,
            records=plan.p1_records_1kib,
            timeout_s=plan.tool_timeout_s,
            broker=broker.process,
        )
        turn.record("C1", result.mb_per_s, "MB/s")
        turn.record("C1-records", result.records_per_s, "records/s")

    def latency() -> None:
        result = tools.fixed_rate_latency(
            broker.bootstrap,
            L1_TOPIC,
            rate=plan.l1_rate,
            duration_s=plan.l1_duration_s,
            warmup_s=plan.l1_warmup_s,
            record_size=plan.l1_record_size,
            acks=plan.l1_acks,
            broker=broker.process,
        )
        turn.record("L1-p50", result.p50_ms, "ms")
        turn.record("L1-p99", result.p99_ms, "ms")
        turn.record("L1-p99.9", result.p999_ms, "ms")

    def with_partitions() -> None:
        topics = [(M1_TOPIC, plan.m1_partitions)]
        tools.create_topics(broker.bootstrap, topics, ADMIN_TIMEOUT_S, broker.process)
        time.sleep(plan.settle_s)
        broker.check_alive()
        turn.record("M1-1000p", memory.rss_mib(broker.pid), "MiB")

    turn.attempt("C1", consume)
    turn.attempt("L1", latency)
    turn.attempt("M1-1000p", with_partitions)
