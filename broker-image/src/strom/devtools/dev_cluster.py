"""A cluster of N `strom-server` processes on this machine: files, start, readiness, stop.

The property files come from strom.config.dev_cluster (one per node, in the data dir, so
the same cluster can be started by hand with N `strom-server FILE` commands); this module
writes them (reusing what a previous run wrote: one cluster id for the life of the data),
starts every node before waiting for any (after the Raft integration a node opens its
client listener only once a majority of voters is up), waits for all of them at once with
a deadline, reports a node that dies without taking the others down, and stops them all:
SIGTERM, a deadline, SIGKILL for stragglers, each exit status reported.

Each node runs in its own session, so a Ctrl-C in the terminal reaches the supervisor only,
which then stops the nodes in order. Nothing here imports the broker: it runs processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TextIO

from strom.config import dev_cluster as rendering
from strom.config import loading

PROBE_TIMEOUT_S = 0.5
POLL_S = 0.1
PROGRESS_EVERY_S = 5.0
LOG_TAIL_LINES = 20
KILL_WAIT_S = 10.0
START_HEADER = "===== strom-dev-cluster "  # the first line of each start in a node's log


class DevClusterError(Exception):
    """Arguments or files that cannot make the cluster; the message says what to do."""


# ----- files


def log_path(data_dir: Path, node_id: int) -> Path:
    """Where a node's stdout and stderr go (appended to, one header per start)."""
    return data_dir / f"node-{node_id}.log"


def existing_cluster_id(data_dir: Path) -> str | None:
    """The cluster id of an earlier run on `data_dir`: that of its property files and of
    its nodes' meta.properties (formatted log dirs), which must agree; None if neither."""
    found: dict[str, list[Path]] = {}
    candidates = [*data_dir.glob("node-*.properties"), *data_dir.glob("node-*/meta.properties")]
    for path in sorted(candidates):
        try:
            settings = loading.parse_properties(path.read_text(), source=str(path))
        except (OSError, ValueError) as error:
            raise DevClusterError(f"cannot read {path}: {error}") from error
        value = settings.get("cluster.id")
        if value:
            found.setdefault(value, []).append(path)
    if len(found) > 1:
        detail = "; ".join(f"{cid} in {', '.join(map(str, paths))}" for cid, paths in found.items())
        raise DevClusterError(f"{data_dir} holds more than one cluster id: {detail}")
    return next(iter(found), None)


def write_property_files(
    nodes: Sequence[rendering.DevNode], data_dir: Path, *, rewrite: bool
) -> list[str]:
    """Write each node's file, or keep the one already there if it has every rendered
    setting (lines added by hand are kept). A file that disagrees is an error unless
    `rewrite`. Returns one line per file saying what happened."""
    plans = plan_property_files(nodes, data_dir, rewrite=rewrite)
    data_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for node, (path, action) in zip(nodes, plans, strict=True):
        if action != "kept":
            path.write_text(node.text)
        lines.append(f"{path} ({action})")
    return lines


def plan_property_files(
    nodes: Sequence[rendering.DevNode], data_dir: Path, *, rewrite: bool
) -> list[tuple[Path, str]]:
    """What `write_property_files` would do with each file, writing nothing; raises
    DevClusterError for a file that disagrees (unless `rewrite`)."""
    plans: list[tuple[Path, str]] = []
    for node in nodes:
        path = data_dir / node.file_name
        if not path.exists():
            plans.append((path, "written"))
            continue
        try:
            current = loading.parse_properties(path.read_text(), source=str(path))
        except (OSError, ValueError) as error:
            raise DevClusterError(f"cannot read {path}: {error}") from error
        differing = sorted(k for k, v in node.settings.items() if current.get(k) != v)
        if not differing:
            plans.append((path, "kept"))
        elif rewrite:
            plans.append((path, "rewritten"))
        else:
            key = differing[0]
            raise DevClusterError(
                f"{path} has {key}={current.get(key, '(unset)')}, these options give "
                f"{key}={node.settings[key]} ({len(differing)} setting(s) differ): run with "
                "the options of the first run, or --rewrite to rewrite the files (the "
                "cluster id and the data are kept)"
            )
    return plans


def server_command() -> list[str]:
    """`strom-server` of this installation: beside this interpreter, else on PATH, else
    this interpreter running strom.cli.server."""
    beside = Path(sys.executable).parent / "strom-server"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("strom-server")
    if found:
        return [found]
    return [sys.executable, "-m", "strom.cli.server"]


def check_ports_free(nodes: Sequence[rendering.DevNode]) -> None:
    """Fail early, naming the node and listener, if a port is taken on this machine."""
    for node in nodes:
        ports = {"client": node.client_port, "controller": node.controller_port}
        if node.metrics_port is not None:
            ports["metrics"] = node.metrics_port
        for what, port in ports.items():
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError as error:
                    raise DevClusterError(
                        f"port {port} (node {node.node_id}'s {what} listener) is in use "
                        f"({error.strerror}): stop what holds it or pick other ports "
                        "(--base-port, --controller-base-port, --metrics-base-port)"
                    ) from error


# ----- processes


@dataclasses.dataclass
class NodeProcess:
    """One node: its rendered settings, file, log and (once started) process."""

    node: rendering.DevNode
    properties: Path
    log: Path
    argv: list[str]
    proc: subprocess.Popen[bytes] | None = None
    ready: bool = False
    reported_exit: bool = False
    last_probe: str = "not probed yet"

    @property
    def name(self) -> str:
        return f"node {self.node.node_id}"

    @property
    def bootstrap(self) -> str:
        return f"{self.node.host}:{self.node.client_port}"

    def restart_command(self) -> str:
        return f"{shlex.join(self.argv)} >> {shlex.quote(str(self.log))} 2>&1"

    def probe(self) -> bool:
        """Ready: /readyz answers 200 (with a metrics endpoint), else the client port
        accepts a connection."""
        host, metrics_port = self.node.host, self.node.metrics_port
        try:
            if metrics_port is not None:
                url = f"http://{host}:{metrics_port}/readyz"
                with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as response:
                    status: int = response.status
                    self.last_probe = f"/readyz: HTTP {status}"
                    return status == 200
            with socket.create_connection((host, self.node.client_port), PROBE_TIMEOUT_S):
                self.last_probe = "client port accepts"
                return True
        except urllib.error.HTTPError as error:
            self.last_probe = f"/readyz: HTTP {error.code}"
        except OSError as error:
            reason = getattr(error, "reason", None) or error.strerror or error
            self.last_probe = f"{'/readyz' if metrics_port else 'client port'}: {reason}"
        return False

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            with self.log.open("rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode("utf-8", "replace")
        except OSError as error:
            return f"(cannot read {self.log}: {error})"
        this_start = text.rfind(START_HEADER)  # only this start's lines
        if this_start >= 0:
            text = text[this_start:]
        return "\n".join(text.splitlines()[-lines:]) or "(empty)"


class DevCluster:
    """The N node processes. start() starts them all; run() supervises until stop_requested
    is set (the CLI's signal handlers set it); stop() stops them all and reports."""

    def __init__(
        self,
        nodes: Sequence[rendering.DevNode],
        data_dir: Path,
        *,
        command: Sequence[str] | None = None,
        wraps: Sequence[Sequence[str]] | None = None,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`wraps[i]` is an argv prefix for node i+1 (e.g. `ip netns exec NS`)."""
        base = list(command) if command else server_command()
        prefixes = list(wraps) if wraps is not None else [[] for _ in nodes]
        self.processes = [
            NodeProcess(
                node=node,
                properties=data_dir / node.file_name,
                log=log_path(data_dir, node.node_id),
                argv=[*prefix, *base, str(data_dir / node.file_name)],
            )
            for node, prefix in zip(nodes, prefixes, strict=True)
        ]
        self.out = out or sys.stdout
        self.clock = clock
        self.stop_requested = threading.Event()
        self.unexpected_exits = 0
        self.signals = 0

    @property
    def bootstrap(self) -> str:
        return ",".join(p.bootstrap for p in self.processes)

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def request_stop(self, signum: int, frame: object = None) -> None:
        """A signal handler: the first signal stops the nodes, a second kills them."""
        self.signals += 1
        self.stop_requested.set()

    def start(self) -> None:
        """Start every node, none waiting for another."""
        for process in self.processes:
            process.log.parent.mkdir(parents=True, exist_ok=True)
            log: IO[bytes]
            with process.log.open("ab") as log:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                log.write(f"{START_HEADER}{stamp}: {shlex.join(process.argv)}\n".encode())
                log.flush()
                process.proc = subprocess.Popen(
                    process.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    start_new_session=True,
                )
            process.ready = False
            process.reported_exit = False
            self.say(f"{process.name}: started, pid {process.proc.pid}, log {process.log}")

    def running(self) -> list[NodeProcess]:
        return [p for p in self.processes if p.proc is not None and p.proc.poll() is None]

    def _check_exits(self) -> None:
        for process in self.processes:
            if process.proc is None or process.reported_exit:
                continue
            rc = process.proc.poll()
            if rc is None:
                continue
            process.reported_exit = True
            process.ready = False
            self.unexpected_exits += 1
            others = len(self.running())
            self.say(
                f"{process.name} exited unexpectedly with {_status(rc)}; the last lines of "
                f"{process.log}:\n{_indent(process.log_tail())}\n"
                f"the other {others} node(s) keep running; restart it with:\n"
                f"  {process.restart_command()}"
            )

    def supervise(self, ready_timeout: float) -> None:
        """Wait for every node to be ready (all probed each round, progress printed), then
        watch for exits, until stop_requested or no node is left."""
        started = self.clock()
        deadline = started + ready_timeout
        all_ready_said = timed_out = False
        last_progress = started
        while not self.stop_requested.is_set():
            self._check_exits()
            if not self.running():
                self.say("every node has exited")
                return
            waiting = [p for p in self.running() if not p.ready]
            for process in waiting:
                if process.probe():
                    process.ready = True
                    took = self.clock() - started
                    self.say(f"{process.name} ready at {process.bootstrap} ({took:.1f} s)")
            waiting = [p for p in self.running() if not p.ready]
            now = self.clock()
            if not waiting and not all_ready_said and all(p.ready for p in self.processes):
                all_ready_said = True
                self.say(f"cluster ready: {self.bootstrap}  (Ctrl-C stops every node)")
            elif waiting and not timed_out and now >= deadline:
                timed_out = True
                self.say(
                    f"not ready within {ready_timeout:.0f} s: "
                    + "; ".join(f"{p.name} ({p.last_probe})" for p in waiting)
                    + "; still waiting (their logs: "
                    + ", ".join(str(p.log) for p in waiting)
                    + ")"
                )
            elif waiting and now - last_progress >= PROGRESS_EVERY_S:
                last_progress = now
                ready = [p.name for p in self.processes if p.ready]
                self.say(
                    f"waiting {now - started:.0f} s: ready {', '.join(ready) or 'none'}; "
                    + "; ".join(f"{p.name}: {p.last_probe}" for p in waiting)
                )
            self.stop_requested.wait(POLL_S)

    def stop(self, timeout: float) -> dict[int, int | None]:
        """SIGTERM every running node, wait up to `timeout` (a second signal cuts it
        short), SIGKILL what is left; report and return each node's exit status (None:
        never started)."""
        self._check_exits()
        signals_before = self.signals
        targets = self.running()
        if targets:
            self.say(f"stopping {len(targets)} node(s): SIGTERM, up to {timeout:.0f} s")
        for process in targets:
            assert process.proc is not None
            with contextlib.suppress(ProcessLookupError):
                process.proc.send_signal(signal.SIGTERM)
        deadline = self.clock() + timeout
        while self.running() and self.clock() < deadline and self.signals == signals_before:
            time.sleep(POLL_S)
        killed = self.running()
        if killed:
            why = "a second signal" if self.signals != signals_before else f"{timeout:.0f} s"
            self.say(f"SIGKILL after {why}: {', '.join(p.name for p in killed)}")
        for process in killed:
            assert process.proc is not None
            with contextlib.suppress(ProcessLookupError):
                process.proc.kill()
        statuses: dict[int, int | None] = {}
        for process in self.processes:
            if process.proc is None:
                statuses[process.node.node_id] = None
                continue
            try:
                rc = process.proc.wait(KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                statuses[process.node.node_id] = None
                self.say(f"{process.name}: still running after SIGKILL (pid {process.proc.pid})")
                continue
            statuses[process.node.node_id] = rc
            if process in targets:
                note = " (killed)" if process in killed else ""
                self.say(f"{process.name}: exited with {_status(rc)}{note}")
            else:
                self.say(f"{process.name}: had exited earlier with {_status(rc)}")
        return statuses


def _status(rc: int) -> str:
    if rc < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-rc).name}"
        return f"signal {-rc}"
    return f"status {rc}"


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())
