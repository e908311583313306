"""Bulk partition creation: batches, crash safety, and running beside an event loop."""

import asyncio
import os
from pathlib import Path

import pytest
from strom.storage import log_config, log_manager, partition_log

CONFIG = log_config.LogConfig()


def config_for(topic: str) -> log_config.LogConfig:
    return CONFIG


def test_create_many_spreads_partitions_and_makes_only_the_log_file(
    tmp_path, clock, monkeypatch
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = log_manager.LogManager(dirs, clock)
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))
    keys = [("bulk", p) for p in range(1000)]
    logs = manager.create_many(keys, config_for, batch_size=100)
    assert [log.directory.name for log in logs] == [f"bulk-{p}" for p in range(1000)]
    assert [manager.get(*key) for key in keys] == logs
    assert len(list(dirs[0].iterdir())) == len(list(dirs[1].iterdir())) == 500
    assert sorted(os.listdir(dirs[0] / "bulk-0")) == ["00000000000000000000.log"]
    # One fsync per log dir and batch, none per partition.
    assert len(fsyncs) <= 2 * 10
    # Existing partitions are returned, not made again.
    assert manager.create_many([("bulk", 3), ("bulk", 1000)], config_for)[0] is logs[3]
    manager.close_all()


def test_a_crash_midway_leaves_whole_partitions_and_the_rest_can_be_created(
    tmp_path, clock, harness, monkeypatch
) -> None:
    manager = log_manager.LogManager([tmp_path], clock)
    real_make = log_manager._make_partition_dir
    made = []

    def crash_after_50(path: Path) -> None:
        if len(made) == 50:
            # The process dies inside the creation of the 51st partition.
            (path.parent / f"{path.name}.0123abcd{log_manager.CREATING_DIR_SUFFIX}").mkdir()
            raise SystemExit("crash")
        made.append(path)
        real_make(path)

    monkeypatch.setattr(log_manager, "_make_partition_dir", crash_after_50)
    with pytest.raises(SystemExit):
        manager.create_many([("t", p) for p in range(100)], config_for, batch_size=30)
    monkeypatch.undo()
    for _, log in manager:
        log.close_handles()  # the crash: nothing closed cleanly
    restarted = log_manager.LogManager([tmp_path], clock)
    restarted.load_all(config_for)
    assert sorted(p for (_, p), _ in restarted) == list(range(50))
    assert not list(tmp_path.glob(f"*{log_manager.CREATING_DIR_SUFFIX}"))
    logs = restarted.create_many([("t", p) for p in range(100)], config_for)
    for log in logs:
        harness.append(log)
    assert all(log.log_end_offset == 1 for log in logs)
    restarted.close_all()


def test_create_many_in_a_thread_leaves_the_event_loop_serving(tmp_path, clock, harness) -> None:
    manager = log_manager.LogManager([tmp_path], clock)
    served = manager.get_or_create("served", 0, CONFIG)

    async def scenario() -> tuple[int, list[partition_log.PartitionLog]]:
        creating = asyncio.create_task(
            asyncio.to_thread(manager.create_many, [("bulk", p) for p in range(3000)], config_for)
        )
        appends = 0
        while not creating.done():
            harness.append(served, [b"while creating"])
            assert harness.offsets_read(served, appends) == [appends]
            appends += 1
            await asyncio.sleep(0.001)
        return appends, await creating

    appends, logs = asyncio.run(scenario())
    assert len(logs) == 3000
    assert appends > 1
    assert len(manager) == 3001
    manager.close_all()
