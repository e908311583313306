"""Encoding and decoding the records inside an uncompressed batch."""

import struct

import pytest
from strom.records import batches, compression


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


def with_codec(batch: bytes, codec: int) -> bytes:
    header = batches.BatchHeader.parse(batch)
    header.attributes |= codec
    return batches.rebuild_batch(header, list(batches.iter_raw_records(batch)))


@pytest.mark.parametrize(
    "codec",
    [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD],
    ids=["gzip", "snappy", "lz4", "zstd"],
)
def test_compressed_batches_decode_and_rebuild_with_their_codec(codec: int) -> None:
    records = [(f"k{i}".encode(), b"v" * i, [("h", b"x")], 1000 + i) for i in range(50)]
    plain = batches.build_batch(records, base_offset=7, producer_id=3, base_sequence=10)
    packed = with_codec(plain, codec)
    header = batches.parse_complete_header(packed, 0)
    assert header.compression == codec
    assert batches.has_valid_crc(packed, header)
    assert len(packed) < len(plain)
    assert list(batches.iter_records(packed)) == list(batches.iter_records(plain))
    # Keep every third record: offsets, producer fields and the offset span stay.
    kept = [r for r in batches.iter_raw_records(packed) if r.offset % 3 == 0]
    rebuilt = batches.rebuild_batch(header, kept)
    again = batches.parse_complete_header(rebuilt, 0)
    assert batches.has_valid_crc(rebuilt, again)
    assert (again.base_offset, again.last_offset, again.compression) == (7, 56, codec)
    assert (again.producer_id, again.base_sequence, again.records_count) == (3, 10, len(kept))
    assert again.max_timestamp == max(r.timestamp for r in kept)
    assert [r.offset for r in batches.iter_records(rebuilt)] == [r.offset for r in kept]
    assert [r.value for r in batches.iter_records(rebuilt)] == [r.value for r in kept]


def test_body_that_does_not_decompress_is_an_error() -> None:
    batch = bytearray(batches.build_batch([(None, b"a", [], 1)]))
    struct.pack_into(">h", batch, 21, batches.COMPRESSION_GZIP)
    with pytest.raises(batches.CorruptRecordError):
        list(batches.iter_records(batch))


def test_record_overrunning_its_batch_is_corrupt() -> None:
    batch = bytearray(batches.build_batch([(None, b"abc", [], 1)]))
    struct.pack_into(">i", batch, 57, 2)  # claims a second record that is not there
    with pytest.raises(batches.CorruptRecordError):
        list(batches.iter_records(batch))
