"""Encoding and decoding the records inside an uncompressed batch."""

import struct

import pytest
from strom.records import batches


def test_round_trip_keeps_keys_values_headers_and_timestamps() -> None:
    records = [
        batches.NewRecord(b"k", b"v", [("a", b"1"), ("b", None)], 1_000),
        batches.NewRecord(None, None, [], 990),  # earlier than the first: negative delta
        batches.NewRecord(b"", b"x" * 300, [("ü", b"")], 2_000),
    ]
    batch = batches.build_batch(records, base_offset=100)
    decoded = list(batches.iter_records(batch))
    assert decoded == [
        batches.Record(100, 1_000, b"k", b"v", [("a", b"1"), ("b", None)]),
        batches.Record(101, 990, None, None, []),
        batches.Record(102, 2_000, b"", b"x" * 300, [("ü", b"")]),
    ]
    assert batches.BatchHeader.parse(batch).max_timestamp == 2_000


def test_decoded_offsets_follow_a_patched_base_offset() -> None:
    batch = bytearray(batches.build_batch([(None, b"a", [], 1), (None, b"b", [], 2)]))
    batches.patch_base_offset(batch, 0, 5_000)
    assert [r.offset for r in batches.iter_records(batch)] == [5_000, 5_001]


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError):
        batches.build_batch([])


def test_compressed_batch_is_not_decoded() -> None:
    batch = bytearray(batches.build_batch([(None, b"a", [], 1)]))
    struct.pack_into(">h", batch, 21, batches.COMPRESSION_GZIP)
    with pytest.raises(batches.UnsupportedCompressionError):
        list(batches.iter_records(batch))


def test_record_overrunning_its_batch_is_corrupt() -> None:
    batch = bytearray(batches.build_batch([(None, b"abc", [], 1)]))
    struct.pack_into(">i", batch, 57, 2)  # claims a second record that is not there
    with pytest.raises(batches.CorruptRecordError):
        list(batches.iter_records(batch))
