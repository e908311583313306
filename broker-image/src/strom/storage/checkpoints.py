"""Small state files replaced atomically (write to a temporary file, fsync, rename)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

TEMPORARY_SUFFIX = ".tmp"


def write_atomically(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` so a crash leaves either the old or the new content, never a mix.

    ``durable=False``: no fsyncs, for files whose loss to a machine crash is harmless; a
    process crash still leaves the old or the new content."""
    temporary = path.with_name(path.name + TEMPORARY_SUFFIX)
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        if durable:
            os.fsync(file.fileno())
    os.replace(temporary, path)
    if durable:
        fsync_path(path.parent)


def fsync_path(path: Path) -> None:
    """fsync a file or directory by path (for a directory: make renames in it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_offset(path: Path, offset: int) -> None:
    write_atomically(path, f"{offset}\n".encode())


def read_offset(path: Path) -> int | None:
    """The offset in ``path``, or None when the file is missing or unreadable."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


# Kafka's per-log-directory checkpoint files: one line per partition.
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
_CHECKPOINT_VERSION = 0


def write_partition_offsets(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    """Kafka's offset checkpoint format (version, count, ``topic partition offset`` lines),
    replaced atomically: one fsync of the file and one of its directory for all partitions."""
    lines = [str(_CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    write_atomically(path, ("\n".join(lines) + "\n").encode())


def read_partition_offsets(path: Path) -> dict[tuple[str, int], int] | None:
    """The offsets in a checkpoint file: empty when it is missing, None when it is unreadable
    (the caller then knows no partition's offset, as if none had been written)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.splitlines()
    try:
        if len(lines) < 2 or int(lines[0]) != _CHECKPOINT_VERSION:
            return None
        count = int(lines[1])
        offsets: dict[tuple[str, int], int] = {}
        for line in lines[2:]:
            if not line.strip():
                continue
            topic, partition, offset = line.split()
            offsets[(topic, int(partition))] = int(offset)
    except ValueError:
        return None
    if len(offsets) != count:
        return None
    return offsets
