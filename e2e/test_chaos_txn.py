"""Transactional chaos (issue 18, docs/transactions-design.md step 11): transactional
producers writing `in`, consume-transform-produce workers from `in` to `out`, and
read_committed readers of both, some transactions aborted on purpose
(chaos_txn_workload.py); then chaos_txn_checker.py's verdict: no lost write, no aborted
read, no torn transaction, no duplicate, the group's offsets agreeing with the output, a
monotonic LSO and no half-visible transaction of unknown outcome.

Against the Apache Kafka node (no faults: the workload and the checker agree with the
reference), and against a 3-broker Strom cluster under the replication chaos test's
nemesis. CHAOS_SEED replays a workload's choices (and the nemesis's schedule);
CHAOS_SECONDS sets the Strom run's length (60 s in `make test`, `make chaos-txn` runs it
long) and CHAOS_WORKERS the number of consume-transform-produce workers (2).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import netns
import pytest
from apache_kafka import ApacheKafka
from chaos_nemesis import HEALTHY_TIMEOUT_S, Nemesis, wait_healthy
from chaos_txn_checker import Verdict, check
from chaos_txn_workload import RETRY_FOR_S, TxnRun, TxnWorkload, TxnWorkloadConfig, create_topics
from chaos_workload import Clock
from strom_cluster import StromCluster

SECONDS = float(os.environ.get("CHAOS_SECONDS", "60"))
WORKERS = int(os.environ.get("CHAOS_WORKERS", "2"))
QUIET_S = 15.0  # no new fault this close to the producers' end
# the settling waits (decided, transformed, read) and client retries, on top of the run
SETTLE_BOUND_S = 5 * 60.0 + 6 * RETRY_FOR_S


def seed() -> int:
    given = os.environ.get("CHAOS_SEED", "")
    return int(given) if given else secrets.randbelow(2**32)


def report(name: str, chosen: int, run: TxnRun, verdict: Verdict) -> str:
    """What the run did and the verdict, printed (-s) and in a failure's message."""
    lines = [
        f"{name}: seed {chosen}, {run.seconds:.1f}s",
        verdict.summary(),
        f"client notes: {len(run.notes)}",
        *(f"  {line}" for line in run.notes[:20]),
        *(f"failure: {line}" for line in run.failures),
    ]
    return "\n".join(lines)


def assert_clean(name: str, chosen: int, run: TxnRun) -> None:
    verdict = check(run.history)
    text = report(name, chosen, run, verdict)
    print(text, flush=True)
    assert verdict.ok and not run.failures, text
    figures = verdict.figures
    # a run that committed nothing, aborted nothing or transformed nothing proves nothing
    assert figures["input committed"] > 0 and figures["input aborted"] > 0, text
    assert figures["transform committed"] > 0 and figures["final out"] > 0, text
    tailed = [r for read in run.history.reads if not read.final for r in read.records.values()]
    assert any(tailed), text


@pytest.mark.timeout(180)
def test_transactions_hold_on_apache_kafka(kafka: ApacheKafka) -> None:
    chosen = seed()
    config = TxnWorkloadConfig(seed=chosen, seconds=8.0, transactions_per_producer=24)
    create_topics(kafka.bootstrap, config, replicas=1)
    run = TxnWorkload(kafka.bootstrap, config, Clock()).run()
    assert_clean("Apache Kafka", chosen, run)


@pytest.fixture
def hosts() -> Iterator[netns.Hosts | None]:
    """The brokers' network namespaces, or None (no network cuts) without root."""
    if netns.unavailable_reason() is not None:
        yield None
        return
    with netns.Hosts(3) as made:
        yield made


@pytest.mark.slow
@pytest.mark.timeout(SECONDS + SETTLE_BOUND_S)
def test_transactions_hold_under_broker_faults(tmp_path: Path, hosts: netns.Hosts | None) -> None:
    workers = WORKERS
    chosen = seed()
    config = TxnWorkloadConfig(
        seed=chosen,
        seconds=SECONDS,
        workers=workers,
        transactions_per_producer=int(SECONDS * 4),
        partitions=6,
    )
    print(f"\ntransactional chaos seed {chosen}, {SECONDS:.0f} s, {workers} worker(s)")
    placement: dict[str, object] = {}
    if hosts is not None:
        placement = {"hosts": [str(h.address) for h in hosts], "wraps": [h.prefix for h in hosts]}
    cluster = StromCluster(
        tmp_path,
        overrides={
            "broker.session.timeout.ms": "4000",
            "broker.heartbeat.interval.ms": "1000",
            # the coordinator's log as replicated as the data: a commit survives one broker
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
        },
        **placement,  # type: ignore[arg-type]
    )
    clock = Clock()
    nemesis = Nemesis(cluster, hosts, config.in_topic, config.partitions, clock, chosen)
    nemesis.stop_at = max(0.0, SECONDS - QUIET_S)

    def end_faults() -> None:
        """Before the settling phase: the nemesis heals everything, then a healthy cluster."""
        nemesis.stop()
        nemesis.join(2 * HEALTHY_TIMEOUT_S)
        assert not nemesis.is_alive(), "the nemesis did not heal within its deadline"
        if nemesis.error is not None:
            raise nemesis.error
        wait_healthy(cluster, config.in_topic, config.partitions, "after the faults")

    with cluster.started():
        create_topics(cluster.bootstrap, config, 3, {"min.insync.replicas": "2"})
        wait_healthy(cluster, config.in_topic, config.partitions, "before the run")
        workload = TxnWorkload(cluster.bootstrap, config, clock)
        clock.reset()  # time 0: the clients and the nemesis start
        nemesis.start()
        try:
            run = workload.run(before_settling=end_faults)
        finally:
            nemesis.stop()
            nemesis.join(2 * HEALTHY_TIMEOUT_S)
    for fault in nemesis.faults:
        print(f"  {fault}")
    assert_clean(f"Strom, {len(nemesis.faults)} faults", chosen, run)
