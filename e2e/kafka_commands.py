"""Kafka's commands as a user runs them: the scripts `make kafka-tools` writes
(e2e/peers/kafka_tools.sh), here into a directory the test session owns so they run this
checkout's jars. Short commands run to completion; Connect workers, MirrorMaker 2 and
Streams applications run as long-lived processes stopped with SIGTERM, as Ctrl-C does.
Their configs start from the files the project ships in config/, as Kafka's do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from e2e_records import read_partition
from java_peers import PEERS_DIR, run_peers_script
from waiting import wait_until

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"
CONNECT_FILE_JAR = PEERS_DIR / "lib" / "connect-file-4.3.1.jar"
STOP_TIMEOUT_S = 60.0
LOG_TAIL_CHARS = 6000


def file_lines(path: Path) -> list[str]:
    """The lines of a file a file connector reads or writes (none before it exists)."""
    return path.read_text().splitlines() if path.exists() else []


def connect_payloads(bootstrap: str, topic: str) -> list[str]:
    """The string payloads of a topic's records (partition 0) as Connect's JsonConverter
    writes them: {"schema":{"type":"string","optional":false},"payload":...}."""
    payloads = []
    for _, _, value in read_partition(bootstrap, topic):
        assert value is not None
        envelope = json.loads(value)
        assert envelope["schema"] == {"type": "string", "optional": False}, envelope
        payloads.append(envelope["payload"])
    return payloads


def shipped_properties(name: str, **overrides: str) -> dict[str, str]:
    """config/NAME's settings (simple `key=value` lines), some replaced or added."""
    settings = {}
    for line in (CONFIG_DIR / name).read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            settings[key.strip()] = value.strip()
    return settings | overrides


def write_properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


class KafkaCommands:
    """The scripts in `bin_dir`: kafka-topics.sh, connect-standalone.sh, ..."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir

    @classmethod
    def install(cls, bin_dir: Path) -> KafkaCommands:
        """`e2e/peers/kafka_tools.sh BIN_DIR` (resolves the jars first if needed), or raise."""
        run_peers_script("kafka_tools.sh", str(bin_dir))
        return cls(bin_dir)

    def path(self, name: str) -> str:
        return str(self.bin_dir / name)

    def run(
        self,
        name: str,
        *args: str,
        stdin: str = "",
        timeout: float = 120.0,
        check: bool = True,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        argv = [self.path(name), *args]
        done = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{name} exited with {done.returncode}\nargv: {argv}\n"
                f"--- stdout ---\n{done.stdout[-4000:]}\n--- stderr ---\n{done.stderr[-8000:]}"
            )
        return done

    def start(self, name: str, *args: str, log_path: Path, cwd: Path) -> Service:
        service = Service([self.path(name), *args], log_path, cwd)
        service.start()
        return service


class Service:
    """A long-lived Kafka command (a Connect worker, MirrorMaker 2, a Streams app) with its
    stdout and stderr in `log_path` (one file per start), in its own process group."""

    def __init__(self, argv: list[str], log_path: Path, cwd: Path) -> None:
        self.argv = argv
        self.log_path = log_path
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        assert not self.running, f"{self.argv[0]} is already running"
        self.starts += 1
        log = self._log_file()
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                start_new_session=True,
            )

    def wait_for(
        self, condition: Callable[[], object], timeout: float, what: Callable[[], str]
    ) -> None:
        """Wait until `condition()` is true while the process runs; fail at once if it
        exits, or at the deadline, with `what()` and the process's log."""

        def check() -> object:
            assert self.running, f"exited while waiting: {what()}\n{self.describe()}"
            return condition()

        wait_until(check, timeout, lambda: f"{what()}\n{self.describe()}")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (the JVM's shutdown hooks run: a Connect worker commits its offsets and
        leaves its group); SIGKILL and fail if it does not exit in time. The exit status."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc is not None else 0
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.argv[0]} did not exit within {timeout:.0f}s of SIGTERM; killed\n"
                f"{self.log_tail()}"
            ) from None

    def kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def log_text(self) -> str:
        """What the current (or last) run printed."""
        path = self._log_file()
        return path.read_bytes().decode("utf-8", "replace") if path.exists() else ""

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        path = self._log_file()
        if not path.exists():
            return "(no output)"
        text = path.read_bytes()[-chars:].decode("utf-8", "replace")
        return f"--- {path.name} ---\n{text or '(no output)'}"

    def describe(self) -> str:
        state = "running" if self.running else f"exited {self.proc and self.proc.returncode}"
        return f"{Path(self.argv[0]).name} ({state})\n{self.log_tail()}"

    def _log_file(self) -> Path:
        return self.log_path.with_suffix(f".{self.starts}.log")
