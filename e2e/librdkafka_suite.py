"""librdkafka's own test suite (its tests/ `test-runner`) against Strom: the plan, the build,
one runner process per case, and a pool that runs the cases side by side.

`librdkafka/tests.txt` lists every test of librdkafka 2.0.2 with `run` or `skip REASON`.
The runner picks tests by number (TESTS=0045) and by -L/-l (broker or local), so a *case*
is the tests of one number and one WHERE, run by one `test-runner` process with a deadline.
`librdkafka/build.sh` builds the runner once into a cache folder.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import secrets
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from java_peers import LOG4J_OPTION, PEERS_DIR, JavaPeers

HERE = Path(__file__).resolve().parent / "librdkafka"
PLAN_PATH = HERE / "tests.txt"
BUILD_SCRIPT = HERE / "build.sh"

# The broker version the runner assumes (TEST_KAFKA_VERSION): Strom serves Kafka 4's
# protocol versions. Tests gate sub-tests on it (>= 0.9 to 2.5 for the APIs they use; from
# 3.0 on, kafka-topics.sh gets --bootstrap-server instead of --zookeeper).
KAFKA_VERSION = "4.0.0"
DEFAULT_TIMEOUT_S = 180.0
WHERES = ("broker", "cluster", "noautocreate", "local")
OUTPUT_TAIL_LINES = 80

_HEARTBEAT = re.compile(r"^\[<MAIN>\s+/\s*[\d.]+s\] \d+ test\(s\) running")
_ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\(B")
# A row of the runner's summary table: "| 0001_multiobj    |     PASSED |   0.119s | ..."
_SUMMARY_ROW = re.compile(r"^\|\s*(\d{4}_\S+)\s*\|\s*([A-Z]+)\s*\|\s*[\d.]+s\s*\|?\s*(.*)$")


@dataclass(frozen=True)
class PlannedTest:
    name: str
    where: str
    run: bool
    reason: str = ""
    options: tuple[str, ...] = ()

    @property
    def number(self) -> str:
        return self.name.split("_", 1)[0]


@dataclass(frozen=True)
class Case:
    """The tests of one number and WHERE: one test-runner process."""

    number: str
    where: str
    names: tuple[str, ...]
    quick: bool = False
    subtests: str | None = None  # the runner's SUBTESTS: only the sub-tests named so
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def id(self) -> str:
        parts = [self.number]
        if self.where != "broker":
            parts.append(self.where)
        if self.subtests:
            parts.append(self.subtests)
        return "-".join(parts)


def load_plan(path: Path = PLAN_PATH) -> list[PlannedTest]:
    planned = []
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) < 3 or words[1] not in WHERES or words[2] not in ("run", "skip"):
            raise ValueError(f"{path}:{lineno}: expected NAME WHERE run|skip ...: {raw!r}")
        name, where, verdict, rest = words[0], words[1], words[2], words[3:]
        if verdict == "run":
            planned.append(PlannedTest(name, where, run=True, options=tuple(rest)))
        elif rest:
            planned.append(PlannedTest(name, where, run=False, reason=" ".join(rest)))
        else:
            raise ValueError(f"{path}:{lineno}: a skipped test needs a reason: {raw!r}")
    return planned


def cases(planned: Iterable[PlannedTest]) -> list[Case]:
    """Group the tests to run into runner processes; a group must agree on its options.
    A test left out beside run ones of its number must be kept out by their `subtests=`
    (its sub-tests then skip themselves, and it is not counted)."""
    groups: dict[tuple[str, str], list[PlannedTest]] = {}
    left_out: set[tuple[str, str]] = set()
    for test in planned:
        key = (test.number, test.where)
        if test.run:
            groups.setdefault(key, []).append(test)
        else:
            left_out.add(key)
    for key in left_out & groups.keys():
        if not all(any(o.startswith("subtests=") for o in t.options) for t in groups[key]):
            raise ValueError(f"tests {key[0]} ({key[1]}) are run and left out without subtests=")
    made = []
    for (number, where), tests in groups.items():
        options = {t.options for t in tests}
        if len(options) > 1:
            raise ValueError(f"tests {number} ({where}) disagree on their options: {options}")
        values = dict(o.partition("=")[::2] for o in tests[0].options)
        # `subtests=A,B`: one runner process per entry, run side by side like other cases.
        selections: list[str | None] = [None]
        if values.get("subtests"):
            selections = list(values["subtests"].split(","))
        for subtests in selections:
            made.append(
                Case(
                    number,
                    where,
                    tuple(t.name for t in tests),
                    quick="quick" in values,
                    subtests=subtests or None,
                    timeout_s=float(values.get("timeout") or DEFAULT_TIMEOUT_S),
                )
            )
    return made


def build(timeout: float = 1800.0) -> Path:
    """The librdkafka source folder with tests/test-runner built (build.sh, cached)."""
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT} failed:\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def write_kafka_path(folder: Path, peers: JavaPeers | None) -> Path:
    """A KAFKA_PATH as the runner uses one: bin/kafka-topics.sh is Kafka's own TopicCommand
    (test_kafka_topics(): 0045 deletes a topic with it); bin/kafka-run-class.sh runs a class
    with $CLASSPATH before Kafka's jars and libs/ holds kafka-clients (test_run_java(): 0098
    compiles upstream's java/TransactionProducerCli.java against it and runs it). Without
    Java the scripts say so and fail."""
    topics = folder / "bin" / "kafka-topics.sh"
    run_class = folder / "bin" / "kafka-run-class.sh"
    libs = folder / "libs"
    topics.parent.mkdir(parents=True, exist_ok=True)
    libs.mkdir(exist_ok=True)
    if peers is not None:
        topic_command = shlex.join(peers.argv("org.apache.kafka.tools.TopicCommand"))
        jvm = shlex.join([peers.java, "-XX:TieredStopAtLevel=1", LOG4J_OPTION])
        topics_body = f'exec {topic_command} "$@"\n'
        run_class_body = (
            f'exec {jvm} -cp "${{CLASSPATH:+$CLASSPATH:}}"{shlex.quote(peers.classpath)} "$@"\n'
        )
        for jar in sorted((PEERS_DIR / "lib").glob("kafka-clients-*.jar")):
            link = libs / jar.name
            if not link.exists():
                link.symlink_to(jar)
    else:
        topics_body = run_class_body = 'echo "$0: no Java (run e2e/peers/install.sh)" >&2\nexit 1\n'
    for script, body in ((topics, topics_body), (run_class, run_class_body)):
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
    return folder


@dataclass
class Outcome:
    case: Case
    returncode: int | None  # None: killed at the deadline
    seconds: float
    output: str
    statuses: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (status, why)

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and all(
            self.statuses.get(name, ("MISSING", ""))[0] == "PASSED" for name in self.case.names
        )

    def verdict(self) -> str:
        if self.returncode is None:
            return f"killed after {self.seconds:.0f} s (timeout {self.case.timeout_s:.0f} s)"
        rows = [
            f"{name}: {status} {why}".rstrip()
            for name in self.case.names
            for status, why in [self.statuses.get(name, ("MISSING", "not in the summary"))]
        ]
        return f"exit {self.returncode} after {self.seconds:.1f} s; " + "; ".join(rows)

    def tail(self, lines: int = OUTPUT_TAIL_LINES) -> str:
        """The end of the output without the runner's once-a-second "N test(s) running"."""
        kept = [line for line in self.output.splitlines() if not _HEARTBEAT.search(line)]
        return "\n".join(kept[-lines:])


def parse_summary(output: str) -> dict[str, tuple[str, str]]:
    statuses = {}
    for line in output.splitlines():
        found = _SUMMARY_ROW.match(line.strip())
        if found:
            statuses[found.group(1)] = (found.group(2), found.group(3).strip(" |"))
    return statuses


class Runner:
    """Runs cases as test-runner processes against the brokers of `bootstraps` (by WHERE;
    None for the local tests), with the test.conf files it writes to `work`."""

    def __init__(
        self,
        source: Path,
        work: Path,
        bootstraps: Mapping[str, str | None],
        peers: JavaPeers | None,
    ) -> None:
        self.tests_dir = source / "tests"
        self.bootstraps = dict(bootstraps)
        self.conf_paths = {where: work / f"{where}.conf" for where in self.bootstraps}
        for where, path in self.conf_paths.items():
            # enable.random.seed=false: else librdkafka's first rd_kafka_new() reseeds rand()
            # with the milliseconds of the current second, and the TEST_SEED below is lost:
            # runner processes started together then made the same "random" group names
            # (0113's j_ and k_ were seen in one group, each waiting on the other's member).
            lines = ["broker.address.family=v4", "enable.random.seed=false"]
            if self.bootstraps[where]:
                lines.append(f"bootstrap.servers={self.bootstraps[where]}")
            path.write_text("\n".join(lines) + "\n")
        self.kafka_path = write_kafka_path(work / "kafka", peers)
        self.libs = f"{source / 'src'}:{source / 'src-cpp'}"
        self._running: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._stopping = False

    def argv(self, case: Case) -> list[str]:
        argv = [str(self.tests_dir / "test-runner"), "-l" if case.where == "local" else "-L"]
        if case.quick:
            argv.append("-Q")
        return argv

    def env(self, case: Case) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            TESTS=case.number,
            TEST_KAFKA_VERSION=KAFKA_VERSION,
            RDKAFKA_TEST_CONF=str(self.conf_paths[case.where]),
            LD_LIBRARY_PATH=self.libs,
            TEST_SCENARIO="noautocreate" if case.where == "noautocreate" else "default",
            KAFKA_PATH=str(self.kafka_path),
            BROKERS=self.bootstraps[case.where] or "",
        )
        # A seed of its own for each runner process: the seed makes the tests' "random"
        # topic and group names, and two runners started together (0113's b_ and c_
        # sub-tests, 4 at a time) were seen sharing them, each consumer group then taking
        # the other's partitions and both timing out. (It holds with enable.random.seed=false
        # in test.conf, above.)
        env["TEST_SEED"] = str(secrets.randbelow(2**31 - 2) + 1)
        env.pop("CI", None)  # CI=... makes some tests skip themselves
        env.pop("SUBTESTS", None)
        if case.subtests:
            env["SUBTESTS"] = case.subtests
        return env

    def run(self, case: Case) -> Outcome:
        started = time.monotonic()
        if self._stopping:
            return Outcome(case, None, 0.0, "not started: the suite was stopped")
        proc = subprocess.Popen(
            self.argv(case),
            cwd=self.tests_dir,  # 0066 loads its plugin from ./interceptor_test/
            env=self.env(case),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        with self._lock:
            self._running.add(proc)
        try:
            out, _ = proc.communicate(timeout=case.timeout_s)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, _ = proc.communicate()
            code = None
        finally:
            with self._lock:
                self._running.discard(proc)
        output = _ANSI.sub("", out.decode("utf-8", "replace"))
        return Outcome(case, code, time.monotonic() - started, output, parse_summary(output))

    def stop(self) -> None:
        self._stopping = True
        with self._lock:
            for proc in list(self._running):
                _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


class Pool:
    """Starts every case at once on `jobs` workers, longest-known first; a test waits
    for its own case's outcome."""

    def __init__(self, runner: Runner, selected: list[Case], jobs: int) -> None:
        self.runner = runner
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
        self._futures = {
            case.id: self._executor.submit(runner.run, case)
            for case in sorted(selected, key=lambda c: -c.timeout_s)
        }

    def outcome(self, case: Case) -> Outcome:
        return self._futures[case.id].result(timeout=case.timeout_s * 2 + 600)

    def finished(self) -> list[Outcome]:
        return [
            future.result()
            for future in self._futures.values()
            if future.done() and not future.cancelled() and future.exception() is None
        ]

    def close(self) -> None:
        self.runner.stop()
        for future in self._futures.values():
            future.cancel()
        self._executor.shutdown(wait=True)
