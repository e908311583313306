"""The runtime's ordering of `__consumer_offsets` writes, and the OffsetsLog adapter over
a broker's partitions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import pytest
from kio.schema.errors import ErrorCode
from strom.coordinator import group as group_model
from strom.coordinator import groups, offsets_log, offsets_records, runtime
from strom.records import batches

T0 = 1_000_000
Entry = tuple[bytes, bytes | None]


class SlowLog:
    """One partition whose appends complete only when the test releases them."""

    def __init__(self) -> None:
        self.started: list[list[Entry]] = []
        self.written: list[Entry] = []
        self.releases: list[asyncio.Future[None]] = []

    def partition_count(self) -> int | None:
        return 1

    async def ensure_created(self) -> int:
        return 1

    async def append(
        self,
        partition: int,
        entries: Sequence[Entry],
        now_ms: int,
        producer: offsets_log.Producer | None = None,
    ) -> None:
        self.started.append(list(entries))
        release: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.releases.append(release)
        await release
        self.written.extend(entries)

    def read(self, partition: int) -> Iterator[Entry]:
        return iter(list(self.written))

    def read_batches(self, partition: int) -> Iterator[offsets_log.StoredBatch]:
        return (offsets_log.StoredBatch([entry]) for entry in self.read(partition))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def commit(c: groups.GroupCoordinator, offset: int) -> asyncio.Task[object]:
    return asyncio.get_running_loop().create_task(
        c.commit_offsets(
            group_id="tools",
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            offsets=[("t", 0, offset, -1, "")],
            now_ms=T0,
        )
    )


async def test_commits_of_one_group_land_in_order_and_show_once_written() -> None:
    store = SlowLog()
    c = groups.GroupCoordinator(group_model.CoordinatorConfig(), store)
    first, second = commit(c, 1), commit(c, 2)
    await settle()
    assert len(store.started) == 1, "the second write waits for the first"
    assert c.fetch_offsets("tools", [("t", 0)]) == {("t", 0): None}, "nothing before it is written"
    store.releases[0].set_result(None)
    assert await first == {("t", 0): ErrorCode.none}
    committed = c.fetch_offsets("tools", [("t", 0)])[("t", 0)]
    assert committed is not None and committed.offset == 1
    await settle()
    assert len(store.started) == 2
    store.releases[1].set_result(None)
    assert await second == {("t", 0): ErrorCode.none}
    committed = c.fetch_offsets("tools", [("t", 0)])[("t", 0)]
    assert committed is not None and committed.offset == 2
    values = [offsets_records.parse_offset_value(v).offset for _, v in store.written if v]
    assert values == [1, 2]


async def test_a_cancelled_request_does_not_cancel_its_write() -> None:
    store = SlowLog()
    c = groups.GroupCoordinator(group_model.CoordinatorConfig(), store)
    request = commit(c, 7)
    await settle()
    request.cancel()
    await settle()
    store.releases[0].set_result(None)
    await c.drain()
    committed = c.fetch_offsets("tools", [("t", 0)])[("t", 0)]
    assert committed is not None and committed.offset == 7, "memory follows the log"


async def test_delete_groups_tombstones_what_earlier_writes_committed() -> None:
    store = SlowLog()
    c = groups.GroupCoordinator(group_model.CoordinatorConfig(), store)
    first = commit(c, 1)
    await settle()
    store.releases[0].set_result(None)
    await first
    second = commit(c, 2)  # ("t", 0) again, and still in flight when the delete comes
    await settle()
    deleting = asyncio.get_running_loop().create_task(c.delete_groups(["tools"], T0))
    await settle()
    store.releases[1].set_result(None)
    await second
    await settle()
    store.releases[2].set_result(None)
    assert await deleting == {"tools": ErrorCode.none}
    assert "tools" not in c.groups
    replayed: dict[str, group_model.Group] = {}
    runtime.replay(replayed, store.written, T0)
    assert replayed == {}, "the log says what memory says: the group is gone"


def test_adapter_appends_batches_and_reads_the_records_back() -> None:
    logs: dict[int, bytearray] = {0: bytearray(), 1: bytearray()}
    created: list[int] = []

    def append_batch(
        partition: int, data: bytearray, headers: list[batches.BatchHeader], now_ms: int
    ) -> None:
        assert [h.records_count for h in headers] == [2]
        logs[partition] += data

    def create() -> int:
        created.append(2)
        return 2

    adapter = offsets_log.PartitionsOffsetsLog(
        partition_count=lambda: 2 if created else None,
        create=create,
        append_batch=append_batch,
        read_chunks=lambda partition: [bytes(logs[partition])],
    )
    assert adapter.partition_count() is None
    assert asyncio.run(adapter.ensure_created()) == 2
    entries: list[Entry] = [(b"k1", b"v1"), (b"k2", None)]
    asyncio.run(adapter.append(1, entries, T0))
    assert list(adapter.read(1)) == entries
    assert list(adapter.read(0)) == []


def test_adapter_turns_storage_errors_into_store_failed() -> None:
    async def full(
        partition: int, data: bytearray, headers: list[batches.BatchHeader], now_ms: int
    ) -> None:
        raise OSError(28, "No space left on device")

    adapter = offsets_log.PartitionsOffsetsLog(
        partition_count=lambda: 1,
        create=lambda: 1,
        append_batch=full,
        read_chunks=lambda partition: [],
    )
    with pytest.raises(offsets_log.StoreFailed, match="No space left"):
        asyncio.run(adapter.append(0, [(b"k", b"v")], T0))
