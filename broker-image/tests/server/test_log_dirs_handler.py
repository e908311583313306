"""DescribeLogDirs through the dispatcher: every configured log dir with the partition
logs it holds and their sizes on disk, the filesystem's space from v4, a null topic list
meaning every partition, and KAFKA_STORAGE_ERROR for a directory that cannot be read."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from broker_calls import call as call_broker
from broker_calls import create_topic, loaded
from kio.schema.errors import ErrorCode
from strom.protocol import apis
from strom.records import batches
from strom.server import broker as broker_module
from strom.storage import validator

NOW = 1_700_000_000_000
RULES = validator.Rules(max_message_bytes=1_000_000, compacted=False, compression_type="producer")


@pytest.fixture
async def two_dirs(tmp_path: Path) -> AsyncIterator[broker_module.Broker]:
    """A broker with log dirs a and b, and topic "orders" of 4 partitions: 2 in each."""
    dirs = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    server = await loaded(tmp_path / "a", **{"log.dirs": dirs})
    await create_topic(server, "orders", 4)
    for index in range(4):
        partition = server.context.partition("orders", index)
        assert partition is not None
        data = bytearray(batches.build_batch([(None, b"x" * 100, [], NOW)] * (index + 1)))
        outcome = partition.append_as_leader(
            data, acks=1, rules=RULES, min_insync_replicas=1, transactional=False, now_ms=NOW
        )
        assert outcome.error is None
    yield server
    server.close()


async def describe(
    broker: broker_module.Broker, version: int, topics: dict[str, list[int]] | None
) -> Any:
    body = {
        "topics": None
        if topics is None
        else [{"topic": name, "partitions": indexes} for name, indexes in topics.items()]
    }
    return await call_broker(broker, apis.ApiKey.DESCRIBE_LOG_DIRS, version, body)


def on_disk(log_dir: Path) -> dict[tuple[str, int], int]:
    """(topic, partition) -> bytes of its segment files, of the "orders" partition
    directories in `log_dir`."""
    sizes = {}
    for entry in log_dir.iterdir():
        if entry.is_dir() and entry.name.startswith("orders-"):
            key = ("orders", int(entry.name.rsplit("-", 1)[1]))
            sizes[key] = sum(f.stat().st_size for f in entry.glob("*.log"))
    return sizes


def listed(result: Any) -> dict[tuple[str, int], int]:
    return {
        (str(topic.name), int(p.partition_index)): int(p.partition_size)
        for topic in result.topics
        for p in topic.partitions
    }


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
async def test_every_log_dir_lists_its_partitions_with_their_size(
    two_dirs: broker_module.Broker, tmp_path: Path, version: int
) -> None:
    response = await describe(two_dirs, version, None)
    by_dir = {result.log_dir: result for result in response.results}
    assert set(by_dir) == {str(tmp_path / "a"), str(tmp_path / "b")}
    everything: dict[tuple[str, int], int] = {}
    for name in ("a", "b"):
        result = by_dir[str(tmp_path / name)]
        assert result.error_code == ErrorCode.none
        sizes = listed(result)
        assert len(sizes) == 2  # the partitions are spread over the dirs
        assert {k: v for k, v in sizes.items() if k[0] == "orders"} == on_disk(tmp_path / name)
        for topic in result.topics:
            for p in topic.partitions:
                assert (p.offset_lag, p.is_future_key) == (0, False)
        if version >= 4:
            usage = shutil.disk_usage(tmp_path / name)
            assert result.total_bytes == usage.total
            assert 0 < result.usable_bytes <= usage.total
        everything |= sizes
    assert sorted(everything) == [("orders", i) for i in range(4)]
    assert all(size > 0 for size in everything.values())


async def test_only_the_partitions_asked_for_are_listed(
    two_dirs: broker_module.Broker, tmp_path: Path
) -> None:
    response = await describe(two_dirs, 4, {"orders": [1, 3, 9], "missing": [0]})
    found: dict[tuple[str, int], int] = {}
    for result in response.results:
        found |= listed(result)
        # a dir holding none of them lists no topic at all, not an empty one
        assert all(topic.partitions for topic in result.topics)
    assert sorted(found) == [("orders", 1), ("orders", 3)]


async def test_an_unreadable_log_dir_answers_a_storage_error(
    two_dirs: broker_module.Broker, tmp_path: Path
) -> None:
    os.rename(tmp_path / "b", tmp_path / "b-unplugged")
    try:
        response = await describe(two_dirs, 4, None)
    finally:
        os.rename(tmp_path / "b-unplugged", tmp_path / "b")
    by_dir = {result.log_dir: result for result in response.results}
    failed = by_dir[str(tmp_path / "b")]
    assert (failed.error_code, failed.topics) == (ErrorCode.kafka_storage_error, ())
    assert by_dir[str(tmp_path / "a")].error_code == ErrorCode.none
    assert len(listed(by_dir[str(tmp_path / "a")])) == 2


# --- AlterReplicaLogDirs ---------------------------------------------------------------


async def alter(broker: broker_module.Broker, moves: dict[str, list[int]], path: str) -> Any:
    body = {
        "dirs": [
            {
                "path": path,
                "topics": [{"name": name, "partitions": p} for name, p in moves.items()],
            }
        ]
    }
    response = await call_broker(broker, apis.ApiKey.ALTER_REPLICA_LOG_DIRS, 2, body)
    return {
        (str(t.topic_name), int(p.partition_index)): p.error_code
        for t in response.results
        for p in t.partitions
    }


async def moved_to(broker: broker_module.Broker, key: tuple[str, int], path: Path) -> None:
    deadline = asyncio.get_running_loop().time() + 10.0
    while broker.replicas.logs.log_dir_of(*key) != path or broker.replicas.partition(*key) is None:
        assert asyncio.get_running_loop().time() < deadline, f"{key} not moved to {path}"
        await asyncio.sleep(0.01)


async def test_a_replica_moves_to_another_log_dir_with_its_records(
    two_dirs: broker_module.Broker, tmp_path: Path
) -> None:
    logs = two_dirs.replicas.logs
    source = logs.log_dir_of("orders", 0)
    assert source is not None
    target = next(d for d in logs.log_dirs if d != source)
    before = two_dirs.replicas.partition("orders", 0)
    assert before is not None
    end, size = before.log_end_offset, before.log.size_bytes
    assert await alter(two_dirs, {"orders": [0]}, str(target)) == {("orders", 0): ErrorCode.none}
    await moved_to(two_dirs, ("orders", 0), target)
    after = two_dirs.replicas.partition("orders", 0)
    assert after is not None and after.log_end_offset == end and after.log.size_bytes == size
    assert not (source / "orders-0").exists() and (target / "orders-0").is_dir()
    response = await describe(two_dirs, 4, {"orders": [0]})
    assert {r.log_dir: listed(r) for r in response.results}[str(target)] == {("orders", 0): size}
    # where it already is: nothing to do
    assert await alter(two_dirs, {"orders": [0]}, str(target)) == {("orders", 0): ErrorCode.none}
    assert two_dirs.replicas.partition("orders", 0) is after


async def test_alter_replica_log_dirs_refusals(
    two_dirs: broker_module.Broker, tmp_path: Path
) -> None:
    assert await alter(two_dirs, {"orders": [1]}, str(tmp_path / "elsewhere")) == {
        ("orders", 1): ErrorCode.log_dir_not_found
    }
    assert await alter(two_dirs, {"orders": [9], "missing": [0]}, str(tmp_path / "a")) == {
        ("orders", 9): ErrorCode.replica_not_available,
        ("missing", 0): ErrorCode.replica_not_available,
    }
    os.rename(tmp_path / "b", tmp_path / "b-unplugged")
    try:
        answer = await alter(two_dirs, {"orders": [1]}, str(tmp_path / "b"))
    finally:
        os.rename(tmp_path / "b-unplugged", tmp_path / "b")
    assert answer == {("orders", 1): ErrorCode.kafka_storage_error}


async def test_a_moved_replica_is_found_in_its_new_dir_after_a_restart(tmp_path: Path) -> None:
    dirs = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    first = await loaded(tmp_path / "a", **{"log.dirs": dirs})
    await create_topic(first, "kept", 1)
    partition = first.context.partition("kept", 0)
    assert partition is not None
    data = bytearray(batches.build_batch([(None, b"y" * 50, [], NOW)] * 3))
    partition.append_as_leader(
        data, acks=1, rules=RULES, min_insync_replicas=1, transactional=False, now_ms=NOW
    )
    source = first.replicas.logs.log_dir_of("kept", 0)
    target = tmp_path / ("b" if source == tmp_path / "a" else "a")
    assert await alter(first, {"kept": [0]}, str(target)) == {("kept", 0): ErrorCode.none}
    await moved_to(first, ("kept", 0), target)
    first.close()
    second = await loaded(tmp_path / "a", **{"log.dirs": dirs})
    try:
        assert second.replicas.logs.log_dir_of("kept", 0) == target
        reopened = second.context.partition("kept", 0)
        assert reopened is not None and reopened.log_end_offset == 3
    finally:
        second.close()
