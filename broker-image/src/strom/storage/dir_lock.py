"""One process per log directory: Kafka's `.lock` file, held with flock for the process's life.

A second broker started on a directory in use must fail before it reads anything there:
recovery truncating the live broker's active segments would corrupt them. The lock is
taken before any recovery and released only when the process exits (the kernel drops
flock locks with the last descriptor, so a SIGKILLed broker never leaves a stale lock).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

LOCK_FILE = ".lock"


class LogDirError(Exception):
    """A log directory cannot be used; the message names `log.dirs` and the directory."""


class DirLocks:
    """The open, locked `.lock` files of every log directory."""

    def __init__(self) -> None:
        self._fds: list[int] = []

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)  # closing the descriptor drops its flock
        self._fds.clear()


def lock_log_dirs(directories: Iterable[Path]) -> DirLocks:
    """Create each directory if needed and lock it, or raise LogDirError (nothing held)."""
    locks = DirLocks()
    try:
        for directory in directories:
            locks._fds.append(_lock(Path(directory)))
    except BaseException:
        locks.release()
        raise
    return locks


def _lock(directory: Path) -> int:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise LogDirError(f"log.dirs: {directory} is not a directory") from None
    except OSError as error:
        raise LogDirError(f"log.dirs: cannot create {directory}: {_reason(error)}") from None
    if not directory.is_dir():
        raise LogDirError(f"log.dirs: {directory} is not a directory")
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise LogDirError(f"log.dirs: cannot use {directory}: {_reason(error)}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogDirError(
            f"log.dirs: {directory} is in use by another process (it holds {path})"
        ) from None
    except OSError as error:
        os.close(fd)
        raise LogDirError(f"log.dirs: cannot lock {path}: {_reason(error)}") from None
    return fd


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
