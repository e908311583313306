"""Runs the Java peers (e2e/peers): the Java client programs and Kafka's own CLI tools."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

PEERS_DIR = Path(__file__).resolve().parent / "peers"
# Kafka's tools and clients log at WARN, as the `make kafka-tools` commands do.
LOG4J_OPTION = f"-Dlog4j2.configurationFile={PEERS_DIR / 'log4j2.xml'}"
INSTALL_TIMEOUT_S = 600.0


def run_peers_script(script: str, *args: str) -> None:
    """`bash e2e/peers/SCRIPT ARGS` (idempotent set-up, fast when done), or raise."""
    done = subprocess.run(
        ["bash", str(PEERS_DIR / script), *args],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"e2e/peers/{script} {' '.join(args)} failed ({done.returncode}):\n"
            f"{done.stdout}\n{done.stderr}"
        )


class JavaPeers:
    """`java -cp e2e/peers/target/classes:e2e/peers/lib/* MAIN ARGS`, with a deadline."""

    def __init__(self, java: str) -> None:
        self.java = java
        self.classpath = f"{PEERS_DIR / 'target' / 'classes'}:{PEERS_DIR / 'lib'}/*"

    @classmethod
    def install(cls) -> JavaPeers:
        """Resolve jars and compile the peers if needed (fast when done), or raise."""
        java = shutil.which("java")
        if java is None:
            raise FileNotFoundError("java")
        run_peers_script("install.sh", "java")
        return cls(java)

    def run(
        self, main: str, *args: str, timeout: float = 120.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        argv = [self.java, LOG4J_OPTION, "-cp", self.classpath, main, *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise AssertionError(
                f"{main} exited with {done.returncode}\nargv: {argv}\n"
                f"--- stdout ---\n{done.stdout[-4000:]}\n--- stderr ---\n{done.stderr[-8000:]}"
            )
        return done

    def run_json_lines(self, main: str, *args: str, timeout: float = 120.0) -> list[Any]:
        done = self.run(main, *args, timeout=timeout)
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    def argv(self, main: str, *args: str) -> list[str]:
        """The command line of a Java peer, for tests that run it as a long-lived process.

        C1-only JIT: these short programs start faster and the 2-core CI box stays responsive.
        """
        return [
            self.java,
            "-XX:TieredStopAtLevel=1",
            LOG4J_OPTION,
            "-cp",
            self.classpath,
            main,
            *args,
        ]
