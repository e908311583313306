"""The time the channel needs, as an object the broker or a simulation hands in."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock: time.monotonic and asyncio.sleep."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
