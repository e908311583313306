"""The time the channel needs: the broker's one clock (`strom.clock`), handed in."""

from __future__ import annotations

from strom.clock import Clock, SystemClock

__all__ = ["Clock", "SystemClock"]
