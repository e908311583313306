"""strom-dev-cluster as a user runs it: N real strom-server processes from N property files.

It prints the bootstrap servers, every node answers Kafka requests on its own port, SIGINT
stops every node cleanly (exit 0, "stopped cleanly" in each log), and a second run on the
same data dir keeps the files and the cluster id. With --netns (root and `ip netns` only)
each node answers at its own address and nothing of the namespaces is left afterwards.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import netns
import pytest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from strom.client import wire
from strom.config import loading
from waiting import wait_until

pytestmark = pytest.mark.timeout(180)

BROKERS = 3
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 10.0


def dev_cluster_command() -> list[str]:
    """`strom-dev-cluster` beside this interpreter, else this interpreter running its module
    (an editable install made before the entry point existed has no script)."""
    script = Path(sys.executable).parent / "strom-dev-cluster"
    if script.exists():
        return [str(script)]
    found = shutil.which("strom-dev-cluster")
    return [found] if found else [sys.executable, "-m", "strom.cli.dev_cluster"]


def free_port_range(count: int) -> int:
    """A base port P with P..P+count-1 all free on 127.0.0.1 right now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + count > 65535:
            continue
        held = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise AssertionError(f"no {count} consecutive free ports found")


class DevClusterRun:
    """One `strom-dev-cluster` process; its stdout read line by line by a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*dev_cluster_command(), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))

    def _drain(self) -> None:
        while True:
            try:
                self.lines.append(self._queue.get_nowait())
            except queue.Empty:
                return

    @property
    def output(self) -> str:
        self._drain()
        return "\n".join(self.lines)

    def line_starting(self, prefix: str, timeout: float) -> str:
        def found() -> str | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"exited with {self.proc.returncode}:\n{self.output}")
            self._drain()
            return next((line for line in self.lines if line.startswith(prefix)), None)

        return wait_until(found, timeout, lambda: f"no line {prefix!r} in:\n{self.output}")

    def wait_ready(self) -> list[str]:
        """The bootstrap servers, once every node is ready."""
        servers = self.line_starting("bootstrap servers: ", READY_TIMEOUT_S).split(": ", 1)[1]
        self.line_starting("cluster ready: ", READY_TIMEOUT_S)
        return servers.split(",")

    def interrupt(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            rc = self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(
                f"no exit within {STOP_TIMEOUT_S}s of SIGINT:\n{self.output}"
            ) from None
        self._reader.join(10)  # stdout is closed: the reader has the last lines
        self._drain()
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def runs() -> Iterator[list[DevClusterRun]]:
    """Every run a test starts; whatever is still running at the end is killed (its nodes
    are in their own sessions: stopped through the tool, so SIGINT first)."""
    made: list[DevClusterRun] = []
    yield made
    for run in made:
        if run.proc.poll() is None:
            run.proc.send_signal(signal.SIGINT)
            try:
                run.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                run.kill()


def metadata(server: str) -> MetadataResponse:
    """ApiVersions then Metadata (all topics), on one connection to that node only."""
    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    response: MetadataResponse = wire.request(
        wire.split_addresses(server),
        request,
        MetadataResponse,
        timeout=REQUEST_TIMEOUT_S,
        what=f"Metadata from {server}",
    )
    return response


def cluster_ids(data_dir: Path) -> set[str]:
    """The cluster ids in the nodes' property files and formatted log dirs."""
    paths = [*data_dir.glob("node-*.properties"), *data_dir.glob("node-*/meta.properties")]
    return {loading.parse_properties(p.read_text())["cluster.id"] for p in paths}


def test_three_nodes_start_answer_stop_cleanly_and_keep_their_cluster_id(
    tmp_path: Path, runs: list[DevClusterRun]
) -> None:
    data_dir = tmp_path / "cluster"
    base = free_port_range(3 * BROKERS)  # client, controller, metrics ports
    args = [
        f"--brokers={BROKERS}",
        f"--data-dir={data_dir}",
        f"--base-port={base}",
        f"--metrics-base-port={base + 2 * BROKERS}",
    ]
    first = DevClusterRun(*args)
    runs.append(first)
    servers = first.wait_ready()
    assert servers == [f"localhost:{base + i}" for i in range(BROKERS)]
    (cluster_id,) = cluster_ids(data_dir)
    for server in servers:
        answer = metadata(server)
        assert answer.cluster_id == cluster_id
        # one cluster: every node lists all three brokers
        assert {b.node_id for b in answer.brokers} == {1, 2, 3}, answer.brokers
    for node_id in range(1, BROKERS + 1):
        settings = loading.parse_properties((data_dir / f"node-{node_id}.properties").read_text())
        assert settings["node.id"] == str(node_id)
        assert settings["process.roles"] == "broker,controller"

    assert first.interrupt() == 0, first.output
    for node_id in range(1, BROKERS + 1):
        assert f"node {node_id}: exited with status 0" in first.output
        log = (data_dir / f"node-{node_id}.log").read_text()
        assert f"Strom broker {node_id} stopped cleanly" in log, log[-3000:]
    assert "all nodes stopped cleanly" in first.output

    second = DevClusterRun(*args)
    runs.append(second)
    assert second.wait_ready() == servers
    assert f"cluster id {cluster_id} (kept)" in second.output
    assert second.output.count("(kept)") == 1 + BROKERS  # the id and every file
    assert cluster_ids(data_dir) == {cluster_id}
    assert {metadata(s).cluster_id for s in servers} == {cluster_id}
    assert second.interrupt() == 0, second.output


def test_a_node_that_dies_is_reported_and_the_others_keep_running(
    tmp_path: Path, runs: list[DevClusterRun]
) -> None:
    data_dir = tmp_path / "cluster"
    base = free_port_range(2 * BROKERS)
    run = DevClusterRun(
        f"--brokers={BROKERS}", f"--data-dir={data_dir}", f"--base-port={base}", "--no-metrics"
    )
    runs.append(run)
    servers = run.wait_ready()
    started = run.line_starting("node 2: started, pid ", 1)
    pid = int(started.split("pid ")[1].split(",")[0])
    os.kill(pid, signal.SIGKILL)  # a crash
    run.line_starting("node 2 exited unexpectedly with signal SIGKILL", 30)
    run.line_starting("the other 2 node(s) keep running; restart it with:", 5)
    restart = run.output.split("restart it with:", 1)[1].strip().splitlines()[0]
    assert f" {data_dir / 'node-2.properties'} >> {data_dir / 'node-2.log'} 2>&1" in restart
    tail = run.output.split("exited unexpectedly", 1)[1]
    assert "(strom." in tail  # the tail of its log
    for server in (servers[0], servers[2]):
        assert metadata(server).cluster_id
    assert run.interrupt() == 1, run.output  # a node died while the cluster ran
    assert "node 2: had exited earlier with signal SIGKILL" in run.output
    assert "node 1: exited with status 0" in run.output
    assert "node 3: exited with status 0" in run.output


@pytest.mark.netns
def test_netns_nodes_each_answer_at_their_own_address(
    tmp_path: Path, runs: list[DevClusterRun]
) -> None:
    reason = netns.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    data_dir = tmp_path / "cluster"
    run = DevClusterRun(f"--brokers={BROKERS}", f"--data-dir={data_dir}", "--netns")
    runs.append(run)
    servers = run.wait_ready()
    hosts = [server.rsplit(":", 1)[0] for server in servers]
    assert len(set(hosts)) == BROKERS and "localhost" not in hosts, servers
    namespaces = [
        line.split("network namespace ")[1].split(",")[0]
        for line in run.lines
        if "network namespace " in line
    ]
    assert len(namespaces) == BROKERS
    (cluster_id,) = cluster_ids(data_dir)
    for node_id, server in enumerate(servers, start=1):
        answer = metadata(server)
        assert answer.cluster_id == cluster_id
        mine = next(b for b in answer.brokers if b.node_id == node_id)
        assert f"{mine.host}:{mine.port}" == server  # advertised at its own address
    assert run.interrupt() == 0, run.output
    left = set(netns.list_netns(netns.NETNS_PREFIX)) & set(namespaces)
    assert not left, f"namespaces left behind: {left}"
