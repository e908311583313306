"""The record batch codecs, for the few places that must look inside a compressed batch
(the log cleaner, key checks of compacted topics). The produce and fetch paths never call
this: they move batches as they are.

Formats are Kafka's: gzip, LZ4 frame, zstd frame, and snappy in the xerial framing the
Java client writes (raw snappy, as some clients send, is read too).
"""

from __future__ import annotations

import struct

import cramjam

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = struct.Struct(">i")
# The Java client's SnappyOutputStream block size.
_XERIAL_BLOCK_BYTES = 32 * 1024


class CompressionError(Exception):
    """A compressed body that does not decompress, or an unknown codec."""


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (cramjam.DecompressionError, ValueError) as error:
        raise CompressionError(f"{NAMES[codec]} body does not decompress: {error}") from error
    raise CompressionError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _snappy_compress(bytes(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise CompressionError(f"unknown compression codec {codec}")


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK_BYTES]))
        out += _XERIAL_BLOCK.pack(len(block)) + block
    return bytes(out)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    position = len(_XERIAL_HEADER)
    while position < len(data):
        if position + _XERIAL_BLOCK.size > len(data):
            raise CompressionError("xerial snappy block length is truncated")
        (length,) = _XERIAL_BLOCK.unpack_from(data, position)
        position += _XERIAL_BLOCK.size
        if length < 0 or position + length > len(data):
            raise CompressionError(f"xerial snappy block of {length} bytes overruns the body")
        out += bytes(cramjam.snappy.decompress_raw(data[position : position + length]))
        position += length
    return bytes(out)
