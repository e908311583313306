"""Kafka's `.lock` file: one process per log directory, and clear errors naming log.dirs."""

from __future__ import annotations

from pathlib import Path

import pytest
from strom.storage import dir_lock


def test_a_locked_directory_cannot_be_locked_again_until_released(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b" / "nested"
    locks = dir_lock.lock_log_dirs([first, second])
    assert (first / ".lock").exists() and (second / ".lock").exists()
    with pytest.raises(dir_lock.LogDirError, match=r"log\.dirs: .*nested is in use"):
        dir_lock.lock_log_dirs([tmp_path / "c", second])
    # The failed attempt holds nothing: c is free.
    dir_lock.lock_log_dirs([tmp_path / "c"]).release()
    locks.release()
    dir_lock.lock_log_dirs([first, second]).release()


def test_a_file_is_not_a_log_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(dir_lock.LogDirError, match=r"log\.dirs: .*file is not a directory"):
        dir_lock.lock_log_dirs([tmp_path / "file"])
    with pytest.raises(dir_lock.LogDirError, match=r"log\.dirs: cannot create"):
        dir_lock.lock_log_dirs([tmp_path / "file" / "below"])
