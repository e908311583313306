"""Flow control of client connections, as its own objects (uvicorn's FlowControl).

`FlowControl` is one connection's: reading is paused while any reason to pause holds
(too many frames queued, no request memory) and resumed when none does; `can_write`
is clear while the transport's buffer is above its high-water mark.

`RequestMemory` is shared by every connection: Kafka's `queued.max.request.bytes`
memory pool. A connection reserves a request's whole size as soon as its size prefix
is read, before reading its body; while the pool is exhausted the connection stops
reading and waits, in arrival order, for requests to finish. As in Kafka's pool (not
strict), a reservation succeeds while anything is left, so one request may overshoot:
the bytes held stay below the limit plus one `socket.request.max.bytes`, and a request
larger than the limit still gets through once the others finish. Only whole-request
reservations are made, so connections never hold half-read requests waiting on each
other.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Hashable

# Reasons for a connection to stop reading.
TOO_MANY_QUEUED = "queued"
NO_MEMORY = "memory"


class FlowControl:
    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._read_pauses: set[str] = set()
        self.can_write = asyncio.Event()
        self.can_write.set()

    @property
    def reading_paused(self) -> bool:
        return bool(self._read_pauses)

    def is_paused_for(self, reason: str) -> bool:
        return reason in self._read_pauses

    def pause_reading(self, reason: str) -> None:
        if not self._read_pauses:
            self._transport.pause_reading()
        self._read_pauses.add(reason)

    def resume_reading(self, reason: str) -> None:
        if reason not in self._read_pauses:
            return
        self._read_pauses.discard(reason)
        if not self._read_pauses and not self._transport.is_closing():
            self._transport.resume_reading()

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()


class RequestMemory:
    """Bytes of requests being read or handled, across all connections, up to a limit.

    A limit below 1 means unbounded (Kafka's -1).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        # waiter key -> (bytes wanted, called once they are reserved), oldest first
        self._waiting: collections.OrderedDict[Hashable, tuple[int, Callable[[], None]]] = (
            collections.OrderedDict()
        )

    def _available(self) -> bool:
        return self.limit < 1 or self.used < self.limit

    def try_reserve(self, size: int) -> bool:
        if self._waiting or not self._available():  # no overtaking those already waiting
            return False
        self.used += size
        return True

    def wait(self, key: Hashable, size: int, on_reserved: Callable[[], None]) -> None:
        """Reserve `size` once memory is released, then call `on_reserved`."""
        self._waiting[key] = (size, on_reserved)

    def cancel(self, key: Hashable) -> None:
        self._waiting.pop(key, None)

    def release(self, size: int) -> None:
        self.used -= size
        while self._waiting and self._available():
            _, (wanted, on_reserved) = self._waiting.popitem(last=False)
            self.used += wanted
            on_reserved()

    @property
    def waiting(self) -> int:
        return len(self._waiting)
