"""Kafka's own load generators and the bench's Java programs (bench/peer), run as processes.

The same client and the same tool drive both brokers: `ProducerPerformance` from the
kafka-tools jar for P1, `AssignConsumerPerf` (ConsumerPerformance's counting, without a
consumer group) for C1, `FixedRateLatency` (an open-loop EndToEndLatency) for L1,
`CreateTopicsTiming` (the admin client's createTopics, then describeTopics until every
partition has a leader) for C2, `FailoverProbe` (an acks=all producer printing each
acknowledgement, and the partition's leader and ISR) for F1, `TxnProducerPerf` (a
transactional producer, then a read_committed count of what it wrote) for TX1, and
`BenchAdmin` to wait for a broker and create topics.
Parsing of their output is pure and lives here too, so it is unit-tested without a JVM.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strom_bench import process_groups

PEER_DIR = Path(__file__).resolve().parent.parent / "peer"
INSTALL_TIMEOUT_S = 900.0
# kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh run their tool with this heap,
# and kafka-run-class.sh adds these JVM options to every tool.
TOOL_JVM_OPTIONS = (
    "-Xmx512M",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
# The admin program only waits and creates topics: start it fast (C1 JIT only).
ADMIN_JVM_OPTIONS = ("-Xmx256M", "-XX:TieredStopAtLevel=1")
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
# What a tool watches while it runs: the broker it talks to, or every node of a cluster.
Watched = subprocess.Popen[bytes] | Sequence[subprocess.Popen[bytes]] | None


class ToolFailed(RuntimeError):
    """A Java tool exited non-zero, timed out, or printed nothing we could read."""


def install_peer() -> None:
    """Resolve the Kafka jars and compile the bench's Java programs (fast when done)."""
    if shutil.which("java") is None:
        raise ToolFailed("java is not installed: bench/peer/install.sh needs a JDK 17+")
    done = subprocess.run(
        ["bash", str(PEER_DIR / "install.sh")],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise ToolFailed(f"bench/peer/install.sh failed ({done.returncode}):\n{done.stderr}")


def kafka_version() -> str:
    """The Kafka release in bench/peer/lib, from the kafka-clients jar's name."""
    for jar in sorted((PEER_DIR / "lib").glob("kafka-clients-*.jar")):
        return jar.name.removeprefix("kafka-clients-").removesuffix(".jar")
    return "unknown"


def java_version() -> str:
    done = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, timeout=30, check=False
    )
    first = (done.stderr or done.stdout).splitlines()
    return first[0] if first else "unknown"


def classpath() -> str:
    return f"{PEER_DIR / 'target' / 'classes'}:{PEER_DIR / 'lib'}/*"


def log4j_option() -> str:
    return f"-Dlog4j2.configurationFile={PEER_DIR / 'log4j2.xml'}"


def java_argv(main: str, args: Sequence[str], jvm_options: Sequence[str]) -> list[str]:
    return ["java", *jvm_options, log4j_option(), "-cp", classpath(), main, *args]


@dataclass(frozen=True)
class ProducerResult:
    """One ProducerPerformance run: the steady-state line when there is one, else the total."""

    records: int
    records_per_s: float
    mb_per_s: float
    avg_latency_ms: float
    p99_latency_ms: float


@dataclass(frozen=True)
class ConsumerResult:
    records: int
    mb_per_s: float
    records_per_s: float


@dataclass(frozen=True)
class LatencyResult:
    counted: int
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float


_PRODUCER_LINE = re.compile(
    r"^(?P<records>\d+) (?P<steady>steady state )?records sent, "
    r"(?P<rps>[\d.]+) records/sec \((?P<mbps>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, [\d.]+ ms max latency, "
    r"\d+ ms 50th, \d+ ms 95th, (?P<p99>\d+) ms 99th",
    re.MULTILINE,
)


def parse_producer_performance(stdout: str) -> ProducerResult:
    """The summary of ProducerPerformance's output (MB = 2^20 bytes, as the tool counts).

    With --warmup-records the tool prints a total line and then a "steady state" line;
    the steady-state one is what we report, so JIT warm-up does not count against the JVM.
    """
    summaries = list(_PRODUCER_LINE.finditer(stdout))
    if not summaries:
        raise ToolFailed(f"no ProducerPerformance summary in its output:\n{stdout[-2000:]}")
    steady = [m for m in summaries if m["steady"]]
    chosen = steady[-1] if steady else summaries[-1]
    return ProducerResult(
        records=int(chosen["records"]),
        records_per_s=float(chosen["rps"]),
        mb_per_s=float(chosen["mbps"]),
        avg_latency_ms=float(chosen["avg"]),
        p99_latency_ms=float(chosen["p99"]),
    )


def last_json_line(stdout: str) -> dict[str, Any]:
    """The last line of output that is a JSON object (our Java programs print one)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            parsed = json.loads(line)
            if isinstance(parsed, dict):
                return parsed
    raise ToolFailed(f"no JSON result line in the output:\n{stdout[-2000:]}")


@dataclass(frozen=True)
class CreateTopicsResult:
    """One CreateTopicsTiming run: createTopics calls, then leaders known (milliseconds)."""

    brokers: int  # brokers the admin client saw before it started the clock
    topics: int
    partitions: int  # in all
    requests: int  # createTopics calls
    describe_polls: int
    create_ms: float  # the createTopics calls, answered
    leaders_ms: float  # from then until describeTopics showed every partition's leader
    total_ms: float

    @property
    def total_s(self) -> float:
        return self.total_ms / 1000


def parse_create_topics_result(stdout: str) -> CreateTopicsResult:
    data = last_json_line(stdout)
    return CreateTopicsResult(
        brokers=int(data["brokers"]),
        topics=int(data["topics"]),
        partitions=int(data["partitions"]),
        requests=int(data["requests"]),
        describe_polls=int(data["describe_polls"]),
        create_ms=float(data["create_ms"]),
        leaders_ms=float(data["leaders_ms"]),
        total_ms=float(data["total_ms"]),
    )


def parse_consumer_result(stdout: str) -> ConsumerResult:
    data = last_json_line(stdout)
    return ConsumerResult(
        records=int(data["records"]),
        mb_per_s=float(data["mb_per_s"]),
        records_per_s=float(data["records_per_s"]),
    )


def parse_latency_result(stdout: str) -> LatencyResult:
    data = last_json_line(stdout)
    return LatencyResult(
        counted=int(data["counted"]),
        p50_ms=float(data["p50_ms"]),
        p99_ms=float(data["p99_ms"]),
        p999_ms=float(data["p999_ms"]),
        max_ms=float(data["max_ms"]),
    )


@dataclass(frozen=True)
class TxnProducerResult:
    """One TxnProducerPerf run (TX1): the timed transactions' throughput and latencies, and
    what the read_committed check afterwards found."""

    transactions: int  # committed, the untimed warm-up ones included
    timed_transactions: int
    records_per_transaction: int
    record_size: int
    partitions: int
    transaction_version: int  # the broker's finalized transaction.version (0: none)
    seconds: float  # the timed transactions, begin of the first to commit of the last
    records_per_s: float
    transactions_per_s: float
    mb_per_s: float
    txn_p50_ms: float  # beginTransaction to commitTransaction's return
    txn_p99_ms: float
    txn_max_ms: float
    commit_p50_ms: float  # commitTransaction alone (it flushes the transaction's records)
    commit_p99_ms: float
    committed_read: int  # records a read_committed consumer was given from the start
    aborted_read: int  # records of the one aborted transaction it was given (must be 0)
    end_offsets: int  # the partitions' high watermarks, summed
    stable_offsets: int  # their last stable offsets, summed (waited for until equal)


def parse_txn_producer_result(stdout: str) -> TxnProducerResult:
    data = last_json_line(stdout)
    ints = (
        "transactions", "timed_transactions", "records_per_transaction", "record_size",
        "partitions", "transaction_version", "committed_read", "aborted_read", "end_offsets",
        "stable_offsets",
    )  # fmt: skip
    try:
        values: dict[str, Any] = {name: int(data[name]) for name in ints}
        for name in TxnProducerResult.__dataclass_fields__:
            if name not in values:
                values[name] = float(data[name])
    except (KeyError, TypeError, ValueError) as e:
        raise ToolFailed(f"TxnProducerPerf's result line lacks {e}: {data}") from e
    return TxnProducerResult(**values)


class JavaTools:
    """Runs the Java programs against one broker, each with a deadline; logs go to `log_dir`."""

    def __init__(self, groups: process_groups.ProcessGroups, log_dir: Path) -> None:
        self.groups = groups
        self.log_dir = log_dir
        self._count = 0

    def run(
        self,
        name: str,
        argv: Sequence[str],
        timeout_s: float,
        broker: Watched,
    ) -> str:
        """Run to completion and return stdout; raise ToolFailed on error or timeout (and
        BrokerExited, the tool killed, if a watched broker process exits first)."""
        self._count += 1
        stdout_path = self.log_dir / f"{self._count:03d}-{name}.out"
        stderr_path = self.log_dir / f"{self._count:03d}-{name}.err"
        proc = self.groups.spawn(argv, stdout=stdout_path, stderr=stderr_path)
        if broker is None:
            alive = []
        elif isinstance(broker, subprocess.Popen):
            alive = [broker]
        else:
            alive = list(broker)
        rc = self.groups.wait(proc, timeout_s, alive=alive)
        stdout = stdout_path.read_text("utf-8", "replace")
        if rc != 0:
            what = f"timed out after {timeout_s:.0f}s" if rc is None else f"exited with {rc}"
            raise ToolFailed(
                f"{name} {what}\nargv: {list(argv)}\n--- stdout ---\n{stdout[-2000:]}\n"
                f"--- stderr ---\n{process_groups.log_tail(stderr_path)}"
            )
        return stdout

    def admin_ready(
        self, bootstrap: str, timeout_s: float, broker: Watched, min_brokers: int = 1
    ) -> None:
        """Until an admin client sees at least `min_brokers` brokers (Kafka lists unfenced
        brokers only), within `timeout_s`."""
        args = [bootstrap, "ready", str(int(timeout_s * 1000)), str(min_brokers)]
        argv = java_argv("BenchAdmin", args, ADMIN_JVM_OPTIONS)
        self.run("admin-ready", argv, timeout_s + 30, broker)

    def create_topics_timing(
        self,
        bootstrap: str,
        prefix: str,
        *,
        topics: int,
        partitions: int,
        replication_factor: int,
        timeout_s: float,
        broker: Watched,
        topics_per_request: int | None = None,
        partitions_per_request: int | None = None,
    ) -> CreateTopicsResult:
        """Create `topics` topics of `partitions` each (all in one createTopics call unless
        `topics_per_request`) and time it until every partition has a leader. With
        `partitions_per_request` below `partitions`, each topic starts with that many and is
        grown by createPartitions calls of at most that many (Kafka's per-request limit)."""
        args = [
            bootstrap, str(int(timeout_s * 1000)), prefix,
            str(topics), str(partitions), str(replication_factor),
        ]  # fmt: skip
        if topics_per_request is not None or partitions_per_request is not None:
            args.append(str(topics_per_request or topics))
        if partitions_per_request is not None:
            args.append(str(partitions_per_request))
        argv = java_argv("CreateTopicsTiming", args, ADMIN_JVM_OPTIONS)
        stdout = self.run("create-topics-timing", argv, timeout_s + 30, broker)
        return parse_create_topics_result(stdout)

    def create_topics(
        self,
        bootstrap: str,
        topics: Sequence[tuple[str, int]],
        timeout_s: float,
        broker: Watched,
        replication_factor: int = 1,
    ) -> None:
        """Create topics (name, partitions) and wait until each partition has a leader."""
        specs = [f"{name}:{partitions}:{replication_factor}" for name, partitions in topics]
        args = [bootstrap, "create", str(int(timeout_s * 1000)), *specs]
        self.run(
            "admin-create", java_argv("BenchAdmin", args, ADMIN_JVM_OPTIONS), timeout_s + 30, broker
        )

    def produce(
        self,
        bootstrap: str,
        topic: str,
        *,
        records: int,
        warmup_records: int,
        record_size: int,
        producer_properties: Sequence[str],
        timeout_s: float,
        broker: Watched,
    ) -> ProducerResult:
        args = [
            "--bootstrap-server", bootstrap,
            "--topic", topic,
            "--num-records", str(records),
            "--warmup-records", str(warmup_records),
            "--record-size", str(record_size),
            "--throughput", "-1",
            "--reporting-interval", str(int(timeout_s * 1000)),
            "--command-property", *producer_properties,
        ]  # fmt: skip
        argv = java_argv(PRODUCER_PERFORMANCE, args, TOOL_JVM_OPTIONS)
        return parse_producer_performance(self.run("producer-perf", argv, timeout_s, broker))

    def transactional_produce(
        self,
        bootstrap: str,
        topic: str,
        *,
        transactions: int,
        records_per_transaction: int,
        record_size: int,
        warmup_transactions: int,
        producer_properties: Sequence[str],
        timeout_s: float,
        broker: Watched,
    ) -> TxnProducerResult:
        """TxnProducerPerf (TX1): `transactions` committed transactions of
        `records_per_transaction` records, the first `warmup_transactions` untimed, then one
        aborted and a read_committed count (the caller checks it: transactional.check_tx1)."""
        args = [
            bootstrap, topic, str(transactions), str(records_per_transaction),
            str(record_size), str(warmup_transactions), str(int(timeout_s * 1000)),
            *producer_properties,
        ]  # fmt: skip
        argv = java_argv("TxnProducerPerf", args, TOOL_JVM_OPTIONS)
        # TxnProducerPerf keeps its own deadline; this one is for a JVM that hangs anyway
        stdout = self.run("txn-producer-perf", argv, timeout_s + 30, broker)
        return parse_txn_producer_result(stdout)

    def start_failover_probe(
        self,
        bootstrap: str,
        topic: str,
        *,
        send_interval_ms: int,
        record_size: int,
        max_duration_s: float,
    ) -> tuple[subprocess.Popen[bytes], Path]:
        """Start FailoverProbe in the background (F1): its process and the file its lines go
        to (read them with failover.ProbeReader). The caller stops it (ProcessGroups.kill)."""
        self._count += 1
        stdout_path = self.log_dir / f"{self._count:03d}-failover-probe.out"
        stderr_path = self.log_dir / f"{self._count:03d}-failover-probe.err"
        args = [bootstrap, topic, str(send_interval_ms), str(record_size), str(int(max_duration_s))]
        argv = java_argv("FailoverProbe", args, TOOL_JVM_OPTIONS)
        proc = self.groups.spawn(argv, stdout=stdout_path, stderr=stderr_path)
        return proc, stdout_path

    def consume(
        self,
        bootstrap: str,
        topic: str,
        *,
        records: int,
        timeout_s: float,
        broker: subprocess.Popen[bytes],
    ) -> ConsumerResult:
        args = [bootstrap, topic, str(records), str(int(timeout_s * 1000))]
        argv = java_argv("AssignConsumerPerf", args, TOOL_JVM_OPTIONS)
        return parse_consumer_result(self.run("consumer-perf", argv, timeout_s + 30, broker))

    def fixed_rate_latency(
        self,
        bootstrap: str,
        topic: str,
        *,
        rate: int,
        duration_s: float,
        warmup_s: float,
        record_size: int,
        acks: str,
        broker: subprocess.Popen[bytes],
    ) -> LatencyResult:
        args = [bootstrap, topic, str(rate), str(duration_s), str(warmup_s), str(record_size), acks]
        argv = java_argv("FixedRateLatency", args, TOOL_JVM_OPTIONS)
        # FixedRateLatency gives itself duration + 30 s to receive everything.
        stdout = self.run("fixed-rate-latency", argv, duration_s + 90, broker)
        return parse_latency_result(stdout)
