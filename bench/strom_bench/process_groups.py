"""Child processes the harness owns: each in its own process group, all killed on the way out.

Every process the benchmark starts (brokers, Java tools, py-spy) goes through one
`ProcessGroups`; leaving its `with` block, normally or by an exception, SIGKILLs the group of
every process still running, so no broker outlives the harness.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

KILL_WAIT_S = 10.0
POLL_INTERVAL_S = 0.05


_given_ports: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, and never one this process
    handed out before: a cluster's ports are all chosen before any node binds them, and the
    kernel may offer a port again as soon as its probe socket is closed."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _given_ports:
            _given_ports.add(port)
            return port


def log_tail(path: Path, chars: int = 4000) -> str:
    """The end of a log file, for error messages."""
    if not path.exists():
        return "(no output)"
    text = path.read_bytes()[-chars:].decode("utf-8", "replace")
    return text or "(no output)"


class ProcessGroups:
    """Starts processes in new sessions and kills every group still alive on exit."""

    def __init__(self) -> None:
        self._live: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> ProcessGroups:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill_all()

    def spawn(
        self,
        argv: Sequence[str],
        *,
        stdout: Path,
        stderr: Path | None = None,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start `argv` in its own session, output to files (stderr joins stdout if None)."""
        stdout.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as files:
            out = files.enter_context(stdout.open("wb"))
            err = files.enter_context(stderr.open("wb")) if stderr else subprocess.STDOUT
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=cwd,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        self._live.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the process's whole group and reap it."""
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(KILL_WAIT_S)
        self._forget(proc)

    def terminate(self, proc: subprocess.Popen[bytes], grace_s: float) -> None:
        """SIGTERM, then SIGKILL the group if it is still alive after `grace_s`."""
        if proc.poll() is None and grace_s > 0:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(grace_s)
        self.kill(proc)

    def kill_all(self) -> None:
        for proc in list(self._live):
            self.kill(proc)

    def wait(
        self,
        proc: subprocess.Popen[bytes],
        timeout_s: float,
        *,
        alive: Sequence[subprocess.Popen[bytes]] = (),
    ) -> int | None:
        """Wait for `proc` to exit within the deadline; None (and `proc` killed) on timeout.

        If a process in `alive` (the broker a tool talks to) exits first, `proc` is killed
        and `BrokerExited` raised: no tool waits out its timeout on a dead broker.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            rc = proc.poll()
            if rc is not None:
                self._forget(proc)
                return rc
            for other in alive:
                if other.poll() is not None:
                    self.kill(proc)
                    raise BrokerExited(f"process {other.pid} exited with {other.returncode}")
            if time.monotonic() >= deadline:
                self.kill(proc)
                return None
            time.sleep(POLL_INTERVAL_S)

    def _forget(self, proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ValueError):
            self._live.remove(proc)


class BrokerExited(RuntimeError):
    """The broker under test died while a tool was talking to it."""
