"""The broker's set of partition logs across log directories."""

import errno
import os
from pathlib import Path

import pytest
from strom.storage import log_config, log_manager

CONFIG = log_config.LogConfig()


def test_new_partitions_go_to_the_emptiest_log_dir(tmp_path, clock) -> None:
    manager = log_manager.LogManager([tmp_path / "a", tmp_path / "b"], clock)
    manager.get_or_create("orders", 0, CONFIG)
    manager.get_or_create("orders", 1, CONFIG)
    manager.get_or_create("orders", 2, CONFIG)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["orders-0", "orders-2"]
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["orders-1"]
    assert manager.get_or_create("orders", 1, CONFIG) is manager.get("orders", 1)
    assert manager.get("orders", 3) is None
    manager.close_all()


def test_startup_loads_partitions_and_cleans_interrupted_deletes(tmp_path, clock, harness) -> None:
    first = log_manager.LogManager([tmp_path / "a", tmp_path / "b"], clock)
    for partition in range(3):
        harness.append(first.get_or_create("my.topic-x", partition, CONFIG))
    first.close_all()
    (tmp_path / "a" / "junk").mkdir()
    (tmp_path / "a" / "my.topic-x-notanumber").mkdir()
    (tmp_path / "b" / "old-0.0123abc-delete").mkdir()
    (tmp_path / "b" / "old-0.0123abc-delete" / "00000000000000000000.log").write_bytes(b"")
    second = log_manager.LogManager([tmp_path / "a", tmp_path / "b"], clock)
    second.load_all(lambda topic: CONFIG)
    assert sorted(key for key, _ in second) == [("my.topic-x", p) for p in range(3)]
    assert all(log.log_end_offset == 1 for _, log in second)
    assert not (tmp_path / "b" / "old-0.0123abc-delete").exists()
    assert (tmp_path / "a" / "junk").exists()
    second.close_all()


def test_the_same_partition_in_two_log_dirs_is_an_error(tmp_path, clock) -> None:
    (tmp_path / "a" / "t-0").mkdir(parents=True)
    (tmp_path / "b" / "t-0").mkdir(parents=True)
    manager = log_manager.LogManager([tmp_path / "a", tmp_path / "b"], clock)
    with pytest.raises(log_manager.LogDirectoryConflictError):
        manager.load_all(lambda topic: CONFIG)
    manager.close_all()


def test_deleting_a_partition_removes_its_directory(tmp_path, clock, harness) -> None:
    manager = log_manager.LogManager([tmp_path], clock)
    harness.append(manager.get_or_create("t", 0, CONFIG))
    assert manager.delete_partition("t", 0)
    assert not manager.delete_partition("t", 0)
    assert list(tmp_path.iterdir()) == []
    assert manager.get_or_create("t", 0, CONFIG).log_end_offset == 0
    manager.close_all()


@pytest.mark.parametrize("across_filesystems", [False, True])
def test_a_log_moves_to_another_log_dir(
    tmp_path, clock, harness, monkeypatch, across_filesystems
) -> None:
    """AlterReplicaLogDirs' move: by rename, or (another filesystem: rename fails with
    EXDEV) by a copy renamed into place; the offsets come along and survive a restart."""
    manager = log_manager.LogManager([tmp_path / "a", tmp_path / "b"], clock)
    log = manager.get_or_create("t", 0, CONFIG)
    for _ in range(3):
        harness.append(log)
    if across_filesystems:
        real_rename = os.rename

        def no_cross_device_rename(source, destination):
            if Path(source).parent != Path(destination).parent:  # "another filesystem"
                raise OSError(errno.EXDEV, "Invalid cross-device link")
            real_rename(source, destination)

        monkeypatch.setattr(log_manager.os, "rename", no_cross_device_rename)
    moved = manager.move_log("t", 0, tmp_path / "b")
    assert manager.log_dir_of("t", 0) == tmp_path / "b" and manager.get("t", 0) is moved
    assert moved.log_end_offset == 3 and harness.offsets_read(moved, 0) == [0, 1, 2]
    assert [p.name for p in (tmp_path / "a").iterdir() if p.is_dir()] == []
    assert [p.name for p in (tmp_path / "b").iterdir() if p.is_dir()] == ["t-0"]
    manager.close_all()
    again = log_manager.LogManager([tmp_path / "a", tmp_path / "b"], clock)
    again.load_all(lambda topic: CONFIG)
    assert again.log_dir_of("t", 0) == tmp_path / "b"
    reopened = again.get("t", 0)
    assert reopened is not None and reopened.log_end_offset == 3
    again.close_all()


@pytest.mark.parametrize("topic", ["", "..", "a/b", "x" * 250])
def test_illegal_topic_names_are_refused(tmp_path, clock, topic) -> None:
    manager = log_manager.LogManager([tmp_path], clock)
    with pytest.raises(ValueError):
        manager.get_or_create(topic, 0, CONFIG)


def test_maintenance_applies_retention_to_every_log(tmp_path, clock, harness) -> None:
    config = log_config.LogConfig(retention_ms=1_000, file_delete_delay_ms=0)
    manager = log_manager.LogManager([tmp_path], clock)
    logs = [manager.get_or_create("t", p, config) for p in range(2)]
    for log in logs:
        harness.append(log, timestamp=clock.now_ms)
    clock.advance(1_001)
    manager.run_maintenance(clock.now_ms)
    assert [log.log_start_offset for log in logs] == [1, 1]
    manager.run_maintenance(clock.now_ms)
    assert not list(tmp_path.glob("*/*.deleted"))
    manager.close_all()
