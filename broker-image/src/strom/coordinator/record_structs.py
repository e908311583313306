"""Big-endian struct writing and reading for the records of Kafka's internal topics
(`__consumer_offsets`, `__transaction_state`), in Kafka's serialization: int8 to int64,
int16-length (or compact, unsigned-varint-length) strings, int32-length bytes, array
lengths, tagged fields.

A `Reader` raises the error type its record module gives it, so each topic's readers
keep their own `RecordFormatError`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class Writer:
    def __init__(self) -> None:
        self.buffer = bytearray()

    def int8(self, value: int) -> Writer:
        self.buffer += _INT8.pack(value)
        return self

    def int16(self, value: int) -> Writer:
        self.buffer += _INT16.pack(value)
        return self

    def int32(self, value: int) -> Writer:
        self.buffer += _INT32.pack(value)
        return self

    def int64(self, value: int) -> Writer:
        self.buffer += _INT64.pack(value)
        return self

    def unsigned_varint(self, value: int) -> Writer:
        while value >= 0x80:
            self.buffer.append((value & 0x7F) | 0x80)
            value >>= 7
        self.buffer.append(value)
        return self

    def string(self, value: str | None, *, compact: bool = False) -> Writer:
        """A string, or a null one (None): an int16 length, or in a flexible version a
        compact one (an unsigned varint of the length + 1, 0 for null)."""
        if value is None:
            return self.unsigned_varint(0) if compact else self.int16(-1)
        encoded = value.encode()
        if compact:
            self.unsigned_varint(len(encoded) + 1)
        else:
            self.int16(len(encoded))
        self.buffer += encoded
        return self

    def bytes_(self, value: bytes) -> Writer:
        self.int32(len(value))
        self.buffer += value
        return self

    def array_length(self, length: int | None, *, compact: bool) -> Writer:
        """An array's length (None: a null array): an int32, or a compact unsigned varint
        of the length + 1."""
        if compact:
            return self.unsigned_varint(0 if length is None else length + 1)
        return self.int32(-1 if length is None else length)

    def tagged_fields(self, fields: Mapping[int, bytes]) -> Writer:
        """A flexible struct's tagged fields, each tag with its value's bytes, in the
        order given (Kafka's: ascending tags); none: one 0 byte."""
        self.unsigned_varint(len(fields))
        for tag, value in fields.items():
            self.unsigned_varint(tag).unsigned_varint(len(value))
            self.buffer += value
        return self


class Reader:
    def __init__(self, data: bytes, error: type[Exception]) -> None:
        """`error`: what to raise, with a message, on bytes that cannot be read."""
        self._data = data
        self._position = 0
        self._error = error

    def _take(self, size: int) -> bytes:
        if size < 0 or self._position + size > len(self._data):
            raise self._error("record is truncated")
        chunk = self._data[self._position : self._position + size]
        self._position += size
        return chunk

    def int8(self) -> int:
        return int(_INT8.unpack(self._take(1))[0])

    def int16(self) -> int:
        return int(_INT16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_INT64.unpack(self._take(8))[0])

    def unsigned_varint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise self._error("varint is longer than 5 bytes")

    def string(self, *, compact: bool = False) -> str:
        """A string where the schema allows no null: a null one, or one that is not
        UTF-8, is an error."""
        length = self.unsigned_varint() - 1 if compact else self.int16()
        if length < 0:
            raise self._error("null string where Kafka's schema has none")
        try:
            return self._take(length).decode()
        except UnicodeDecodeError as error:
            raise self._error(f"string is not UTF-8: {error}") from error

    def nullable_string(self) -> str | None:
        """An int16-length string, None for a null one (length -1); one that is not UTF-8
        is an error (the loader skips such a record rather than stop on it)."""
        length = self.int16()
        if length == -1:
            return None
        try:
            return self._take(length).decode()
        except UnicodeDecodeError as error:
            raise self._error(f"string is not UTF-8: {error}") from error

    def bytes_(self) -> bytes:
        """Int32-length bytes; null ones (length -1) are empty."""
        length = self.int32()
        return b"" if length == -1 else self._take(length)

    def array_length(self, *, compact: bool) -> int | None:
        """An array's length, None for a null array."""
        length = self.unsigned_varint() - 1 if compact else self.int32()
        return None if length < 0 else length

    def skip_tagged_fields(self) -> None:
        for _ in range(self.unsigned_varint()):
            self.unsigned_varint()
            self._take(self.unsigned_varint())

    def tagged_fields(self) -> dict[int, bytes]:
        fields = {}
        for _ in range(self.unsigned_varint()):
            tag = self.unsigned_varint()
            fields[tag] = self._take(self.unsigned_varint())
        return fields
