"""The two brokers under test, started the same way: fresh data directory on the same disk,
free loopback ports, the same segment size, no fsync per message (both rely on the page
cache, as Kafka does by default). A broker is SIGKILLed when its round is over: its data
is thrown away, so a graceful shutdown would only cost time.
"""

from __future__ import annotations

import base64
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from strom_bench import java_tools, process_groups

READY_TIMEOUT_S = 90.0
STROM = "strom"
KAFKA = "kafka"
SIDES = (STROM, KAFKA)

# kafka-server-start.sh's heap and kafka-run-class.sh's JVM options: Kafka as users run it.
KAFKA_JVM_OPTIONS = (
    "-Xmx1G",
    "-Xms1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
# Each node of the 3-node cluster (C2): a smaller heap, three JVMs share a 2-core machine.
KAFKA_CLUSTER_JVM_OPTIONS = ("-Xmx512M", "-Xms512M", *KAFKA_JVM_OPTIONS[2:])
KAFKA_MAIN = "kafka.Kafka"
KAFKA_STORAGE_TOOL = "kafka.tools.StorageTool"


class BrokerFailed(RuntimeError):
    """A broker exited or did not become ready in time; the message carries its log tail."""


def strom_server_command() -> str:
    """The `strom-server` next to the interpreter running the harness (the project's venv)."""
    candidate = Path(sys.executable).parent / "strom-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("strom-server")
    if found:
        return found
    raise BrokerFailed("strom-server is not installed: run `make install-python`")


def strom_overrides(
    port: int, metrics_port: int, log_dir: Path, segment_bytes: int
) -> dict[str, str]:
    """Strom's settings: Kafka's property names, the same values as the Kafka peer's."""
    return {
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(log_dir),
        "log.segment.bytes": str(segment_bytes),
        "num.partitions": "1",
        "metrics.listener": f"http://127.0.0.1:{metrics_port}",
    }


def strom_cluster_overrides(
    port: int, controller_port: int, *, node_id: int, voters: str, cluster_id: str
) -> dict[str, str]:
    """What a node of a Strom cluster adds to `strom_overrides`: combined mode (broker and
    controller) with a controller listener of its own, one static quorum and one cluster id,
    as `strom-dev-cluster` and e2e's StromCluster set them (Kafka's property names)."""
    return {
        "node.id": str(node_id),
        "process.roles": "broker,controller",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": voters,
        "cluster.id": cluster_id,
        "offsets.topic.replication.factor": "1",
    }


def kafka_quorum_voters(controller_ports: Sequence[int]) -> str:
    """controller.quorum.voters of nodes 1..N on loopback: `1@127.0.0.1:P1,2@127.0.0.1:P2`."""
    return ",".join(f"{n}@127.0.0.1:{port}" for n, port in enumerate(controller_ports, start=1))


def kafka_server_properties(
    port: int,
    controller_port: int,
    log_dir: Path,
    segment_bytes: int,
    *,
    node_id: int = 1,
    voters: str | None = None,
) -> dict[str, str]:
    """A KRaft node in combined mode (broker + controller) on loopback: alone (the default)
    or one of a static quorum (`voters`, see kafka_quorum_voters).

    Flush settings are left at Kafka's defaults (log.flush.interval.* = never): like Strom,
    Kafka leaves writes in the page cache and relies on replication, not fsync, for safety.
    """
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters or kafka_quorum_voters([controller_port]),
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(log_dir),
        "log.segment.bytes": str(segment_bytes),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }


def properties_text(properties: Mapping[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in properties.items())


def kafka_cluster_id() -> str:
    """A cluster id as `kafka-storage random-uuid` prints it: 16 random bytes, base64url,
    never starting with '-' (`kafka-storage format -t -x…` would read it as an option)."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not candidate.startswith("-"):
            return candidate


class Broker:
    """One running broker process; `kind` is STROM or KAFKA."""

    kind: str

    def __init__(self, groups: process_groups.ProcessGroups, work_dir: Path) -> None:
        self.groups = groups
        self.work_dir = work_dir
        self.data_dir = work_dir / "data"
        self.log_path = work_dir / "broker.log"
        self.port = process_groups.free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def process(self) -> subprocess.Popen[bytes]:
        if self.proc is None:
            raise BrokerFailed(f"{self.kind} broker is not started")
        return self.proc

    @property
    def pid(self) -> int:
        return self.process.pid

    def start(self) -> None:
        raise NotImplementedError

    def wait_ready(self, tools: java_tools.JavaTools) -> None:
        """Until clients can use the broker, within READY_TIMEOUT_S; BrokerFailed if not."""
        raise NotImplementedError

    def stop(self) -> None:
        """SIGKILL the broker and delete its data (its log file stays for reading)."""
        if self.proc is not None:
            self.groups.kill(self.proc)
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the broker and keep its data: `start` brings it back on the same data
        (F1 restarts the leader it killed)."""
        if self.proc is not None:
            self.groups.kill(self.proc)
            self.proc = None

    def stop_gracefully(self, timeout_s: float) -> float:
        """SIGTERM the broker and wait for it to exit: the seconds that took (its graceful
        shutdown). BrokerFailed if it is still running after `timeout_s` (then killed) or
        exits with an error."""
        proc = self.process
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = self.groups.wait(proc, timeout_s)
        elapsed = time.monotonic() - started
        if rc is None:
            raise BrokerFailed(f"{self.kind} broker did not exit within {timeout_s:.0f}s")
        if rc not in (0, 128 + signal.SIGTERM, -signal.SIGTERM):
            raise BrokerFailed(f"{self.kind} broker exited with {rc} on SIGTERM")
        self.proc = None
        return elapsed

    def log_excerpt(self) -> str:
        return f"--- {self.log_path} ---\n{process_groups.log_tail(self.log_path)}"

    def check_alive(self) -> None:
        proc = self.process
        if proc.poll() is not None:
            raise BrokerFailed(f"{self.kind} broker exited with {proc.returncode}")


class StromBroker(Broker):
    kind = STROM

    def __init__(
        self,
        groups: process_groups.ProcessGroups,
        work_dir: Path,
        segment_bytes: int,
        *,
        controller_port: int | None = None,
        node_id: int = 1,
        voters: str | None = None,
        cluster_id: str | None = None,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        """A single node by default; a cluster's node passes its node.id, controller port,
        the quorum's voters and the cluster id (see strom_cluster_overrides); `settings`
        come last and win."""
        super().__init__(groups, work_dir)
        self.metrics_port = process_groups.free_port()
        self.overrides = strom_overrides(self.port, self.metrics_port, self.data_dir, segment_bytes)
        if controller_port is not None:
            assert voters is not None and cluster_id is not None
            self.overrides |= strom_cluster_overrides(
                self.port, controller_port, node_id=node_id, voters=voters, cluster_id=cluster_id
            )
        self.overrides |= settings or {}

    def argv(self) -> list[str]:
        argv = [strom_server_command()]
        for key, value in self.overrides.items():
            argv += ["--override", f"{key}={value}"]
        return argv

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = self.groups.spawn(
            self.argv(), stdout=self.log_path, cwd=self.work_dir, env={"PYTHONUNBUFFERED": "1"}
        )

    def wait_ready(self, tools: java_tools.JavaTools) -> None:
        """Until /readyz answers 200: logs recovered, listener open."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        url = f"http://127.0.0.1:{self.metrics_port}/readyz"
        while True:
            self.check_alive()
            try:
                with urllib.request.urlopen(url, timeout=1.0) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # not listening yet, or 503 while starting
            if time.monotonic() >= deadline:
                raise BrokerFailed(f"strom-server not ready within {READY_TIMEOUT_S:.0f}s")
            time.sleep(process_groups.POLL_INTERVAL_S)


class KafkaBroker(Broker):
    kind = KAFKA

    def __init__(
        self,
        groups: process_groups.ProcessGroups,
        work_dir: Path,
        segment_bytes: int,
        formatted_template: Path,
        *,
        node_id: int = 1,
        controller_port: int | None = None,
        voters: str | None = None,
        jvm_options: Sequence[str] = KAFKA_JVM_OPTIONS,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        """A single node by default; a cluster's node passes its node.id, controller port
        and the quorum's voters (its template formatted for that node.id); `settings` are
        added to server.properties last."""
        super().__init__(groups, work_dir)
        self.controller_port = controller_port or process_groups.free_port()
        self.formatted_template = formatted_template
        self.jvm_options = tuple(jvm_options)
        self.properties = kafka_server_properties(
            self.port,
            self.controller_port,
            self.data_dir,
            segment_bytes,
            node_id=node_id,
            voters=voters,
        ) | dict(settings or {})

    def start(self) -> None:
        """Start from a formatted log dir (see format_kafka_storage); a restart (after
        `kill`) keeps the data it has."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if not self.data_dir.exists():  # a restart keeps its data
            shutil.copytree(self.formatted_template, self.data_dir)
        config = self.work_dir / "server.properties"
        config.write_text(properties_text(self.properties))
        argv = java_tools.java_argv(KAFKA_MAIN, [str(config)], self.jvm_options)
        self.proc = self.groups.spawn(argv, stdout=self.log_path, cwd=self.work_dir)

    def wait_ready(self, tools: java_tools.JavaTools) -> None:
        """Until an admin client sees the node (BenchAdmin retries with a deadline while
        this process is watched): Kafka opens its port before it serves requests."""
        try:
            tools.admin_ready(self.bootstrap, READY_TIMEOUT_S, self.process)
        except java_tools.ToolFailed as e:
            raise BrokerFailed(f"Kafka not ready: {e}") from e


FORMAT_TIMEOUT_S = 120.0


def format_kafka_storage(
    groups: process_groups.ProcessGroups, template_dir: Path, segment_bytes: int
) -> None:
    """`kafka-storage format` once into `template_dir`; each Kafka start copies it.

    Copying a formatted directory is what formatting would write (meta.properties and the
    bootstrap checkpoint), without a JVM start per round.
    """
    format_kafka_storages(groups, [template_dir], segment_bytes)


def format_kafka_storages(
    groups: process_groups.ProcessGroups, template_dirs: Sequence[Path], segment_bytes: int
) -> None:
    """`kafka-storage format` into each of `template_dirs` for node.id 1, 2, ... with one
    cluster id (a static quorum of those nodes), the formats running side by side. One
    directory is the single node; N are the N nodes of a cluster."""
    cluster_id = kafka_cluster_id()
    controller_ports = [process_groups.free_port() for _ in template_dirs]
    voters = kafka_quorum_voters(controller_ports)
    running = []
    for node_id, template_dir in enumerate(template_dirs, start=1):
        template_dir.parent.mkdir(parents=True, exist_ok=True)
        properties = kafka_server_properties(
            process_groups.free_port(),
            controller_ports[node_id - 1],
            template_dir,
            segment_bytes,
            node_id=node_id,
            voters=voters,
        )
        config = template_dir.parent / f"{template_dir.name}-format.properties"
        config.write_text(properties_text(properties))
        args = ["format", "-t", cluster_id, "-c", str(config)]
        argv = java_tools.java_argv(KAFKA_STORAGE_TOOL, args, java_tools.ADMIN_JVM_OPTIONS)
        log = template_dir.parent / f"{template_dir.name}-format.log"
        running.append((groups.spawn(argv, stdout=log), log))
    for proc, log in running:
        rc = groups.wait(proc, FORMAT_TIMEOUT_S)
        if rc != 0:
            raise BrokerFailed(
                f"kafka-storage format failed ({rc}):\n{process_groups.log_tail(log)}"
            )
