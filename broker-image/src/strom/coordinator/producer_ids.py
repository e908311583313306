"""Producer ids for idempotent producers, handed out from blocks the controller allocates.

Kafka's ProducerIdManager: the controller records one ProducerIdsRecord per block of
1,000 ids, so InitProducerId costs a metadata write once per thousand producers, not
once per producer, and no id is ever handed out twice, across restarts included (ids
left in a block when the broker stops are skipped, as in Kafka).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class ProducerIdManager:
    def __init__(self, allocate_block: Callable[[], Awaitable[range]]) -> None:
        self._allocate_block = allocate_block
        self._block: range = range(0)
        self._next = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        """A producer id never handed out before; raises what the allocation raises
        (the controller's MetadataError) when a new block cannot be had."""
        async with self._lock:
            if self._next >= self._block.stop:
                self._block = await self._allocate_block()
                self._next = self._block.start
            producer_id = self._next
            self._next += 1
            return producer_id
