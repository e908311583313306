"""The one clock of a broker: wall time, monotonic time and sleeping, as one object.

The broker makes a `SystemClock` and passes it down; nothing else reads `time` or
sleeps on its own, so a simulation can drive every timer with a clock of its own.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, retention)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (timeouts, deadlines)."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
