"""Record bytes that stay in files until the connection sends them (zero-copy).

Storage hands out file ranges; a fetch response carries them as `RecordRegions` in its
records fields; the connection writes them with sendfile (or a copy when small). This is
the one region type from storage to the socket.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import BinaryIO, Protocol


class FileRange(Protocol):
    """`length` bytes of `file` from `position` (storage's ranges have this shape)."""

    @property
    def file(self) -> BinaryIO: ...

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...


class RecordRegions:
    """The record bytes of one partition in a fetch response, as file ranges."""

    __slots__ = ("ranges", "size", "topic")

    def __init__(self, topic: str, ranges: Sequence[FileRange]) -> None:
        self.topic = topic
        self.ranges = ranges
        self.size = sum(r.length for r in ranges)

    def __len__(self) -> int:
        return self.size
