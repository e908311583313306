"""What the run ran on, for the report: CPU, memory, OS, disk, load, versions, Strom's commit."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def _first_match(path: str, prefix: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip() if ":" in line else line.split("=", 1)[1]
    except OSError:
        return None
    return None


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}/{five:.2f}/{fifteen:.2f}"


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO_ROOT), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def strom_commit() -> str:
    """The commit Strom was measured at, `+dirty` when the broker's sources have changes."""
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--", "broker-image/src")
    return f"{commit}+dirty" if dirty else commit


def filesystem_of(path: Path) -> str:
    done = subprocess.run(
        ["df", "--output=source,fstype", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    lines = done.stdout.split("\n")
    return " ".join(lines[1].split()) if len(lines) > 1 else "unknown"


def describe(run_dir: Path, java_version: str) -> dict[str, Any]:
    mem_kib = _first_match("/proc/meminfo", "MemTotal:")
    os_name = _first_match("/etc/os-release", "PRETTY_NAME=")
    return {
        "cpu_model": _first_match("/proc/cpuinfo", "model name") or platform.processor(),
        "logical_cpus": os.cpu_count(),
        "memory_gib": round(int(mem_kib.split()[0]) / 1024 / 1024, 1) if mem_kib else None,
        "os": (os_name or platform.system()).strip('"'),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "java": java_version,
        "disk": filesystem_of(run_dir),
        "load_average_start": load_average(),
        "strom_commit": strom_commit(),
    }
