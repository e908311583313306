"""P2 and F1: workloads on 3-node clusters with replication (RF 3, min.insync.replicas=2).

Both sides get the same cluster shape as C2's (`Turn.new_cluster`), with the plan's
`replication_settings` on every node: min.insync.replicas, broker.session.timeout.ms and
broker.heartbeat.interval.ms, alike on both.

- P2 (first ``p2_rounds`` rounds): a fresh cluster, a topic of ``p1_partitions`` partitions
  with RF 3, and Kafka's ProducerPerformance with acks=all, sized like P1-1KiB.
- F1 (first ``f1_rounds`` rounds): another fresh cluster, a 1-partition RF 3 topic and
  FailoverProbe writing to it; then ``f1_trials`` times: SIGKILL the partition's current
  leader, time until the first record sent after the kill is acknowledged (failover.py),
  restart the killed broker on its data and wait until the ISR is whole again.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

from strom_bench import brokers, failover, java_tools, process_groups
from strom_bench.workloads import ADMIN_TIMEOUT_S, Turn, progress

P2_TOPIC = "p2-rf3"
F1_TOPIC = "f1-rf3"
REPLICATION_FACTOR = 3
F1_FAILOVER_TIMEOUT_S = 60.0  # a kill not recovered from by then fails the trial
F1_REJOIN_TIMEOUT_S = 180.0  # restart, catch up, ISR whole again
F1_PROBE_START_TIMEOUT_S = 60.0
READ_INTERVAL_S = 0.1  # how often the probe's output is read (its times are its own)


class TrialFailed(RuntimeError):
    pass


def run_replicated(turn: Turn) -> None:
    """P2, then F1, in the rounds the plan runs them in."""
    if turn.round_no <= turn.plan.p2_rounds:
        run_p2(turn)
    if turn.round_no <= turn.plan.f1_rounds:
        run_f1(turn)


def run_p2(turn: Turn) -> None:
    plan = turn.plan
    cluster = turn.new_cluster("p2", plan.replication_settings())
    tools = java_tools.JavaTools(turn.groups, turn.cluster_dir("p2") / "tools")
    try:
        cluster.start()
        cluster.wait_ready(tools)
        tools.create_topics(
            cluster.bootstrap,
            [(P2_TOPIC, plan.p1_partitions)],
            ADMIN_TIMEOUT_S,
            cluster.processes,
            replication_factor=REPLICATION_FACTOR,
        )
        result = tools.produce(
            cluster.bootstrap,
            P2_TOPIC,
            records=plan.p2_records,
            warmup_records=plan.warmup_records(plan.p2_records),
            record_size=plan.p2_record_size,
            producer_properties=plan.p2_producer_properties,
            timeout_s=plan.tool_timeout_s,
            broker=cluster.processes,
        )
        turn.record("P2", result.mb_per_s, "MB/s")
        turn.record("P2-records", result.records_per_s, "records/s")
    except (brokers.BrokerFailed, process_groups.BrokerExited, java_tools.ToolFailed) as e:
        turn.errors.append(f"{turn.label} P2: {e}\n{cluster.log_excerpt()}")
        progress(f"{turn.label} P2 FAILED: {str(e).splitlines()[0]}")
    finally:
        cluster.stop()


def _wait_for(
    what: str,
    condition: Callable[[failover.ProbeLog], bool],
    reader: failover.ProbeReader,
    probe: subprocess.Popen[bytes],
    timeout_s: float,
) -> failover.ProbeLog:
    """Read the probe's output until `condition` holds; TrialFailed at the deadline or if
    the probe exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        log = reader.poll()
        if condition(log):
            return log
        if probe.poll() is not None:
            raise TrialFailed(f"FailoverProbe exited with {probe.returncode} waiting for {what}")
        if time.monotonic() >= deadline:
            raise TrialFailed(f"no {what} within {timeout_s:.0f}s (last state: {log.state})")
        time.sleep(READ_INTERVAL_S)


def _f1_trial(
    turn: Turn,
    node: Callable[[int], brokers.Broker],
    reader: failover.ProbeReader,
    probe: subprocess.Popen[bytes],
    trial: int,
) -> dict[str, float]:
    """Kill the current leader, time the failover, restart it and wait for a whole ISR: the
    trial's figures (F1, and F1-controller or F1-broker: whether the leader was also the
    active controller, whose failover comes first)."""
    state = reader.poll().state
    assert state is not None and state.leader >= 0  # the caller waited for a whole ISR
    leader = node(state.leader)
    kill_us = time.time_ns() // 1000
    leader.kill()
    log = _wait_for(
        "acknowledgement after the leader's kill",
        lambda log: log.acked_since(kill_us),
        reader,
        probe,
        F1_FAILOVER_TIMEOUT_S,
    )
    seconds = failover.failover_s(log.acks, kill_us)
    assert seconds is not None
    new_state = log.state
    role = "F1-controller" if state.leader == state.controller else "F1-broker"
    progress(
        f"{turn.label} F1 trial {trial}/{turn.plan.f1_trials}: killed leader {state.leader} "
        f"({'also' if role == 'F1-controller' else 'not'} the active controller), "
        f"next acknowledged send after {seconds:.3f} s (ack gap {log.ack_gap_s(kill_us):.3f} s, "
        f"new leader {new_state.leader if new_state else '?'}, {len(log.errors)} send errors)"
    )
    leader.log_path = leader.work_dir / f"broker-restart{trial}.log"
    restarted_us = time.time_ns() // 1000
    leader.start()
    _wait_for(
        f"whole ISR after restarting broker {state.leader}",
        lambda log: log.isr_full(REPLICATION_FACTOR) and log.states[-1].time_us > restarted_us,
        reader,
        probe,
        F1_REJOIN_TIMEOUT_S,
    )
    progress(
        f"{turn.label} F1 trial {trial}: broker {state.leader} back in the ISR after "
        f"{(time.time_ns() // 1000 - restarted_us) / failover.MICROS:.1f} s"
    )
    return {"F1": seconds, role: seconds}


def run_f1(turn: Turn) -> None:
    plan = turn.plan
    cluster = turn.new_cluster("f1", plan.replication_settings())
    tools = java_tools.JavaTools(turn.groups, turn.cluster_dir("f1") / "tools")
    probe = None
    try:
        cluster.start()
        cluster.wait_ready(tools)
        tools.create_topics(
            cluster.bootstrap,
            [(F1_TOPIC, 1)],
            ADMIN_TIMEOUT_S,
            cluster.processes,
            replication_factor=REPLICATION_FACTOR,
        )
        # long enough for every trial at their deadlines; killed once they are done
        max_duration_s = plan.f1_trials * (F1_FAILOVER_TIMEOUT_S + F1_REJOIN_TIMEOUT_S) + 120
        probe, output = tools.start_failover_probe(
            cluster.bootstrap,
            F1_TOPIC,
            send_interval_ms=plan.f1_send_interval_ms,
            record_size=plan.f1_record_size,
            max_duration_s=max_duration_s,
        )
        reader = failover.ProbeReader(output)
        started_us = time.time_ns() // 1000
        _wait_for(
            "the probe's first acknowledgement and a whole ISR",
            lambda log: log.acked_since(started_us)
            and log.isr_full(REPLICATION_FACTOR)
            and log.states[-1].controller >= 0,
            reader,
            probe,
            F1_PROBE_START_TIMEOUT_S,
        )
        for trial in range(1, plan.f1_trials + 1):
            turn.trials.append(_f1_trial(turn, cluster.node, reader, probe, trial))
    except (
        brokers.BrokerFailed,
        process_groups.BrokerExited,
        java_tools.ToolFailed,
        TrialFailed,
    ) as e:
        turn.errors.append(f"{turn.label} F1: {e}\n{cluster.log_excerpt()}")
        progress(f"{turn.label} F1 FAILED: {str(e).splitlines()[0]}")
    finally:
        if probe is not None:
            turn.groups.kill(probe)
        cluster.stop()
