"""Waiting on a condition with a deadline: the one way whole-system tests wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.05


def wait_until(condition: Callable[[], T], timeout: float, what: str | Callable[[], str]) -> T:
    """Poll `condition` until it returns something true, and return that.

    On the deadline, fail with `what` (a string, or a callable describing the state then).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            detail = what() if callable(what) else what
            raise AssertionError(f"not within {timeout:.0f}s: {detail}")
        time.sleep(POLL_S)
