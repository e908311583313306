"""Batch headers: parsing, validation of produce input, in-place patching."""

import contextlib
import random
import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from strom.records import batches

MAX = 1_048_588


def one_record_batch(value: bytes = b"value", timestamp: int = 1_000, **fields: int) -> bytes:
    return batches.build_batch([(b"key", value, [], timestamp)], **fields)


def with_fixed_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, 17, batches.compute_crc(batch, 0, len(batch)))
    return batch


def test_header_fields_of_a_built_batch() -> None:
    records = [(b"k", b"v", [], 1_000), (None, b"w", [("h", b"x")], 1_005)]
    batch = batches.build_batch(
        records,
        base_offset=40,
        partition_leader_epoch=3,
        producer_id=77,
        producer_epoch=2,
        base_sequence=10,
        is_transactional=True,
    )
    header = batches.BatchHeader.parse(batch)
    assert header.size == len(batch)
    assert header.base_offset == 40
    assert header.last_offset == 41
    assert header.records_count == 2
    assert header.partition_leader_epoch == 3
    assert header.magic == 2
    assert header.base_timestamp == 1_000
    assert header.max_timestamp == 1_005
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 2, 10)
    assert header.last_sequence == 11
    assert header.has_producer_id
    assert header.is_transactional
    assert not header.is_control
    assert header.compression == batches.COMPRESSION_NONE
    assert header.timestamp_type == batches.CREATE_TIME


def test_last_sequence_wraps_like_kafka() -> None:
    records = [(None, b"x", [], 0)] * 3
    batch = batches.build_batch(records, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    assert batches.BatchHeader.parse(batch).last_sequence == 0
    plain = batches.BatchHeader.parse(batches.build_batch(records))
    assert plain.last_sequence == batches.NO_SEQUENCE
    assert not plain.has_producer_id


def test_iter_batches_walks_concatenated_batches() -> None:
    buffer = one_record_batch(b"a") + one_record_batch(b"bb") + one_record_batch(b"ccc")
    headers = list(batches.iter_batches(buffer))
    assert [h.position for h in headers] == [0, headers[0].size, headers[0].size + headers[1].size]
    assert sum(h.size for h in headers) == len(buffer)


def test_a_batch_built_by_kafka_python_validates() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=5,
        producer_epoch=1,
        base_sequence=0,
        batch_size=1 << 20,
    )
    for offset in range(3):
        builder.append(offset, timestamp=2_000 + offset, key=None, value=b"v", headers=[])
    buffer = bytes(builder.build())
    (header,) = batches.validate_produce_batches(memoryview(buffer), MAX)
    assert header.records_count == 3
    assert header.last_sequence == 2
    assert [r.value for r in batches.iter_records(buffer)] == [b"v"] * 3


def test_our_batch_is_read_by_kafka_python() -> None:
    records = [(b"k1", b"v1", [("h", b"1")], 5_000), (b"k2", None, [], 5_001)]
    batch = DefaultRecordBatch(bytearray(batches.build_batch(records, base_offset=9)))
    assert batch.validate_crc()
    decoded = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert decoded == [
        (9, 5_000, b"k1", b"v1", [("h", b"1")]),
        (10, 5_001, b"k2", None, []),
    ]


def test_validation_accepts_several_batches() -> None:
    buffer = one_record_batch(b"a") + one_record_batch(b"b")
    assert len(batches.validate_produce_batches(memoryview(buffer), MAX)) == 2
    assert batches.validate_produce_batches(memoryview(b""), MAX) == []


def test_bad_crc_is_corrupt() -> None:
    batch = bytearray(one_record_batch())
    batch[-1] ^= 0xFF
    with pytest.raises(batches.CorruptRecordError, match="CRC"):
        batches.validate_produce_batches(memoryview(batch), MAX)


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 61])
def test_truncated_batch_is_corrupt(cut: int) -> None:
    batch = one_record_batch()
    with pytest.raises(batches.CorruptRecordError, match="truncated"):
        batches.validate_produce_batches(memoryview(batch[: len(batch) - cut]), MAX)


@pytest.mark.parametrize("length", [-1, 0, 48, 2**31 - 1])
def test_absurd_length_field_is_corrupt(length: int) -> None:
    batch = bytearray(one_record_batch())
    struct.pack_into(">i", batch, 8, length)
    with pytest.raises(batches.CorruptRecordError):
        batches.validate_produce_batches(memoryview(batch), MAX)


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_other_magic_is_corrupt(magic: int) -> None:
    batch = bytearray(one_record_batch())
    batch[16] = magic
    with pytest.raises(batches.CorruptRecordError, match="magic"):
        batches.validate_produce_batches(memoryview(batch), MAX)


def test_batch_above_max_is_too_large() -> None:
    batch = one_record_batch(b"x" * 1000)
    batches.validate_produce_batches(memoryview(batch), len(batch))
    with pytest.raises(batches.RecordTooLargeError):
        batches.validate_produce_batches(memoryview(batch), len(batch) - 1)


@pytest.mark.parametrize(("count", "delta"), [(0, 0), (-1, 0), (2, 0), (1, 1), (1, -1)])
def test_inconsistent_counts_are_invalid(count: int, delta: int) -> None:
    batch = bytearray(one_record_batch())
    struct.pack_into(">i", batch, 57, count)
    struct.pack_into(">i", batch, 23, delta)
    with pytest.raises(batches.InvalidRecordError):
        batches.validate_produce_batches(memoryview(with_fixed_crc(batch)), MAX)


def test_patching_offset_and_epoch_keeps_the_crc_valid() -> None:
    batch = bytearray(one_record_batch())
    header = batches.BatchHeader.parse(batch)
    batches.patch_base_offset(batch, 0, 123_456_789_000)
    batches.patch_partition_leader_epoch(memoryview(batch), 0, 42)
    (patched,) = batches.validate_produce_batches(memoryview(batch), MAX)
    assert patched.base_offset == 123_456_789_000
    assert patched.partition_leader_epoch == 42
    assert patched.crc == header.crc


def test_patching_log_append_time_rewrites_crc_and_record_timestamps() -> None:
    batch = bytearray(batches.build_batch([(None, b"a", [], 10), (None, b"b", [], 20)]))
    batches.patch_log_append_time(batch, batches.BatchHeader.parse(batch), 99_999)
    (header,) = batches.validate_produce_batches(memoryview(batch), MAX)
    assert header.timestamp_type == batches.LOG_APPEND_TIME
    assert header.max_timestamp == 99_999
    assert [r.timestamp for r in batches.iter_records(batch)] == [99_999, 99_999]


def _assert_only_record_errors(buffer: bytes) -> None:
    with contextlib.suppress(batches.CorruptRecordError, batches.RecordTooLargeError):
        batches.validate_produce_batches(memoryview(buffer), MAX)
    try:
        list(batches.iter_batches(buffer))
        list(batches.iter_records(buffer))
    except batches.RecordsError:
        pass


def test_fuzz_random_bytes_only_raise_record_errors() -> None:
    rng = random.Random(20240501)
    for _ in range(3000):
        _assert_only_record_errors(rng.randbytes(rng.randrange(0, 200)))


def test_fuzz_mutated_batches_only_raise_record_errors() -> None:
    rng = random.Random(7)
    valid = (
        batches.build_batch(
            [(b"key", b"value", [("h", b"v")], 1_000), (None, None, [], 900)],
            producer_id=1,
            producer_epoch=0,
            base_sequence=0,
        )
        + one_record_batch()
    )
    for _ in range(3000):
        mutated = bytearray(valid)
        for _ in range(rng.randrange(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        if rng.random() < 0.3:
            del mutated[rng.randrange(len(mutated)) :]
        # Fixing the CRC gets mutations past the checksum into the record decoder.
        if rng.random() < 0.5 and len(mutated) >= batches.HEADER_SIZE:
            size = min(len(mutated), batches.LOG_OVERHEAD + struct.unpack_from(">i", mutated, 8)[0])
            if size >= batches.HEADER_SIZE:
                struct.pack_into(">I", mutated, 17, batches.compute_crc(mutated, 0, size))
        _assert_only_record_errors(bytes(mutated))
