"""The shared big-endian writer and reader of the internal topics' records."""

import pytest
from strom.coordinator.record_structs import Reader, Writer


class Unreadable(Exception):
    pass


def reader(data: bytes | bytearray) -> Reader:
    return Reader(bytes(data), Unreadable)


def test_integers_are_big_endian_and_read_back() -> None:
    writer = Writer().int8(-2).int16(0x0102).int32(-1).int64(1 << 40)
    assert bytes(writer.buffer) == bytes.fromhex("fe0102ffffffff0000010000000000")
    read = reader(writer.buffer)
    assert (read.int8(), read.int16(), read.int32(), read.int64()) == (-2, 0x0102, -1, 1 << 40)


@pytest.mark.parametrize("value", [0, 1, 0x7F, 0x80, 300, 0xFFFFFFFF])
def test_unsigned_varint(value: int) -> None:
    assert reader(Writer().unsigned_varint(value).buffer).unsigned_varint() == value


def test_unsigned_varint_longer_than_five_bytes() -> None:
    with pytest.raises(Unreadable, match="longer than 5 bytes"):
        reader(b"\xff" * 6).unsigned_varint()


def test_strings_plain_and_compact() -> None:
    assert bytes(Writer().string("ab").buffer) == b"\x00\x02ab"
    assert bytes(Writer().string("ab", compact=True).buffer) == b"\x03ab"
    assert bytes(Writer().string(None).buffer) == b"\xff\xff"
    assert bytes(Writer().string(None, compact=True).buffer) == b"\x00"
    assert reader(b"\x00\x02ab").string() == "ab"
    assert reader(b"\x03ab").string(compact=True) == "ab"


def test_a_null_string_where_none_is_allowed() -> None:
    with pytest.raises(Unreadable, match="null string"):
        reader(b"\xff\xff").string()
    with pytest.raises(Unreadable, match="not UTF-8"):
        reader(b"\x00\x01\xff").string()


def test_nullable_string() -> None:
    assert reader(b"\xff\xff").nullable_string() is None
    assert reader(b"\x00\x01a").nullable_string() == "a"
    with pytest.raises(Unreadable, match="not UTF-8"):  # a format error: the loader skips it
        reader(b"\x00\x01\xff").nullable_string()


def test_bytes() -> None:
    assert bytes(Writer().bytes_(b"xy").buffer) == b"\x00\x00\x00\x02xy"
    assert reader(b"\x00\x00\x00\x02xy").bytes_() == b"xy"
    assert reader(b"\xff\xff\xff\xff").bytes_() == b""


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("length", [None, 0, 3])
def test_array_length(length: int | None, compact: bool) -> None:
    written = Writer().array_length(length, compact=compact).buffer
    assert reader(written).array_length(compact=compact) == length


def test_tagged_fields() -> None:
    written = Writer().tagged_fields({0: b"\x01\x02", 3: b""}).int8(7).buffer
    assert bytes(written) == b"\x02\x00\x02\x01\x02\x03\x00\x07"
    assert reader(written).tagged_fields() == {0: b"\x01\x02", 3: b""}
    skipping = reader(written)
    skipping.skip_tagged_fields()
    assert skipping.int8() == 7
    assert bytes(Writer().tagged_fields({}).buffer) == b"\x00"


def test_truncated_raises_the_given_error() -> None:
    with pytest.raises(Unreadable, match="truncated"):
        reader(b"\x00").int16()
    with pytest.raises(Unreadable, match="truncated"):
        reader(b"\x00\x05ab").string()
