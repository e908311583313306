"""The storage the coordinator's runtime writes `__consumer_offsets` through: a small
asynchronous interface, and an adapter over plain callables for a broker's partitions.

The runtime is the only caller. It never has two appends of one group in flight (its
writes are ordered per group), but appends of different groups may overlap, each
landing whole as one batch.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Protocol

from strom.records import batches

Entry = tuple[bytes, bytes | None]


class StoreFailed(Exception):
    """`__consumer_offsets` could not take a write (a full disk, no leader, too few
    in-sync replicas): nothing the write carried may be acknowledged."""


class OffsetsLog(Protocol):
    def partition_count(self) -> int | None:
        """How many partitions `__consumer_offsets` has; None while it does not exist."""
        ...

    async def ensure_created(self) -> int:
        """Create `__consumer_offsets` if needed (idempotent); returns its partition
        count. Raises StoreFailed when it cannot be created."""
        ...

    async def append(self, partition: int, entries: Sequence[Entry], now_ms: int) -> None:
        """Append `(key, value)` records (a None value is a tombstone) as one batch.
        Returns once they are committed (today: written; with replication: below the
        high watermark); raises StoreFailed if they are not."""
        ...

    def read(self, partition: int) -> Iterator[Entry]:
        """Every keyed record of a partition up to its high watermark, in log order."""
        ...


BatchAppend = Callable[[int, bytearray, list[batches.BatchHeader], int], Awaitable[object] | object]


class PartitionsOffsetsLog:
    """OffsetsLog over a broker's own partitions, given as callables:

    - `partition_count()`: the topic's partition count, None if it does not exist;
    - `create()`: create the topic (idempotent) and return its partition count (or an
      awaitable of it);
    - `append_batch(partition, data, headers, now_ms)`: append one validated batch,
      raising OSError on a storage failure; it may return an awaitable that completes
      when the batch is committed;
    - `read_chunks(partition)`: buffers of whole batches from the log start up to the
      high watermark.
    """

    def __init__(
        self,
        *,
        partition_count: Callable[[], int | None],
        create: Callable[[], int | Awaitable[int]],
        append_batch: BatchAppend,
        read_chunks: Callable[[int], Iterable[bytes | bytearray | memoryview]],
    ) -> None:
        self._partition_count = partition_count
        self._create = create
        self._append_batch = append_batch
        self._read_chunks = read_chunks

    def partition_count(self) -> int | None:
        return self._partition_count()

    async def ensure_created(self) -> int:
        try:
            created = self._create()
            if inspect.isawaitable(created):
                created = await created
            return created
        except OSError as error:
            raise StoreFailed(f"cannot create __consumer_offsets: {error}") from error

    async def append(self, partition: int, entries: Sequence[Entry], now_ms: int) -> None:
        data = bytearray(batches.build_batch([(key, value, [], now_ms) for key, value in entries]))
        headers = batches.validate_produce_batches(memoryview(data), len(data))
        try:
            pending = self._append_batch(partition, data, headers, now_ms)
            if inspect.isawaitable(pending):
                await pending
        except OSError as error:
            raise StoreFailed(f"__consumer_offsets-{partition}: {error}") from error

    def read(self, partition: int) -> Iterator[Entry]:
        for chunk in self._read_chunks(partition):
            view = memoryview(chunk)
            for header in batches.iter_batches(view):
                if header.is_control:
                    continue  # transaction markers: their keys are no offset records
                batch = view[header.position : header.position + header.size]
                for record in batches.iter_records(batch):
                    if record.key is not None:
                        yield record.key, record.value
