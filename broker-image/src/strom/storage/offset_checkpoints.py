"""Where a partition log keeps its offsets across restarts.

Files in the partition directory, besides the segments:

- ``log-start-offset``, ``recovery-point``, ``high-watermark``: one offset each, replaced
  atomically. The recovery point is the offset below which everything was fsynced.
- ``leader-epoch-checkpoint``: see ``leader_epochs``.
- ``<offset>.snapshot``: producer state, see ``producer_state``.
- ``clean-shutdown``: written by close(); when present on open, no batch needs checking.

A log opened by a ``LogManager`` (``dir_offsets`` given) keeps the first three and the clean
shutdown mark in its log directory's checkpoint files instead, as Kafka does: the manager
reads them once at startup, collects every log's offsets and writes one file per log
directory (see ``log_manager``); such a log only tells it that they changed. It reads its
own per-partition files only when the directory's files do not know it yet (data made
before; they are removed once migrated).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from strom.storage import checkpoints, log_loader


class OffsetCheckpoints:
    """Records one log's log start offset, recovery point, high watermark and clean
    shutdown: in its own files, or (managed) by telling its LogManager."""

    def __init__(
        self, directory: Path, dir_offsets: log_loader.DirOffsets | None, names: set[str]
    ) -> None:
        self._directory = directory
        self.managed = dir_offsets is not None
        self._changed: Callable[[bool], None] | None = None
        self.legacy_files: list[str] = []
        if dir_offsets is not None:
            self._changed = dir_offsets.changed
            self.legacy_files = [
                name for name in log_loader.LEGACY_CHECKPOINT_FILES if name in names
            ]

    def opened(
        self, recovery_point: int, log_start_offset: int, checkpointed_start: int | None
    ) -> None:
        """The offsets a log opened with (after recovery): its own files are brought up to
        date, a managed log's directory files are written once every log is open."""
        if self.managed:
            return
        self._write(log_loader.RECOVERY_POINT_FILE, recovery_point)
        if checkpointed_start != log_start_offset:
            self._write(log_loader.LOG_START_OFFSET_FILE, log_start_offset)

    def remove_legacy_files(self) -> None:
        for name in self.legacy_files:
            (self._directory / name).unlink(missing_ok=True)
        self.legacy_files = []

    def log_start_moved(self, offset: int) -> None:
        if self.managed:
            self._tell(urgent=False)
        else:
            self._write(log_loader.LOG_START_OFFSET_FILE, offset)

    def recovery_point_fell(self, offset: int) -> None:
        """Data above ``offset`` is no longer known to be fsynced (a truncation)."""
        if self.managed:
            # The directory's checkpoint must say so before anything else is written.
            self._tell(urgent=True)
        else:
            self._write(log_loader.RECOVERY_POINT_FILE, offset)

    def recovery_point_rose(self, offset: int) -> None:
        """Rolled segments were fsynced up to ``offset``."""
        if self.managed:
            self._tell(urgent=False)
        else:
            self._write(log_loader.RECOVERY_POINT_FILE, offset)

    def flushed(self, recovery_point: int, high_watermark: int) -> None:
        """Everything was fsynced: the recovery point is the log end."""
        if self.managed:
            self._tell(urgent=False)
        else:
            self._write(log_loader.RECOVERY_POINT_FILE, recovery_point)
            self._write(log_loader.HIGH_WATERMARK_FILE, high_watermark)

    def closed_cleanly(self) -> None:
        """Mark the shutdown clean (a managed log's mark is its directory's)."""
        if not self.managed:
            checkpoints.write_atomically(self._directory / log_loader.CLEAN_SHUTDOWN_FILE, b"")

    def _write(self, name: str, offset: int) -> None:
        checkpoints.write_offset(self._directory / name, offset)

    def _tell(self, *, urgent: bool) -> None:
        if self._changed is not None:
            self._changed(urgent)
