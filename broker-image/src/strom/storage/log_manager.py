"""All partition logs of a broker, spread over its log directories (``log.dirs``).

A partition lives in ``<log dir>/<topic>-<partition>/``. Directories of interrupted
partition deletions (``-delete`` suffix) and creations (``-creating``) are removed at startup.

Per log directory, as in Kafka, one file each holds every partition's recovery point
(``recovery-point-offset-checkpoint``), log start offset (``log-start-offset-checkpoint``)
and high watermark (``replication-offset-checkpoint``), and ``.strom_cleanshutdown`` marks
a clean shutdown. They are written by ``checkpoint`` (after each maintenance pass, only the
files whose content changed: one fsync per file, not one per partition) and by
``close_all``, which flushes only the segments written since their last fsync, writes the
three files and then the mark. ``load_all`` reads them once; logs of a directory marked
clean open without any check and read their older segments' indexes on first use. Data
directories written before (per-partition ``recovery-point``, ``log-start-offset``,
``high-watermark`` and ``clean-shutdown`` files) are read once and migrated.

Every log's files are opened through one ``file_handles.HandleCache`` (``max_open_files``),
so the number of partitions is not bounded by RLIMIT_NOFILE.

Thread safety: ``create_many`` is meant to run in a worker thread
(``await asyncio.to_thread(logs.create_many, keys, config_for)``) while the event loop goes
on serving the logs already open; creations and deletions take a lock, lookups do not.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from strom.storage import checkpoints, file_handles, partition_log, segment
from strom.storage.log_config import LogConfig

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".strom_cleanshutdown"
CREATING_DIR_SUFFIX = "-creating"
CHECKPOINT_FILES = (
    checkpoints.RECOVERY_POINT_CHECKPOINT,
    checkpoints.LOG_START_OFFSET_CHECKPOINT,
    checkpoints.HIGH_WATERMARK_CHECKPOINT,
)
# Partitions created per batch by create_many: one directory fsync per batch.
CREATE_BATCH_SIZE = 500

# Kafka's legal topic characters; also keeps a topic name from escaping its log dir.
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_PARTITION_DIR = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>0|[1-9][0-9]*)")

TopicPartition = tuple[str, int]
# The cluster metadata log lives among the partitions (Kafka's metadata.log.dir default)
# but is opened by the metadata layer, never as a partition.
METADATA_TOPIC = "__cluster_metadata"
_Offsets = dict[TopicPartition, int]


class LogDirectoryConflictError(Exception):
    """The same partition was found in two log directories."""


def partition_dir_name(topic: str, partition: int) -> str:
    if not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        raise ValueError(f"illegal topic name {topic!r}")
    if partition < 0:
        raise ValueError(f"illegal partition {partition}")
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> TopicPartition | None:
    """(topic, partition) for ``<topic>-<int>``, else None."""
    match = _PARTITION_DIR.fullmatch(name)
    if match is None or match["topic"] in (".", ".."):
        return None
    return match["topic"], int(match["partition"])


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[Path],
        now_ms: Callable[[], int] = partition_log.wall_clock_ms,
        *,
        max_open_files: int | None = None,
    ) -> None:
        """``max_open_files``: the handle cache's bound (default: half of RLIMIT_NOFILE)."""
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.log_dirs = list(log_dirs)
        self._now_ms = now_ms
        self.handles = file_handles.HandleCache(max_open_files)
        self._logs: dict[TopicPartition, partition_log.PartitionLog] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._count_of: dict[Path, int] = {log_dir: 0 for log_dir in self.log_dirs}
        # What each checkpoint file of each log dir last said (written or read).
        self._written: dict[Path, dict[str, _Offsets]] = {
            log_dir: {name: {} for name in CHECKPOINT_FILES} for log_dir in self.log_dirs
        }
        self._lock = threading.RLock()
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)

    # -- opening ---------------------------------------------------------------------------

    def load_all(self, config_for_topic: Callable[[str], LogConfig]) -> None:
        """Open every partition found in the log directories (at startup)."""
        for log_dir in self.log_dirs:
            self._load_dir(log_dir, config_for_topic)

    def _load_dir(self, log_dir: Path, config_for_topic: Callable[[str], LogConfig]) -> None:
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        for name in (*CHECKPOINT_FILES, CLEAN_SHUTDOWN_FILE):  # writes a crash interrupted
            (log_dir / (name + checkpoints.TEMPORARY_SUFFIX)).unlink(missing_ok=True)
        read: dict[str, _Offsets] = {}
        for name in CHECKPOINT_FILES:
            offsets = checkpoints.read_partition_offsets(log_dir / name)
            if offsets is None:
                logger.warning("%s is unreadable; ignoring it", log_dir / name)
                offsets = {}
                if name == checkpoints.RECOVERY_POINT_CHECKPOINT:
                    clean = False  # recover every log of the directory from its start
            read[name] = offsets
        self._written[log_dir] = {name: dict(offsets) for name, offsets in read.items()}
        recovery_points = read[checkpoints.RECOVERY_POINT_CHECKPOINT]
        log_starts = read[checkpoints.LOG_START_OFFSET_CHECKPOINT]
        high_watermarks = read[checkpoints.HIGH_WATERMARK_CHECKPOINT]
        changed = self._changed_callback(log_dir)
        with os.scandir(log_dir) as entries:
            names = sorted(entry.name for entry in entries if entry.is_dir())
        for name in names:
            path = log_dir / name
            if path.name.endswith((partition_log.DELETE_DIR_SUFFIX, CREATING_DIR_SUFFIX)):
                logger.info("removing %s, left by an interrupted deletion or creation", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            key = parse_partition_dir_name(path.name)
            if key is None:
                logger.info("ignoring %s: not a <topic>-<partition> directory", path)
                continue
            if key[0] == METADATA_TOPIC:
                continue
            if key in self._logs:
                raise LogDirectoryConflictError(
                    f"partition {key[0]}-{key[1]} is in both {self._log_dir_of[key]} and {log_dir}"
                )
            self._register(
                key,
                log_dir,
                partition_log.PartitionLog.open(
                    path,
                    config_for_topic(key[0]),
                    self._now_ms,
                    handles=self.handles,
                    dir_offsets=partition_log.DirOffsets(
                        clean_shutdown=clean,
                        recovery_point=recovery_points.get(key),
                        log_start_offset=log_starts.get(key),
                        high_watermark=high_watermarks.get(key),
                        changed=changed,
                    ),
                ),
            )
        # Migrated per-partition files go once the directory's files hold their offsets.
        self._write_checkpoints(log_dir)
        for key, log in list(self._logs.items()):
            if self._log_dir_of[key] == log_dir and log.legacy_checkpoint_files:
                log.remove_legacy_checkpoint_files()
        # From here on a crash must lead to recovery.
        if clean:
            marker.unlink(missing_ok=True)
            checkpoints.fsync_path(log_dir)

    def _changed_callback(self, log_dir: Path) -> Callable[[bool], None]:
        def changed(urgent: bool) -> None:
            if urgent:
                self._write_checkpoints(log_dir, only=(checkpoints.RECOVERY_POINT_CHECKPOINT,))

        return changed

    def _register(
        self, key: TopicPartition, log_dir: Path, log: partition_log.PartitionLog
    ) -> None:
        with self._lock:
            self._logs[key] = log
            self._log_dir_of[key] = log_dir
            self._count_of[log_dir] += 1

    def get(self, topic: str, partition: int) -> partition_log.PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(
        self, topic: str, partition: int, config: LogConfig
    ) -> partition_log.PartitionLog:
        """The partition's log, created in the log dir holding the fewest partitions."""
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            return existing
        log, stale = self._create((topic, partition), config)
        if stale is not None:
            self._write_checkpoints(stale)
        return log

    def create_many(
        self,
        keys: Iterable[TopicPartition],
        config_for: Callable[[str], LogConfig],
        *,
        batch_size: int = CREATE_BATCH_SIZE,
    ) -> list[partition_log.PartitionLog]:
        """Create (or return the existing) logs of many partitions, in order.

        For CreateTopics/CreatePartitions with thousands of partitions: run it in a worker
        thread (``await asyncio.to_thread(...)``), the event loop keeps serving meanwhile.
        Each partition directory is made under a temporary ``-creating`` name and renamed
        into place, so a crash leaves whole partitions or leftovers the next start removes;
        no file is fsynced per partition, only each log dir once per batch (a partition
        lost to a machine crash is created again when the broker next opens it). No index
        file is made: they come with their first entry.
        """
        created: list[partition_log.PartitionLog] = []
        batch: list[TopicPartition] = []
        for key in keys:
            batch.append(key)
            if len(batch) >= batch_size:
                created += self._create_batch(batch, config_for)
                batch = []
        if batch:
            created += self._create_batch(batch, config_for)
        return created

    def _create_batch(
        self, keys: list[TopicPartition], config_for: Callable[[str], LogConfig]
    ) -> list[partition_log.PartitionLog]:
        logs = []
        touched: set[Path] = set()
        stale: set[Path] = set()
        for key in keys:
            log, stale_dir = self._create(key, config_for(key[0]))
            logs.append(log)
            touched.add(log.directory.parent)
            if stale_dir is not None:
                stale.add(stale_dir)
        for log_dir in touched:
            checkpoints.fsync_path(log_dir)
        for log_dir in stale:
            self._write_checkpoints(log_dir)
        return logs

    def _create(
        self, key: TopicPartition, config: LogConfig
    ) -> tuple[partition_log.PartitionLog, Path | None]:
        """(the log, its log dir if that dir's checkpoints still name an older partition
        of the same name: they must be rewritten before the log is used)."""
        with self._lock:
            existing = self._logs.get(key)
            if existing is not None:
                return existing, None
            name = partition_dir_name(*key)
            log_dir = min(self.log_dirs, key=lambda candidate: self._count_of[candidate])
            path = log_dir / name
            made = not path.exists()
            if made:
                _make_partition_dir(path)
            log = partition_log.PartitionLog.open(
                path,
                config,
                self._now_ms,
                handles=self.handles,
                dir_offsets=partition_log.DirOffsets(
                    # Nothing to check in a directory just made (an older one is recovered).
                    clean_shutdown=made,
                    changed=self._changed_callback(log_dir),
                ),
            )
            self._register(key, log_dir, log)
            written = self._written[log_dir]
            stale = any(key in written[name] for name in CHECKPOINT_FILES)
            return log, log_dir if stale else None

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Close and remove a partition's log; False if there was none."""
        key = (topic, partition)
        with self._lock:
            log = self._logs.pop(key, None)
            if log is None:
                return False
            log_dir = self._log_dir_of.pop(key)
            self._count_of[log_dir] -= 1
        log.delete()
        return True

    def move_log(self, topic: str, partition: int, target_dir: Path) -> partition_log.PartitionLog:
        """Move a partition's log to another of the log dirs (AlterReplicaLogDirs) and
        return it opened there. Blocking (a copy between filesystems): run it in a worker
        thread while nothing else uses the log, which is closed first.

        A rename when both dirs share a filesystem; else a copy under a `-creating` name,
        fsynced and renamed into place, then the old directory removed as a deletion is
        (a crash leaves leftovers that startup removes, never two live copies)."""
        key = (topic, partition)
        with self._lock:
            log = self._logs[key]
            source_dir = self._log_dir_of[key]
            if source_dir == target_dir:
                return log
            log.close()
            source = log.directory
            destination = target_dir / source.name
            try:
                os.rename(source, destination)
            except OSError as error:
                if error.errno != errno.EXDEV:
                    raise
                copying = destination.with_name(
                    f"{destination.name}.{uuid.uuid4().hex}{CREATING_DIR_SUFFIX}"
                )
                shutil.copytree(source, copying)
                for copied in copying.iterdir():
                    checkpoints.fsync_path(copied)
                copying.rename(destination)
                doomed = source.with_name(
                    f"{source.name}.{uuid.uuid4().hex}{partition_log.DELETE_DIR_SUFFIX}"
                )
                source.rename(doomed)
                shutil.rmtree(doomed, ignore_errors=True)
            checkpoints.fsync_path(target_dir)
            moved = partition_log.PartitionLog.open(
                destination,
                log.config,
                self._now_ms,
                handles=self.handles,
                dir_offsets=partition_log.DirOffsets(
                    clean_shutdown=True,  # closed just now
                    recovery_point=log.recovery_point,
                    log_start_offset=log.log_start_offset,
                    high_watermark=log.high_watermark,
                    changed=self._changed_callback(target_dir),
                ),
            )
            del self._logs[key], self._log_dir_of[key]
            self._count_of[source_dir] -= 1
            self._register(key, target_dir, moved)
        self._write_checkpoints(target_dir)
        self._write_checkpoints(source_dir)
        return moved

    def __iter__(self) -> Iterator[tuple[TopicPartition, partition_log.PartitionLog]]:
        return iter(list(self._logs.items()))

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log directory holding the partition's log (None: no log of it here)."""
        return self._log_dir_of.get((topic, partition))

    def __len__(self) -> int:
        return len(self._logs)

    # -- checkpoints -----------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write each log dir's checkpoint files whose content changed since last written."""
        for log_dir in self.log_dirs:
            self._write_checkpoints(log_dir)

    def _current(self, log_dir: Path) -> dict[str, _Offsets]:
        recovery_points: _Offsets = {}
        log_starts: _Offsets = {}
        high_watermarks: _Offsets = {}
        log_dir_of = self._log_dir_of
        for key, log in list(self._logs.items()):
            if log_dir_of.get(key) != log_dir:
                continue
            recovery_points[key] = log.recovery_point
            log_starts[key] = log.log_start_offset
            high_watermarks[key] = log.high_watermark
        return {
            checkpoints.RECOVERY_POINT_CHECKPOINT: recovery_points,
            checkpoints.LOG_START_OFFSET_CHECKPOINT: log_starts,
            checkpoints.HIGH_WATERMARK_CHECKPOINT: high_watermarks,
        }

    def _write_checkpoints(
        self, log_dir: Path, *, only: Sequence[str] = CHECKPOINT_FILES, force: bool = False
    ) -> None:
        with self._lock:
            current = self._current(log_dir)
            written = self._written[log_dir]
            for name in only:
                if force or current[name] != written[name]:
                    checkpoints.write_partition_offsets(log_dir / name, current[name])
                    written[name] = current[name]

    # -- maintenance and shutdown ----------------------------------------------------------

    def run_maintenance(self, now_ms: int) -> None:
        """Time roll, retention, delayed deletes and due flushes over all logs, then the
        log dirs' checkpoint files that changed."""
        for key, log in list(self._logs.items()):
            try:
                log.run_maintenance(now_ms)
            except Exception:
                # One failing partition must not stop retention and flushes for the others.
                logger.exception("maintenance of %s-%s failed", *key)
        try:
            self.checkpoint()
        except OSError:
            logger.exception("writing the log directories' checkpoints failed")

    def close_all(self) -> None:
        """Close every log (fsyncing only segments written since their last fsync), write
        each log dir's checkpoints once and mark the dir clean. A dir where a log failed to
        close is not marked clean: its logs are recovered on the next start."""
        failed: set[Path] = set()
        for key, log in list(self._logs.items()):
            try:
                log.close()
            except Exception:
                logger.exception("closing %s-%s failed", *key)
                failed.add(self._log_dir_of[key])
        for log_dir in self.log_dirs:
            try:
                self._write_checkpoints(log_dir, force=True)
                if log_dir not in failed:
                    checkpoints.write_atomically(log_dir / CLEAN_SHUTDOWN_FILE, b"")
            except OSError:
                logger.exception("writing the checkpoints of %s failed", log_dir)
        with self._lock:
            self._logs.clear()
            self._log_dir_of.clear()
            self._count_of = {log_dir: 0 for log_dir in self.log_dirs}
        self.handles.close_all()


def _make_partition_dir(path: Path) -> None:
    """A partition directory with an empty first segment, renamed into place whole."""
    creating = path.with_name(f"{path.name}.{uuid.uuid4().hex}{CREATING_DIR_SUFFIX}")
    creating.mkdir()
    (creating / segment.file_name(0, segment.LOG_SUFFIX)).write_bytes(b"")
    creating.rename(path)
