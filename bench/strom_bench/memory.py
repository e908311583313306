"""Resident memory of a broker process: VmRSS from /proc/PID/status, once or sampled."""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType

MIB = 1024 * 1024
SAMPLE_INTERVAL_S = 0.2


def parse_vm_rss(status_text: str) -> int:
    """VmRSS in bytes from the text of /proc/PID/status (the kernel reports kB = KiB)."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            fields = line.split()
            if len(fields) >= 3 and fields[2] == "kB":
                return int(fields[1]) * 1024
    raise ValueError("no VmRSS line in /proc/PID/status")


def rss_bytes(pid: int) -> int:
    return parse_vm_rss(Path(f"/proc/{pid}/status").read_text())


def rss_mib(pid: int) -> float:
    return rss_bytes(pid) / MIB


class PeakRssSampler:
    """Samples VmRSS in a background thread while the `with` block runs; `peak_mib` after.

    The thread stops when the block ends (or when the process is gone), so it never
    outlives the workload it watches.
    """

    def __init__(self, pid: int, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name=f"rss-{pid}", daemon=True)

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / MIB

    def __enter__(self) -> PeakRssSampler:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(10.0)
        self._take()

    def _sample(self) -> None:
        while not self._stop.is_set():
            if not self._take():
                return
            self._stop.wait(self.interval_s)

    def _take(self) -> bool:
        try:
            self.peak_bytes = max(self.peak_bytes, rss_bytes(self.pid))
        except (OSError, ValueError):  # the process is gone (a zombie has no VmRSS)
            return False
        return True
