"""`make bench-profile`: P1 against Strom with py-spy attached, saved as a flame graph SVG;
`make bench-profile-p2`: P2 against a 3-node Strom cluster, py-spy on two of its nodes.

py-spy samples the broker's Python stacks from outside the process (ptrace), so the broker
runs exactly as in the benchmark; the SVG shows where its time goes on the produce path.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from strom_bench import brokers, clusters, java_tools, process_groups, replicated, workloads
from strom_bench.plan import Plan

SAMPLING_RATE_HZ = 100
PY_SPY_START_TIMEOUT_S = 20.0
PY_SPY_WRITE_TIMEOUT_S = 120.0


class ProfileFailed(RuntimeError):
    pass


def py_spy_command() -> str:
    candidate = Path(sys.executable).parent / "py-spy"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("py-spy")
    if found:
        return found
    raise ProfileFailed("py-spy is not installed: pip install -r bench/requirements.lock")


def _wait_until_sampling(log: Path, spy: subprocess.Popen[bytes]) -> None:
    """py-spy prints "Sampling process ..." once attached; wait for that, with a deadline."""
    deadline = time.monotonic() + PY_SPY_START_TIMEOUT_S
    while "Sampling process" not in log.read_text("utf-8", "replace"):
        if spy.poll() is not None:
            raise ProfileFailed(f"py-spy exited:\n{process_groups.log_tail(log)}")
        if time.monotonic() >= deadline:
            raise ProfileFailed(f"py-spy did not start sampling:\n{process_groups.log_tail(log)}")
        time.sleep(process_groups.POLL_INTERVAL_S)


def _start_py_spy(
    groups: process_groups.ProcessGroups, pid: int, svg_path: Path, log: Path
) -> subprocess.Popen[bytes]:
    """py-spy recording process `pid` into a flame graph, once it samples."""
    svg_path.parent.mkdir(parents=True, exist_ok=True)
    spy = groups.spawn(
        [
            py_spy_command(), "record",
            "--pid", str(pid),
            "--rate", str(SAMPLING_RATE_HZ),
            "--format", "flamegraph",
            "--output", str(svg_path),
        ],
        stdout=log,
    )  # fmt: skip
    _wait_until_sampling(log, spy)
    return spy


def _stop_py_spy(
    groups: process_groups.ProcessGroups, spy: subprocess.Popen[bytes], svg_path: Path, log: Path
) -> None:
    spy.send_signal(signal.SIGINT)  # py-spy writes the flame graph on Ctrl-C
    rc = groups.wait(spy, PY_SPY_WRITE_TIMEOUT_S)
    if rc is None or not svg_path.exists():
        raise ProfileFailed(f"py-spy wrote no flame graph:\n{process_groups.log_tail(log)}")


def profile_p1(
    groups: process_groups.ProcessGroups, plan: Plan, run_dir: Path, svg_path: Path
) -> dict[str, float]:
    """Run P1 (1 KiB, then 100 B) against Strom under py-spy; return the P1 figures."""
    broker = brokers.StromBroker(groups, run_dir / "profile-strom", plan.segment_bytes)
    tools = java_tools.JavaTools(groups, broker.work_dir / "tools")
    figures: dict[str, float] = {}
    try:
        broker.start()
        broker.wait_ready(tools)
        topics = [(workloads.P1_1KIB_TOPIC, plan.p1_partitions)]
        topics.append((workloads.P1_100B_TOPIC, plan.p1_partitions))
        tools.create_topics(broker.bootstrap, topics, workloads.ADMIN_TIMEOUT_S, broker.process)
        svg_path.parent.mkdir(parents=True, exist_ok=True)
        spy = _start_py_spy(groups, broker.pid, svg_path, broker.work_dir / "py-spy.log")
        for figure, topic, records, size in (
            ("P1-1KiB", workloads.P1_1KIB_TOPIC, plan.p1_records_1kib, 1024),
            ("P1-100B", workloads.P1_100B_TOPIC, plan.p1_records_100b, 100),
        ):
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
            figures[figure] = result.mb_per_s
            figures[f"{figure}-records"] = result.records_per_s
            workloads.progress(
                f"[profile] {figure}: {result.mb_per_s:,.1f} MB/s, "
                f"{result.records_per_s:,.0f} records/s (under py-spy)"
            )
        _stop_py_spy(groups, spy, svg_path, broker.work_dir / "py-spy.log")
    finally:
        broker.stop()
    return figures


def profile_p2(
    groups: process_groups.ProcessGroups, plan: Plan, run_dir: Path, svg_prefix: Path
) -> dict[str, float]:
    """Run P2 against a 3-node Strom cluster with py-spy on nodes 1 and 2: one flame graph
    each, `<svg_prefix>-node1.svg` and `-node2.svg`. Every node leads some of the topic's
    partitions and follows the others (the controller spreads the leaders), so each graph
    shows a leader's produce path and a follower's fetch path side by side."""
    cluster = clusters.STROM_CLUSTER(
        groups, run_dir / "profile-p2", plan.segment_bytes, plan.replication_settings()
    )
    tools = java_tools.JavaTools(groups, run_dir / "profile-p2" / "tools")
    profiled = (1, 2)
    svgs = {n: svg_prefix.with_name(f"{svg_prefix.name}-node{n}.svg") for n in profiled}
    logs = {n: run_dir / "profile-p2" / f"py-spy-node{n}.log" for n in profiled}
    try:
        cluster.start()
        cluster.wait_ready(tools)
        tools.create_topics(
            cluster.bootstrap,
            [(replicated.P2_TOPIC, plan.p1_partitions)],
            workloads.ADMIN_TIMEOUT_S,
            cluster.processes,
            replication_factor=replicated.REPLICATION_FACTOR,
        )
        spies = {n: _start_py_spy(groups, cluster.node(n).pid, svgs[n], logs[n]) for n in profiled}
        result = tools.produce(
            cluster.bootstrap,
            replicated.P2_TOPIC,
            records=plan.p2_records,
            warmup_records=plan.warmup_records(plan.p2_records),
            record_size=plan.p2_record_size,
            producer_properties=plan.p2_producer_properties,
            timeout_s=plan.tool_timeout_s,
            broker=cluster.processes,
        )
        workloads.progress(
            f"[profile] P2: {result.mb_per_s:,.1f} MB/s, {result.records_per_s:,.0f} "
            "records/s (under py-spy, two nodes sampled)"
        )
        for n, spy in spies.items():
            _stop_py_spy(groups, spy, svgs[n], logs[n])
    finally:
        cluster.stop()
    return {"P2": result.mb_per_s, "P2-records": result.records_per_s}
