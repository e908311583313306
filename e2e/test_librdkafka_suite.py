"""librdkafka's own test suite (2.0.2, from Debian's source package) against Strom.

Each case is one `test-runner` process (the tests of one number: TESTS=0045 with -L, or -l
for the local ones; one per SUBTESTS entry where tests.txt lists some) with a deadline; the
cases run side by side (LIBRDKAFKA_SUITE_JOBS, default 4) against one Strom broker in
upstream's default scenario (auto-created topics with 4 partitions); the tests that create
topics with replication factor 3 (the transactional ones) against the same scenario on a
3-broker Strom cluster, as upstream runs it; and the "noautocreate" scenario's tests against
a 3-broker Strom cluster without auto-created topics. Which tests run, and why the others do
not: e2e/librdkafka/tests.txt. The runner is built once into a cache by
e2e/librdkafka/build.sh (`make librdkafka-tests`); e2e/README.md has the figures.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator

import librdkafka_suite
import pytest
import strom_process
from java_peers import JavaPeers
from librdkafka_suite import Case, Pool
from strom_cluster import StromCluster
from strom_process import StromProcess

PLAN = librdkafka_suite.load_plan()
CASES = librdkafka_suite.cases(PLAN)
JOBS = int(os.environ.get("LIBRDKAFKA_SUITE_JOBS", "4"))

# Upstream's default scenario (tests/scenarios/default.json, as trivup sets up a broker):
# auto-created topics with 4 partitions; everything else is the broker's default, as in
# trivup's server.properties (group.initial.rebalance.delay.ms stays Kafka's 3000).
DEFAULT_SCENARIO = {**strom_process.SHARED_BROKER_OVERRIDES, "num.partitions": "4"}
NOAUTOCREATE_SCENARIO = {**DEFAULT_SCENARIO, "auto.create.topics.enable": "false"}
# The tests of tests.txt's WHERE `cluster` and `noautocreate`, each on 3 brokers of its own.
CLUSTER_SCENARIOS = {"cluster": DEFAULT_SCENARIO, "noautocreate": NOAUTOCREATE_SCENARIO}


def _selected(session: pytest.Session) -> list[Case]:
    chosen = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and isinstance(callspec.params.get("case"), Case):
            chosen.append(callspec.params["case"])
    return chosen


def _java_peers() -> JavaPeers | None:
    try:
        return JavaPeers.install()
    except FileNotFoundError:
        return None


@pytest.fixture(scope="module")
def suite_pool(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pool]:
    selected = _selected(request.session)
    try:
        source = librdkafka_suite.build()
    except RuntimeError as error:
        pytest.fail(str(error))
    work = tmp_path_factory.mktemp("librdkafka")
    wheres = {case.where for case in selected}
    broker: StromProcess | None = None
    clusters: dict[str, StromCluster] = {}
    try:
        if "broker" in wheres:
            broker = StromProcess(tmp_path_factory.mktemp("strom"), overrides=DEFAULT_SCENARIO)
            broker.start()
        for where, overrides in CLUSTER_SCENARIOS.items():
            if where in wheres:
                clusters[where] = StromCluster(
                    tmp_path_factory.mktemp(where), 3, overrides=overrides
                )
                clusters[where].start()
    except BaseException:
        _stop(broker, clusters)
        raise
    bootstraps = {
        "broker": broker.bootstrap if broker else None,
        **{where: cluster.bootstrap for where, cluster in clusters.items()},
        "local": None,
    }
    runner = librdkafka_suite.Runner(source, work, bootstraps, _java_peers())
    started = time.monotonic()
    pool = Pool(runner, selected, JOBS)
    try:
        yield pool
    finally:
        pool.close()
        _report(request, pool, time.monotonic() - started)
        _stop(broker, clusters)


def _stop(broker: StromProcess | None, clusters: dict[str, StromCluster]) -> None:
    for cluster in clusters.values():
        cluster.stop()
    if broker is not None:
        broker.stop()


def _report(request: pytest.FixtureRequest, pool: Pool, seconds: float) -> None:
    """One line for `make test`'s log: how many of the planned tests passed, and the
    slowest runner processes (what to move out when the suite gets too long)."""
    outcomes = pool.finished()
    # A test counts once, and only if every runner process it was part of passed.
    verdicts: dict[str, bool] = {}
    for outcome in outcomes:
        for name in outcome.case.names:
            verdicts[name] = verdicts.get(name, True) and outcome.passed
    local_names = {n for o in outcomes if o.case.where == "local" for n in o.case.names}
    names = sum(verdicts.values())
    local = sum(ok for name, ok in verdicts.items() if name in local_names)
    total = len(verdicts)
    passed = [o for o in outcomes if o.passed]
    slowest = sorted(outcomes, key=lambda o: -o.seconds)[:8]
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            f"\nlibrdkafka suite: {names} of {total} tests passed ({names - local} against "
            f"Strom, {local} local) in {len(passed)} of {len(outcomes)} runner processes, "
            f"{seconds:.0f} s with {JOBS} at a time; slowest: "
            + ", ".join(f"{o.case.id} {o.seconds:.0f} s" for o in slowest)
        )


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_librdkafka(case: Case, suite_pool: Pool) -> None:
    outcome = suite_pool.outcome(case)
    tail = outcome.tail()
    assert outcome.passed, f"{outcome.verdict()}\n--- test-runner output (tail) ---\n{tail}"


def test_plan_lists_every_test_once() -> None:
    """tests.txt names each test of the runner's list once (the list is test.c's)."""
    source = librdkafka_suite.build()
    test_c = (source / "tests" / "test.c").read_text()
    table = test_c[test_c.index("struct test tests[] = {") :]
    table = table[: table.index("\n};")]
    in_runner = re.findall(r"_TEST\((\w+),", table)
    in_plan = [test.name for test in PLAN]
    assert sorted(in_plan) == sorted(set(in_plan)), "a test is listed twice"
    assert in_plan == in_runner
