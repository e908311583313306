"""A partition this broker leads: its log, leader epoch, high watermark, and the fetchers
waiting for new data.

On a single node the in-sync replica set is the leader alone, so the high watermark
moves to the log end offset on every append. Followers and ISR changes land here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from strom.records import batches as record_batches
from strom.storage import partition_log


class Partition:
    def __init__(self, topic: str, index: int, log: partition_log.PartitionLog) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = 0
        self._waiters: set[asyncio.Future[None]] = set()
        log.update_high_watermark(log.log_end_offset)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def append(
        self,
        data: bytearray,
        headers: list[record_batches.BatchHeader],
        now_ms: int,
    ) -> partition_log.AppendResult:
        result = self.log.append(data, headers, leader_epoch=self.leader_epoch, now_ms=now_ms)
        if not result.duplicate:
            self.log.update_high_watermark(self.log.log_end_offset)
            self._wake_waiters()
        return result

    def watch(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.add(waiter)

    def unwatch(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)

    def _wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def wait_for_any(partitions: Iterable[Partition]) -> asyncio.Future[None]:
    """A future resolved by the next append to any of `partitions`.

    The caller must call `release` with the same partitions when done waiting.
    """
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for partition in partitions:
        partition.watch(waiter)
    return waiter


def release(partitions: Iterable[Partition], waiter: asyncio.Future[None]) -> None:
    for partition in partitions:
        partition.unwatch(waiter)
