"""The leader's ISR proposals on their way to the controller: Kafka's AlterPartitionManager.

A partition led here proposes a new ISR (a follower caught up, or one stopped catching up);
`IsrUpdates` sends what is pending in one AlterPartition request at a time to the active
controller and hands each partition the answer: the ISR committed, or a refusal after
which the partition's metadata tells what holds and the next check proposes again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from kio.schema.errors import ErrorCode

from strom import tasks
from strom.clock import Clock
from strom.cluster import isr_changes
from strom.replication import partition as partitions

log = logging.getLogger(__name__)

Sender = Callable[[Sequence[isr_changes.IsrChange]], Awaitable[list[isr_changes.IsrOutcome]]]
RETRY_BACKOFF_S = 0.1


class IsrUpdates:
    def __init__(self, send: Sender, clock: Clock) -> None:
        self._send = send
        self._clock = clock
        # (topic, index) -> (partition, its ISR when it proposed, the proposed one)
        self._pending: dict[
            tuple[str, int], tuple[partitions.Partition, tuple[int, ...], tuple[int, ...]]
        ] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # counted for /metrics: ISR changes committed for partitions led here
        self.shrinks = 0
        self.expands = 0

    def propose(self, partition: partitions.Partition, isr: tuple[int, ...]) -> None:
        self._pending[(partition.topic, partition.index)] = (partition, partition.isr, isr)
        self._wake.set()
        if self._task is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # outside the event loop (a unit test): not sent
                return
            self._task = loop.create_task(self._run(), name="isr-updates")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await tasks.cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            pending, self._pending = self._pending, {}
            if not pending:
                continue
            try:
                await self._send_all(list(pending.values()))
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.warning("cannot change the ISR of %d partition(s): %s", len(pending), error)
                for partition, _, _ in pending.values():
                    partition.isr_answered(None, -1, -1)
                await self._clock.sleep(RETRY_BACKOFF_S)

    async def _send_all(
        self, pending: list[tuple[partitions.Partition, tuple[int, ...], tuple[int, ...]]]
    ) -> None:
        changes = []
        sent = []
        for partition, before, isr in pending:
            if partition.topic_id is None or not partition.is_leader:
                partition.isr_answered(None, -1, -1)
                continue
            change = isr_changes.IsrChange(
                partition.topic_id,
                partition.index,
                partition.leader_epoch,
                partition.partition_epoch,
                isr,
            )
            changes.append(change)
            sent.append((partition, before, change))
        if not changes:
            return
        outcomes = await self._send(changes)
        by_key = {(o.topic_id, o.partition): o for o in outcomes}
        for partition, before, change in sent:
            isr = change.new_isr
            outcome = by_key.get((change.topic_id, change.partition))
            if outcome is None or outcome.error != ErrorCode.none:
                name = "no answer" if outcome is None else ErrorCode(outcome.error).name
                log.info("%s: ISR %s refused: %s", partition, list(isr), name)
                partition.isr_answered(None, -1, -1)
                continue
            partition.isr_answered(outcome.isr, outcome.leader_epoch, outcome.partition_epoch)
            self._count(partition, before, outcome.isr)

    def _count(
        self, partition: partitions.Partition, before: tuple[int, ...], after: tuple[int, ...]
    ) -> None:
        if set(after) < set(before):
            self.shrinks += 1
            log.info("%s: ISR shrinks from %s to %s", partition, list(before), list(after))
        elif set(after) > set(before):
            self.expands += 1
            log.info("%s: ISR expands from %s to %s", partition, list(before), list(after))
