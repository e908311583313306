"""The command line: `python -m strom_bench quick|full|profile` (bench/ on PYTHONPATH).

quick and full run every workload on Strom and on Apache Kafka, alternating (A B A B), and
write bench/results/<timestamp>.{json,md,png} (SP1, the clickstream Spark pipeline, and
TX1, the transactional producer, in full runs and with --only-sp1 / --only-tx1); profile
runs P1 against Strom under py-spy and writes bench/results/<timestamp>-profile-p1.svg
(`--workload p2`: P2 on a 3-node Strom cluster, <timestamp>-profile-p2-node{1,2}.svg).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import shutil
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from strom_bench import (
    brokers,
    clusters,
    figures,
    java_tools,
    machine,
    process_groups,
    profiling,
    replicated,
    report,
    spark_pipeline,
    transactional,
    workloads,
)
from strom_bench.plan import PLANS, Plan

BENCH_DIR = Path(__file__).resolve().parent.parent
FSYNC_POLICY = (
    "no fsync per message on either broker: log.flush.interval.messages/ms left at Kafka's "
    "defaults (never); both leave writes in the page cache, as Kafka does by default"
)


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the `with` that kills every child


def settings_document(plan: Plan, run_dir: Path) -> dict[str, Any]:
    if run_dir.is_relative_to(BENCH_DIR.parent):
        run_dir = run_dir.relative_to(BENCH_DIR.parent)  # as seen from the repository root
    example_dir = run_dir / "<broker>" / "data"
    return {
        **plan.as_settings(),
        "order": "A B A B: every round runs Strom's turn, then Kafka's, each on fresh brokers",
        "kafka_version": java_tools.kafka_version(),
        "fsync": FSYNC_POLICY,
        "log_dirs": f"fresh directories under {run_dir} (same disk for both)",
        "kafka_mode": "KRaft combined mode (broker+controller), single node, from its jars",
        "kafka_jvm_options": list(brokers.KAFKA_JVM_OPTIONS),
        "kafka_server_properties": brokers.kafka_server_properties(
            0, 0, example_dir, plan.segment_bytes
        ),
        "strom_overrides": brokers.strom_overrides(0, 0, example_dir, plan.segment_bytes),
        "tool_jvm_options": list(java_tools.TOOL_JVM_OPTIONS),
        "tools": {
            "P1": f"{java_tools.PRODUCER_PERFORMANCE} --warmup-records "
            f"{plan.p1_warmup_fraction:.0%} of the records (steady-state line reported)",
            "C1": "AssignConsumerPerf (bench/peer): ConsumerPerformance's counting, assign() "
            "instead of a group",
            "L1": "FixedRateLatency (bench/peer): open-loop producer at a fixed rate, "
            "consumer in the same JVM, latency from each record's scheduled send time",
            "M1": "VmRSS of the broker process (the JVM; the Python process)",
            "C2": "CreateTopicsTiming (bench/peer): createTopics (and createPartitions past "
            f"{plan.c2_partitions_per_request:,} partitions per request), then describeTopics "
            "until every partition has a leader; timed from the first request",
            "P2": f"{java_tools.PRODUCER_PERFORMANCE} as P1, {plan.p2_producer_properties}, "
            f"topic of {plan.p1_partitions} partitions, RF {replicated.REPLICATION_FACTOR}",
            "F1": "FailoverProbe (bench/peer): idempotent acks=all producer, one "
            f"{plan.f1_record_size} B record every {plan.f1_send_interval_ms} ms to a 1-partition "
            f"RF {replicated.REPLICATION_FACTOR} topic, client defaults otherwise; F1 = from the "
            "leader's SIGKILL to the ack of the first record sent after it",
            "SP1": f"strom-spark-submit --master {spark_pipeline.SPARK_MASTER} "
            "spark-on-k8s/jobs/clickstream.py --trigger available-now "
            f"--max-offsets-per-trigger {plan.sp1_max_offsets_per_trigger:,} over "
            f"{plan.sp1_records:,} page views (seed {spark_pipeline.SEED}) in "
            f"{plan.sp1_partitions} partitions, produced first (confluent-kafka, acks=all); "
            "rows over summed triggerExecution of the topic query's micro-batches, the first "
            "(warm-up) and a short tail left out",
            "TX1": f"TxnProducerPerf (bench/peer): one transactional producer "
            f"({', '.join(plan.tx1_producer_properties)}), {plan.tx1_transactions:,} "
            f"transactions of {plan.tx1_records_per_transaction} x {plan.tx1_record_size} B "
            f"records (record i to partition i % {plan.p1_partitions}), each committed before "
            f"the next begins, the first {plan.tx1_warmup_transactions:,} untimed; then one "
            "aborted transaction and a read_committed count that must equal the committed "
            "records",
        },
        "sp1_spark_conf": dict(spark_pipeline.SPARK_CONF),
        "p2_f1_cluster_settings": plan.replication_settings(),
        "c2_kafka_cluster": f"{clusters.KAFKA_CLUSTER_BROKERS}-node KRaft, combined mode, "
        "static quorum (controller.quorum.voters), one node per JVM",
        "c2_kafka_jvm_options": list(brokers.KAFKA_CLUSTER_JVM_OPTIONS),
        "c2_strom_cluster": clusters.STROM_CLUSTER.__name__,
        # node 1's settings on top of strom_overrides (ports: free ones, chosen per cluster)
        "c2_strom_node_overrides": brokers.strom_cluster_overrides(
            0, 0, node_id=1, voters="1@127.0.0.1:C1,2@...,3@...", cluster_id="<new per cluster>"
        ),
        "units": "MB = 2^20 bytes, as Kafka's tools count; MiB of resident memory",
    }


def run_comparison(
    plan: Plan,
    results_dir: Path,
    keep_run_dir: bool,
    only_c2: bool = False,
    only_p2f1: bool = False,
    only_sp1: bool = False,
    only_tx1: bool = False,
) -> int:
    """Every round runs Strom's turn, then Kafka's; `only_c2` runs C2 alone in each of the
    plan's first c2_rounds rounds, `only_p2f1` P2 and F1 alone in theirs, `only_sp1` SP1
    alone in its, `only_tx1` TX1 alone in its (the other figures are then not measured)."""
    started = time.monotonic()
    timestamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    run_dir = BENCH_DIR / "run" / timestamp
    run_dir.mkdir(parents=True)
    machine_info = machine.describe(run_dir, java_tools.java_version())
    rounds: dict[str, list[dict[str, float]]] = {side: [] for side in brokers.SIDES}
    errors: list[str] = []
    with process_groups.ProcessGroups() as groups:
        template: Path | None = None
        if not (only_c2 or only_p2f1):
            template = run_dir / "kafka-formatted"
            brokers.format_kafka_storage(groups, template, plan.segment_bytes)
        cluster_templates: tuple[Path, ...] = ()
        single_broker_only = only_sp1 or only_tx1
        if not single_broker_only and (plan.c2_rounds or plan.p2_rounds or plan.f1_rounds):
            # the nodes of C2's, P2's and F1's clusters: formatted side by side, one cluster id
            cluster_templates = tuple(clusters.kafka_cluster_templates(run_dir / "kafka-cluster"))
            brokers.format_kafka_storages(groups, cluster_templates, plan.segment_bytes)
        for round_no in range(1, plan.rounds + 1):
            for kind in brokers.SIDES:
                turn = workloads.Turn(
                    kind, round_no, plan, groups, run_dir, template, cluster_templates
                )
                if only_c2:
                    workloads.run_c2(turn)
                elif only_p2f1:
                    replicated.run_replicated(turn)
                elif only_sp1:
                    spark_pipeline.run_sp1(turn)
                elif only_tx1:
                    transactional.run_tx1(turn)
                else:
                    workloads.run_turn(turn)
                    replicated.run_replicated(turn)
                    spark_pipeline.run_sp1(turn)
                    transactional.run_tx1(turn)
                rounds[kind].append(turn.values)
                rounds[kind] += turn.trials
                errors += turn.errors
    machine_info["load_average_end"] = machine.load_average()
    results = figures.build_figures(rounds)
    document = report.json_document(
        timestamp=timestamp,
        mode=plan.mode,
        figures=results,
        machine=machine_info,
        settings=settings_document(plan, run_dir),
        errors=errors,
        duration_s=time.monotonic() - started,
    )
    json_path, markdown_path = report.write_reports(results_dir, timestamp, document, results)
    title = f"Strom vs Apache Kafka {java_tools.kafka_version()}, {plan.mode} run {timestamp}"
    # matplotlib comes with the bench's own requirements: imported only to draw
    from strom_bench import plotting

    png_path = plotting.write_plot(results_dir / f"{timestamp}.png", results, title)
    print(report.markdown_document(document, results))
    print(f"Wrote {json_path}, {markdown_path} and {png_path}")
    if errors:
        print(f"{len(errors)} workload(s) failed; logs kept in {run_dir}", file=sys.stderr)
        for error in errors:
            print(error, file=sys.stderr)
        return 1
    if not keep_run_dir:
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


def run_profile(plan: Plan, results_dir: Path, workload: str = "p1") -> int:
    timestamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    run_dir = BENCH_DIR / "run" / timestamp
    if workload == "p2":
        prefix = results_dir / f"{timestamp}-profile-p2"
        with process_groups.ProcessGroups() as groups:
            profiling.profile_p2(groups, plan, run_dir, prefix)
        shutil.rmtree(run_dir, ignore_errors=True)
        print(f"Flame graphs of two Strom nodes under P2: {prefix}-node1.svg, {prefix}-node2.svg")
        return 0
    svg_path = results_dir / f"{timestamp}-profile-p1.svg"
    with process_groups.ProcessGroups() as groups:
        profiling.profile_p1(groups, plan, run_dir, svg_path)
    shutil.rmtree(run_dir, ignore_errors=True)
    print(f"Flame graph of Strom under P1: {svg_path}")
    return 0


def plan_for(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Plan:
    """The mode's plan as the options change it (parser.error on a contradiction)."""
    plan = PLANS[args.mode]
    only = [
        name for name in ("only_c2", "only_p2f1", "only_sp1", "only_tx1") if getattr(args, name)
    ]
    if len(only) > 1:
        parser.error(
            " and ".join("--" + name.replace("_", "-") for name in only) + " exclude each other"
        )
    if args.only_sp1:
        if plan.mode == "profile":
            parser.error("profile runs no SP1")
        plan = dataclasses.replace(plan, sp1_rounds=max(plan.sp1_rounds, 1))
        plan = dataclasses.replace(plan, rounds=plan.sp1_rounds)
    if args.only_tx1:
        if plan.mode == "profile":
            parser.error("profile runs no TX1")
        plan = dataclasses.replace(plan, tx1_rounds=max(plan.tx1_rounds, 1))
        plan = dataclasses.replace(plan, rounds=plan.tx1_rounds)
    if args.only_p2f1:
        if plan.mode == "profile":
            parser.error("profile runs no F1")
        p2_rounds, f1_rounds = max(plan.p2_rounds, 1), max(plan.f1_rounds, 1)
        plan = dataclasses.replace(
            plan, p2_rounds=p2_rounds, f1_rounds=f1_rounds, rounds=max(p2_rounds, f1_rounds)
        )
    if args.broker_session_timeout_ms is not None:
        plan = dataclasses.replace(plan, broker_session_timeout_ms=args.broker_session_timeout_ms)
    if args.broker_heartbeat_interval_ms is not None:
        plan = dataclasses.replace(
            plan, broker_heartbeat_interval_ms=args.broker_heartbeat_interval_ms
        )
    if args.only_c2:
        if not plan.c2_rounds:
            parser.error(f"{plan.mode} runs no C2")
        plan = dataclasses.replace(plan, rounds=plan.c2_rounds)
    if args.rounds is not None:
        if args.rounds < 1:
            parser.error("--rounds must be at least 1")
        plan = dataclasses.replace(plan, rounds=args.rounds)
    if args.only_c2:  # C2 in every round
        plan = dataclasses.replace(plan, c2_rounds=plan.rounds)
    if args.only_sp1:  # SP1 in every round
        plan = dataclasses.replace(plan, sp1_rounds=plan.rounds)
    if args.only_tx1:  # TX1 in every round
        plan = dataclasses.replace(plan, tx1_rounds=plan.rounds)
    return plan


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m strom_bench", description="Strom's benchmarks beside Apache Kafka."
    )
    parser.add_argument("mode", choices=sorted(PLANS), help="quick (<3 min), full, or profile")
    parser.add_argument("--rounds", type=int, help="runs per side (default: the mode's; >= 3)")
    parser.add_argument(
        "--results-dir", type=Path, default=BENCH_DIR / "results", help="where reports go"
    )
    parser.add_argument(
        "--keep-run-dir", action="store_true", help="keep broker and tool logs (bench/run/)"
    )
    parser.add_argument(
        "--only-c2",
        action="store_true",
        help="run C2 alone (topic creation on 3-node clusters), in the mode's C2 rounds",
    )
    parser.add_argument(
        "--only-p2f1",
        action="store_true",
        help="run P2 and F1 alone (replication on 3-node clusters), in the mode's rounds of "
        "them (at least once: quick runs them only so)",
    )
    parser.add_argument(
        "--only-sp1",
        action="store_true",
        help="run SP1 alone (the clickstream Spark pipeline reading from each broker), in the "
        "mode's SP1 rounds (at least once: quick runs it only so)",
    )
    parser.add_argument(
        "--only-tx1",
        action="store_true",
        help="run TX1 alone (a transactional producer on one broker per side), in the mode's "
        "TX1 rounds (full: 3, quick: 1)",
    )
    parser.add_argument(
        "--workload",
        choices=("p1", "p2"),
        default="p1",
        help="profile: P1 on one broker (default) or P2 on a 3-node cluster",
    )
    parser.add_argument(
        "--broker-session-timeout-ms",
        type=int,
        help="broker.session.timeout.ms of P2's and F1's clusters, both sides (default: plan's)",
    )
    parser.add_argument(
        "--broker-heartbeat-interval-ms",
        type=int,
        help="broker.heartbeat.interval.ms of P2's and F1's clusters, both sides",
    )
    return parser


def main(argv: list[str]) -> int:
    parser = argument_parser()
    args = parser.parse_args(argv)
    plan = plan_for(args, parser)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    java_tools.install_peer()
    try:
        if plan.mode == "profile":
            return run_profile(plan, args.results_dir, args.workload)
        return run_comparison(
            plan,
            args.results_dir,
            args.keep_run_dir,
            args.only_c2,
            args.only_p2f1,
            args.only_sp1,
            args.only_tx1,
        )
    except (brokers.BrokerFailed, java_tools.ToolFailed, profiling.ProfileFailed) as e:
        print(f"benchmark failed: {e}", file=sys.stderr)
        return 1
