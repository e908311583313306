"""What each log directory of this broker holds: the answer of DescribeLogDirs.

Kafka's ReplicaManager.describeLogDirs: one description per configured log dir (its
absolute path), listing the wanted partitions' logs there with their size (the bytes of
their segments) and offset lag (how far the log end offset is behind the high watermark:
0 on a leader; -1 for a log on disk that no served replica owns), and the size and free
space of the directory's filesystem. A directory that cannot be read is described by
its error alone. (A function beside the replica manager for now, reading only its
public state.) A replica moved by AlterReplicaLogDirs is listed where it is until its log is
in the new dir (Strom has no future logs: none is ever listed).
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from strom.replication import replica_manager

# Kafka's DescribeLogDirsResponse.INVALID_OFFSET_LAG: no served replica owns the log.
INVALID_OFFSET_LAG = -1

PartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ReplicaLog:
    topic: str
    partition: int
    size: int
    offset_lag: int


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: str
    error: OSError | None = None
    total_bytes: int = -1
    usable_bytes: int = -1
    replicas: tuple[ReplicaLog, ...] = ()


def describe_log_dirs(
    replicas: replica_manager.ReplicaManager, wanted: Collection[PartitionKey] | None
) -> list[LogDirDescription]:
    """Every configured log dir, with the logs of `wanted` partitions (None: all) in it."""
    logs = replicas.logs
    keys_in: dict[Path, list[PartitionKey]] = defaultdict(list)
    for key, _ in logs:
        log_dir = logs.log_dir_of(*key)
        if log_dir is not None and (wanted is None or key in wanted):
            keys_in[log_dir].append(key)
    return [_describe(replicas, log_dir, keys_in[log_dir]) for log_dir in logs.log_dirs]


def _describe(
    replicas: replica_manager.ReplicaManager, log_dir: Path, keys: list[PartitionKey]
) -> LogDirDescription:
    path = os.path.abspath(log_dir)
    try:
        if not os.path.isdir(path):
            raise NotADirectoryError(f"{path} is not a directory")
        usage = shutil.disk_usage(path)
    except OSError as error:
        return LogDirDescription(path, error)
    described = []
    for topic, index in sorted(keys):
        log = replicas.logs.get(topic, index)
        if log is None:
            continue  # deleted since listed
        partition = replicas.partition(topic, index)
        lag = (
            INVALID_OFFSET_LAG
            if partition is None
            else max(partition.high_watermark - log.log_end_offset, 0)
        )
        described.append(ReplicaLog(topic, index, log.size_bytes, lag))
    # As Java's File.getUsableSpace: the space an unprivileged writer may still use.
    return LogDirDescription(path, None, usage.total, usage.free, tuple(described))
