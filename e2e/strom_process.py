"""A real `strom-server` process for whole-system tests: start, wait ready, stop, kill, restart.

The broker runs as its own process on free loopback ports with its data in a directory the
test owns; restarts reuse the same directory and ports so clients reconnect to the same
address. Every wait has a deadline; an early exit fails with the broker's stderr.
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
LOG_TAIL_CHARS = 6000

# The settings of the broker shared by a test module (conftest's `strom` fixture): keep
# records whatever their age. The deterministic workload (e2e_records, and PeerProducer.java,
# built once) stamps records with CreateTimes from November 2023, older than the default
# retention.ms of 7 days, so the broker's retention pass (at most every 30 s) deletes them,
# as Kafka would. A test whose produce and consume straddled a pass read nothing: a cold
# `make test` failed test_java_clients.py::test_round_trip[zstd] with 0 of 300 records.
# (The Java consumer's "invalid full fetch response with extraIds=..." line in such a log
# is from its close: the empty fetch that closes its session replaces the partitions the
# in-flight fetch asked for before that fetch's answer is checked. It logs it when all
# goes well too.)
SHARED_BROKER_OVERRIDES: dict[str, str] = {"log.retention.ms": "-1"}

# Every StromProcess currently running, so conftest can attach their logs to failing tests.
live: list[StromProcess] = []


# Below Linux's ephemeral range (32768-60999): a port the kernel hands out for port 0 or
# for a client's outgoing connection is one another test may take before the broker binds
# it; random ones from here only collide with each other's rare equal picks.
_PORTS = range(20_000, 32_000)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    for _ in range(100):
        port = random.choice(_PORTS)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port found in {_PORTS}")


def server_command() -> list[str]:
    """The `strom-server` of the interpreter running the tests (the project's venv).

    STROM_E2E_SERVER (a shell-quoted command) replaces it, e.g. to run the same tests
    against a reference broker behind a shim that takes the same --override arguments.
    """
    override = os.environ.get("STROM_E2E_SERVER")
    if override:
        return shlex.split(override)
    candidate = Path(sys.executable).parent / "strom-server"
    if candidate.exists():
        return [str(candidate)]
    found = shutil.which("strom-server")
    if found:
        return [found]
    raise RuntimeError("strom-server is not installed: run `make install` (pip install -e .)")


class StromProcess:
    """One broker process bound to fixed ports and a fixed data directory."""

    def __init__(
        self,
        data_dir: Path,
        *,
        overrides: Mapping[str, str] | None = None,
        command: Sequence[str] | None = None,
        port: int | None = None,
        metrics_port: int | None = None,
        host: str = "127.0.0.1",
        wrap: Sequence[str] = (),
    ) -> None:
        """`host` is the address to listen on (and advertise, if not loopback); `wrap` is
        an argv prefix, e.g. netns.Host.prefix to run the broker inside a test host's
        network namespace (then pass host=str(that_host.address): ports are per namespace,
        so the free_port() defaults, free on 127.0.0.1 here, are as good as any)."""
        self.data_dir = Path(data_dir)
        self.log_dir = self.data_dir / "log"
        self.port = port or free_port()
        self.metrics_port = metrics_port or free_port()
        self.overrides = dict(overrides or {})
        self.command = list(command) if command else server_command()
        self.host = host
        self.wrap = list(wrap)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._stderr_path: Path | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def argv(self) -> list[str]:
        settings = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.log_dir),
            "metrics.listener": self.metrics_url,
        }
        if self.host != "127.0.0.1":
            settings["advertised.listeners"] = f"PLAINTEXT://{self.host}:{self.port}"
        settings.update(self.overrides)
        argv = [*self.wrap, *self.command]
        for key, value in settings.items():
            argv += ["--override", f"{key}={value}"]
        return argv

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Start the broker and wait until /readyz answers 200."""
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it (nodes of a cluster wait for each other
        before they are ready: start them all, then wait_ready each)."""
        assert not self.running, "broker is already running"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self._stderr_path = self.data_dir / f"stderr.{self.starts}.txt"
        with self._stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                cwd=self.data_dir,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        live.append(self)

    def metric(self, name: str, **labels: str) -> float:
        """The sum of `name`'s samples on this node's /metrics whose labels include
        `labels` (0 if there is none)."""
        with urllib.request.urlopen(f"{self.metrics_url}/metrics", timeout=10) as response:
            text = response.read().decode()
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        )

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        last_error = "no answer yet"
        while True:
            assert self.proc is not None
            rc = self.proc.poll()
            if rc is not None:
                self._forget()
                raise AssertionError(
                    f"strom-server exited with {rc} before it was ready\n"
                    f"argv: {self.argv()}\n--- stderr ---\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.metrics_url}/readyz", timeout=1.0) as r:
                    if r.status == 200:
                        return
                    last_error = f"HTTP {r.status}"
            except urllib.error.HTTPError as e:
                last_error = f"HTTP {e.code}"
            except OSError as e:  # refused, reset, timeout: not up yet
                last_error = repr(e)
            if time.monotonic() >= deadline:
                self.kill()
                raise AssertionError(
                    f"strom-server not ready within {timeout}s (last /readyz: {last_error})\n"
                    f"argv: {self.argv()}\n--- stderr ---\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Graceful shutdown: SIGTERM, then assert exit status 0 within the deadline.

        On a timeout the process is SIGKILLed (so nothing leaks) and the test fails.
        """
        if self.proc is None:
            return
        proc = self.proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
                self._forget()
                raise AssertionError(
                    f"strom-server did not exit within {timeout}s of SIGTERM; killed\n"
                    f"--- stderr ---\n{self.log_tail()}"
                ) from None
        self._forget()
        rc = proc.returncode
        assert rc == 0, (
            f"strom-server exited with {rc} on SIGTERM (expected 0)\n"
            f"--- stderr ---\n{self.log_tail()}"
        )

    def kill(self) -> None:
        """SIGKILL, as a crash: no chance to flush or close anything."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._forget()

    def restart(self, *, graceful: bool = False, timeout: float = READY_TIMEOUT_S) -> None:
        """Stop (SIGTERM and check, or SIGKILL) and start again on the same dir and ports."""
        if graceful:
            self.stop()
        else:
            self.kill()
        self.start(timeout)

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        if self._stderr_path is None or not self._stderr_path.exists():
            return "(no output)"
        text = self._stderr_path.read_bytes()[-chars:].decode("utf-8", "replace")
        return text or "(no output)"

    def _forget(self) -> None:
        with contextlib.suppress(ValueError):
            live.remove(self)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"StromProcess({self.bootstrap}, {state}, dir={self.data_dir})"


@contextlib.contextmanager
def running_broker(data_dir: Path, **kwargs: object) -> Iterator[StromProcess]:
    """Start a broker, yield it, and stop it gracefully (asserting exit status 0)."""
    broker = StromProcess(data_dir, **kwargs)  # type: ignore[arg-type]
    broker.start()
    try:
        yield broker
    except BaseException:
        broker.kill()
        raise
    broker.stop()
