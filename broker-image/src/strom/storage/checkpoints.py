"""Small state files replaced atomically (write to a temporary file, fsync, rename)."""

from __future__ import annotations

import os
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
