"""Per-log-dir checkpoint files: written once per dir, migrated from per-partition files,
safe against a crash between writing and renaming, and what startup recovers from."""

import os
import shutil
from pathlib import Path

import pytest
from strom.storage import checkpoints, log_config, log_manager, partition_log

CONFIG = log_config.LogConfig()
LEGACY_CONFIG = log_config.LogConfig(segment_bytes=400, index_interval_bytes=100)
LEGACY_DIR = Path(__file__).parent / "data" / "legacy-log-dir"
DIR_FILES = [
    ".strom_cleanshutdown",
    "log-start-offset-checkpoint",
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
]


def file_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.is_file())


def open_manager(root: Path, clock, config=CONFIG) -> log_manager.LogManager:
    manager = log_manager.LogManager([root], clock)
    manager.load_all(lambda topic: config)
    return manager


def test_clean_shutdown_writes_each_dir_file_once_and_no_partition_file(
    tmp_path, clock, harness, monkeypatch
) -> None:
    manager = log_manager.LogManager([tmp_path], clock)
    logs = [manager.get_or_create("t", p, CONFIG) for p in range(50)]
    for log in logs[:5]:
        harness.append(log)
        log.flush()
    manager.checkpoint()
    harness.append(logs[0])
    writes: list[str] = []
    real_write = checkpoints.write_partition_offsets
    monkeypatch.setattr(
        checkpoints,
        "write_partition_offsets",
        lambda path, offsets: (writes.append(path.name), real_write(path, offsets)),
    )
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))
    manager.close_all()
    assert sorted(writes) == DIR_FILES[1:]
    # The dir files and the mark (2 each) and the one dirty segment with its time index;
    # nothing for the 49 clean partitions.
    assert len(fsyncs) <= 2 * 4 + 2
    assert file_names(tmp_path) == DIR_FILES
    assert checkpoints.read_partition_offsets(tmp_path / "recovery-point-offset-checkpoint") == {
        ("t", p): (2 if p == 0 else 1 if p < 5 else 0) for p in range(50)
    }
    for p in range(50):
        assert not set(os.listdir(tmp_path / f"t-{p}")) & {
            "recovery-point",
            "log-start-offset",
            "high-watermark",
            "clean-shutdown",
        }
    reopened = open_manager(tmp_path, clock)
    assert ".strom_cleanshutdown" not in file_names(tmp_path)
    reopened_log = reopened.get("t", 0)
    assert reopened_log is not None
    assert reopened_log.log_end_offset == reopened_log.high_watermark == 2
    reopened.close_all()


def test_offsets_survive_a_restart(tmp_path, clock, harness) -> None:
    manager = log_manager.LogManager([tmp_path], clock)
    log = manager.get_or_create("t", 0, CONFIG)
    harness.fill(log, 10)
    log.delete_records_before(4)
    log.update_high_watermark(7)
    manager.close_all()
    reopened = open_manager(tmp_path, clock)
    log = reopened.get("t", 0)
    assert log is not None
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (4, 7, 10)
    assert harness.offsets_read(log, 4)[:1] == [4]
    reopened.close_all()


def test_a_legacy_log_dir_opens_with_nothing_lost_and_is_migrated(tmp_path, clock) -> None:
    """legacy-log-dir was written by Strom before this change (see data/make_legacy...)."""
    root = tmp_path / "logs"
    shutil.copytree(LEGACY_DIR, root)
    manager = open_manager(root, clock, LEGACY_CONFIG)
    found = {key: log for key, log in manager}
    assert sorted(found) == [("legacy", 0), ("legacy", 1), ("legacy", 2)]
    summary = {
        p: (log.log_start_offset, log.log_end_offset, log.high_watermark)
        for (_, p), log in found.items()
    }
    # legacy-2 crashed after its flush at 12: one batch above it and a torn tail.
    assert summary == {0: (0, 10, 10), 1: (4, 11, 11), 2: (0, 13, 12)}
    assert found[("legacy", 1)].leader_epoch_cache.latest_epoch == 3
    assert file_names(root) == DIR_FILES[1:]
    for p in range(3):
        assert not set(os.listdir(root / f"legacy-{p}")) & {
            "recovery-point",
            "log-start-offset",
            "high-watermark",
            "clean-shutdown",
        }
    assert checkpoints.read_partition_offsets(root / "log-start-offset-checkpoint") == {
        ("legacy", 0): 0,
        ("legacy", 1): 4,
        ("legacy", 2): 0,
    }
    manager.close_all()
    again = open_manager(root, clock, LEGACY_CONFIG)
    assert {p: (log.log_start_offset, log.log_end_offset) for (_, p), log in again} == {
        0: (0, 10),
        1: (4, 11),
        2: (0, 13),
    }
    again.close_all()


def test_a_crash_between_writing_and_renaming_keeps_the_old_checkpoint(
    tmp_path, clock, harness, monkeypatch
) -> None:
    manager = log_manager.LogManager([tmp_path], clock)
    log = manager.get_or_create("t", 0, CONFIG)
    harness.fill(log, 3)
    log.flush()
    manager.checkpoint()
    harness.fill(log, 2)
    log.flush()
    real_replace = os.replace

    def crash_on_checkpoint(source, target) -> None:
        if str(target).endswith("-checkpoint"):
            raise OSError("crash before rename")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", crash_on_checkpoint)
    manager.close_all()  # the checkpoints fail, so the dir is not marked clean either
    monkeypatch.undo()
    assert ".strom_cleanshutdown" not in file_names(tmp_path)
    assert "recovery-point-offset-checkpoint.tmp" in file_names(tmp_path)
    assert checkpoints.read_partition_offsets(tmp_path / "recovery-point-offset-checkpoint") == {
        ("t", 0): 3
    }
    # Unclean: segments from the old recovery point are checked; nothing is lost.
    reopened = open_manager(tmp_path, clock)
    log = reopened.get("t", 0)
    assert log is not None
    assert log.log_end_offset == 5
    assert log.high_watermark == 3  # the old checkpoint's; a leader moves it on
    log.update_high_watermark(5)
    assert harness.offsets_read(log, 0) == [0, 1, 2, 3, 4]
    assert "recovery-point-offset-checkpoint.tmp" not in file_names(tmp_path)
    reopened.close_all()


def test_an_unreadable_checkpoint_means_recovering_everything(tmp_path, clock, harness) -> None:
    manager = log_manager.LogManager([tmp_path], clock)
    harness.fill(manager.get_or_create("t", 0, CONFIG), 3)
    manager.close_all()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n5\nt 0 3\n")
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    with segment.open("ab") as file:
        file.write(b"torn")
    reopened = open_manager(tmp_path, clock)
    log = reopened.get("t", 0)
    assert log is not None
    assert log.log_end_offset == 3
    assert segment.read_bytes()[-4:] != b"torn"
    reopened.close_all()


def test_after_a_crash_logs_recover_from_the_dir_recovery_point(tmp_path, clock, harness) -> None:
    config = log_config.LogConfig(segment_bytes=300)
    manager = log_manager.LogManager([tmp_path], clock)
    log = manager.get_or_create("t", 0, config)
    harness.fill(log, 6)
    manager.run_maintenance(clock.now_ms)  # flushes rolled segments, writes the checkpoint
    recovery_point = log.recovery_point
    assert recovery_point > 0
    assert checkpoints.read_partition_offsets(tmp_path / "recovery-point-offset-checkpoint") == {
        ("t", 0): recovery_point
    }
    harness.fill(log, 1)
    log.close_handles()  # crash
    with (tmp_path / "t-0" / log.segments[-1].log_path.name).open("ab") as file:
        file.write(b"torn tail")
    reopened = open_manager(tmp_path, clock, config)
    log = reopened.get("t", 0)
    assert log is not None
    assert log.log_end_offset == 7
    reopened.close_all()


def test_a_truncation_below_the_recovery_point_is_checkpointed_at_once(
    tmp_path, clock, harness
) -> None:
    manager = log_manager.LogManager([tmp_path], clock)
    log = manager.get_or_create("t", 0, CONFIG)
    harness.fill(log, 5)
    log.flush()
    manager.checkpoint()
    log.truncate_to(2)
    assert checkpoints.read_partition_offsets(tmp_path / "recovery-point-offset-checkpoint") == {
        ("t", 0): 2
    }
    manager.close_all()


def test_a_recreated_partition_does_not_inherit_old_offsets(tmp_path, clock, harness) -> None:
    manager = log_manager.LogManager([tmp_path], clock)
    log = manager.get_or_create("t", 0, CONFIG)
    harness.fill(log, 10)
    log.delete_records_before(6)
    manager.checkpoint()
    assert manager.delete_partition("t", 0)
    fresh = manager.get_or_create("t", 0, CONFIG)
    harness.fill(fresh, 2)
    fresh.close_handles()  # crash before any further checkpoint
    reopened = open_manager(tmp_path, clock)
    log = reopened.get("t", 0)
    assert log is not None
    assert (log.log_start_offset, log.log_end_offset) == (0, 2)
    reopened.close_all()


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt zero 1\n"],
)
def test_malformed_checkpoint_files_read_as_unreadable(tmp_path, text) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    assert checkpoints.read_partition_offsets(path) is None


def test_checkpoint_files_use_kafkas_format(tmp_path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    checkpoints.write_partition_offsets(path, {("a.b-c", 0): 5, ("x", 12): 0})
    assert path.read_text() == "0\n2\na.b-c 0 5\nx 12 0\n"
    assert checkpoints.read_partition_offsets(path) == {("a.b-c", 0): 5, ("x", 12): 0}
    assert checkpoints.read_partition_offsets(tmp_path / "missing") == {}


def test_a_log_opened_alone_keeps_its_own_files(tmp_path, clock, harness) -> None:
    """Without a LogManager (tools, older callers) a log writes per-partition files."""
    log = partition_log.PartitionLog.open(tmp_path / "t-0", CONFIG, clock)
    harness.append(log)
    log.close()
    assert {"recovery-point", "clean-shutdown"} <= set(os.listdir(tmp_path / "t-0"))
