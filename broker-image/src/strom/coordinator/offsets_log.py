"""The storage the coordinator's runtime writes `__consumer_offsets` through: a small
asynchronous interface, and an adapter over plain callables for a broker's partitions.

The runtime is the only caller. It never has two appends of one group in flight (its
writes are ordered per group), but appends of different groups may overlap, each
landing whole as one batch.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode

from strom.records import batches, control

Entry = tuple[bytes, bytes | None]
# (producer id, producer epoch) of a transactional write
Producer = tuple[int, int]


@dataclasses.dataclass(frozen=True, slots=True)
class StoredBatch:
    """One batch of the log as the replay needs it: its keyed records and, for a
    transaction's batches, the producer and (for a marker) whether it commits."""

    entries: list[Entry]
    transactional_producer: int | None = None
    marker: control.EndTxnMarker | None = None


class StoreFailed(Exception):
    """An internal topic (`__consumer_offsets`, `__transaction_state`) could not take a
    write (a full disk, no leader, too few in-sync replicas): nothing the write carried
    may be acknowledged. ``error``: the append's error, as Kafka's coordinators map it."""

    def __init__(
        self, message: str, error: ErrorCode = ErrorCode.coordinator_not_available
    ) -> None:
        super().__init__(message)
        self.error = error


class OffsetsLog(Protocol):
    def partition_count(self) -> int | None:
        """How many partitions `__consumer_offsets` has; None while it does not exist."""
        ...

    async def ensure_created(self) -> int:
        """Create `__consumer_offsets` if needed (idempotent); returns its partition
        count. Raises StoreFailed when it cannot be created."""
        ...

    async def append(
        self,
        partition: int,
        entries: Sequence[Entry],
        now_ms: int,
        producer: Producer | None = None,
    ) -> None:
        """Append `(key, value)` records (a None value is a tombstone) as one batch, a
        transactional one of `producer` if given. Returns once they are committed (below
        the high watermark); raises StoreFailed if they are not."""
        ...

    def read(self, partition: int) -> Iterator[Entry]:
        """Every keyed record of a partition's data batches, in log order."""
        ...

    def read_batches(self, partition: int) -> Iterator[StoredBatch]:
        """The partition's batches in log order, markers included."""
        ...


BatchAppend = Callable[[int, bytearray, list[batches.BatchHeader], int], Awaitable[object] | object]


class PartitionsOffsetsLog:
    """OffsetsLog over a broker's own partitions, given as callables:

    - `partition_count()`: the topic's partition count, None if it does not exist;
    - `create()`: create the topic (idempotent) and return its partition count (or an
      awaitable of it);
    - `append_batch(partition, data, headers, now_ms)`: append one validated batch,
      raising OSError on a storage failure (or StoreFailed); it may return an awaitable
      that completes when the batch is committed;
    - `read_chunks(partition)`: buffers of whole batches from the log start up to the
      high watermark.
    """

    def __init__(
        self,
        *,
        topic: str = "__consumer_offsets",
        partition_count: Callable[[], int | None],
        create: Callable[[], int | Awaitable[int]],
        append_batch: BatchAppend,
        read_chunks: Callable[[int], Iterable[bytes | bytearray | memoryview]],
    ) -> None:
        self._topic = topic
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
            raise StoreFailed(f"cannot create {self._topic}: {error}") from error

    async def append(
        self,
        partition: int,
        entries: Sequence[Entry],
        now_ms: int,
        producer: Producer | None = None,
    ) -> None:
        # A transactional batch of the coordinator carries no sequence: it takes no part
        # in idempotence (Strom's producer state would take a repeated one for a retry).
        producer_id, producer_epoch = producer or (batches.NO_PRODUCER_ID, -1)
        data = bytearray(
            batches.build_batch(
                [(key, value, [], now_ms) for key, value in entries],
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                is_transactional=producer is not None,
            )
        )
        headers = batches.validate_produce_batches(memoryview(data), len(data))
        try:
            pending = self._append_batch(partition, data, headers, now_ms)
            if inspect.isawaitable(pending):
                await pending
        except OSError as error:
            raise StoreFailed(
                f"{self._topic}-{partition}: {error}", ErrorCode.kafka_storage_error
            ) from error

    def read(self, partition: int) -> Iterator[Entry]:
        for stored in self.read_batches(partition):
            yield from stored.entries

    def read_batches(self, partition: int) -> Iterator[StoredBatch]:
        for chunk in self._read_chunks(partition):
            view = memoryview(chunk)
            for header in batches.iter_batches(view):
                batch = view[header.position : header.position + header.size]
                if header.is_control:
                    try:
                        marker = control.parse_end_txn_marker(batch)
                    except batches.CorruptRecordError:
                        marker = None
                    if marker is not None:
                        yield StoredBatch([], header.producer_id, marker)
                    continue
                entries = [
                    (record.key, record.value)
                    for record in batches.iter_records(batch)
                    if record.key is not None
                ]
                yield StoredBatch(entries, header.producer_id if header.is_transactional else None)
