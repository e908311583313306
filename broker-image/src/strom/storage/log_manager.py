"""All partition logs of a broker, spread over its log directories (``log.dirs``).

A partition lives in ``<log dir>/<topic>-<partition>/``. Directories of interrupted
partition deletions (``-delete`` suffix) are removed at startup.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from strom.storage import partition_log
from strom.storage.log_config import LogConfig

logger = logging.getLogger(__name__)

# Kafka's legal topic characters; also keeps a topic name from escaping its log dir.
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_PARTITION_DIR = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>0|[1-9][0-9]*)")

TopicPartition = tuple[str, int]
# The cluster metadata log lives among the partitions (Kafka's metadata.log.dir default)
# but is opened by the metadata layer, never as a partition.
METADATA_TOPIC = "__cluster_metadata"


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
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.log_dirs = list(log_dirs)
        self._now_ms = now_ms
        self._logs: dict[TopicPartition, partition_log.PartitionLog] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)

    def load_all(self, config_for_topic: Callable[[str], LogConfig]) -> None:
        """Open every partition found in the log directories (at startup)."""
        for log_dir in self.log_dirs:
            for path in sorted(log_dir.iterdir()):
                if not path.is_dir():
                    continue
                if path.name.endswith(partition_log.DELETE_DIR_SUFFIX):
                    logger.info("removing %s, left by an interrupted partition deletion", path)
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
                        f"partition {key[0]}-{key[1]} is in both {self._log_dir_of[key]} "
                        f"and {log_dir}"
                    )
                self._logs[key] = partition_log.PartitionLog.open(
                    path, config_for_topic(key[0]), self._now_ms
                )
                self._log_dir_of[key] = log_dir

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
        name = partition_dir_name(topic, partition)
        counts = {log_dir: 0 for log_dir in self.log_dirs}
        for log_dir in self._log_dir_of.values():
            counts[log_dir] += 1
        log_dir = min(self.log_dirs, key=lambda candidate: counts[candidate])
        log = partition_log.PartitionLog.open(log_dir / name, config, self._now_ms)
        self._logs[key] = log
        self._log_dir_of[key] = log_dir
        return log

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Close and remove a partition's log; False if there was none."""
        key = (topic, partition)
        log = self._logs.pop(key, None)
        if log is None:
            return False
        del self._log_dir_of[key]
        log.delete()
        return True

    def __iter__(self) -> Iterator[tuple[TopicPartition, partition_log.PartitionLog]]:
        return iter(list(self._logs.items()))

    def __len__(self) -> int:
        return len(self._logs)

    def run_maintenance(self, now_ms: int) -> None:
        """Time roll, retention, delayed deletes and due flushes over all logs."""
        for key, log in list(self._logs.items()):
            try:
                log.run_maintenance(now_ms)
            except Exception:
                # One failing partition must not stop retention and flushes for the others.
                logger.exception("maintenance of %s-%s failed", *key)

    def close_all(self) -> None:
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        self._log_dir_of.clear()
