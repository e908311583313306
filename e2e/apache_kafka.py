"""One Apache Kafka node for differential tests: KRaft, broker and controller combined.

Started the way the bench starts its Kafka peer (bench/strom_bench/brokers.py: the same
server properties, `kafka-storage format` then `kafka.Kafka`), from the jars that
e2e/peers/install.sh resolves for the Java peers: the kafka_2.13 core and its
dependencies, the same pinned release as the bench's (so `make test` installs them).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from java_peers import JavaPeers
from strom_process import free_port

BENCH_DIR = Path(__file__).resolve().parent.parent / "bench"
if str(BENCH_DIR) not in sys.path:
    sys.path.append(str(BENCH_DIR))

from strom_bench import brokers  # noqa: E402

READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
SEGMENT_BYTES = 1 << 30  # Kafka's default log.segment.bytes
# Small and quick to start: a test node, not a benchmark one (the bench uses 1G, C2 JIT).
# Logged at INFO (log4j2's default configuration at that level, to stdout): READY_LINE is
# an INFO line.
JVM_OPTIONS = (
    "-Xms256M",
    "-Xmx512M",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Dorg.apache.logging.log4j.level=INFO",
)
READY_LINE = "Kafka Server started"


class ApacheKafka:
    """A single-node KRaft Kafka on free loopback ports, data under `work_dir`."""

    def __init__(self, work_dir: Path, peers: JavaPeers) -> None:
        self.work_dir = work_dir
        self.peers = peers
        self.port = free_port()
        self.controller_port = free_port()
        self.data_dir = work_dir / "data"
        self.log_path = work_dir / "kafka.log"
        self.properties = brokers.kafka_server_properties(
            self.port, self.controller_port, self.data_dir, SEGMENT_BYTES
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, main: str, *args: str) -> list[str]:
        return [self.peers.java, *JVM_OPTIONS, "-cp", self.peers.classpath, main, *args]

    def start(self) -> None:
        config = self.work_dir / "server.properties"
        config.write_text(brokers.properties_text(self.properties))
        formatted = subprocess.run(
            self._java(
                brokers.KAFKA_STORAGE_TOOL,
                *("format", "-t", brokers.kafka_cluster_id(), "-c", str(config)),
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if formatted.returncode != 0:
            raise AssertionError(f"kafka-storage format failed:\n{formatted.stderr[-4000:]}")
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self._java(brokers.KAFKA_MAIN, str(config)),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                start_new_session=True,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while READY_LINE not in self.log_path.read_text(errors="replace"):
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"Kafka exited with {self.proc.returncode}\n{self.log_tail()}")
            if time.monotonic() >= deadline:
                raise AssertionError(f"Kafka not ready in {READY_TIMEOUT_S:g}s\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL if it lingers."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""
