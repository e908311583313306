"""Split a byte stream into size-prefixed Kafka frames, refusing absurd sizes early."""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameSizeError(Exception):
    """The size prefix is negative or above socket.request.max.bytes: close the connection."""


class FrameBuffer:
    """Accumulates received bytes and hands out complete frames (without the prefix)."""

    def __init__(self, max_frame_bytes: int) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._position = 0

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer) - self._position

    def next_size(self) -> int | None:
        """The size of the next frame once its prefix has arrived, else None."""
        if len(self._buffer) - self._position < _SIZE.size:
            return None
        (size,) = _SIZE.unpack_from(self._buffer, self._position)
        if size < 0 or size > self._max_frame_bytes:
            raise FrameSizeError(
                f"frame size {size} is outside 0..{self._max_frame_bytes} "
                "(socket.request.max.bytes)"
            )
        return int(size)

    def next_frame(self) -> bytes | None:
        """The next complete frame, or None until more bytes arrive."""
        size = self.next_size()
        if size is None or len(self._buffer) - self._position < _SIZE.size + size:
            self._compact()
            return None
        start = self._position + _SIZE.size
        with memoryview(self._buffer) as view:  # one copy of the frame, not two
            frame = bytes(view[start : start + size])
        self._position = start + size
        return frame

    def _compact(self) -> None:
        # Drop consumed bytes only when waiting for more, so a burst of small frames
        # is sliced from one buffer without moving the rest each time.
        if self._position:
            del self._buffer[: self._position]
            self._position = 0
