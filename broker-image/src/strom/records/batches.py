"""Record batch headers (magic v2): parsing, walking, produce-path validation, in-place patching.

A batch is handled as raw bytes. Only its 61-byte header is parsed; records stay encoded.
Layout (big-endian), offsets within the batch::

    0  baseOffset int64          27 baseTimestamp int64
    8  batchLength int32         35 maxTimestamp int64
    12 partitionLeaderEpoch int32 43 producerId int64
    16 magic int8                51 producerEpoch int16
    17 crc uint32                53 baseSequence int32
    21 attributes int16          57 recordsCount int32
    23 lastOffsetDelta int32     61 records...

The CRC32C covers the bytes from ``attributes`` to the end of the batch, so ``baseOffset``
and ``partitionLeaderEpoch`` can be patched without recomputing it.

The exceptions say why a buffer was refused; the server maps each to a Kafka error code.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import crc32c

from strom.records import compression

HEADER_FORMAT = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER_FORMAT.size  # 61
# baseOffset + batchLength: the part of the header not counted by batchLength.
LOG_OVERHEAD = 12
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

MAGIC_V2 = 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

CREATE_TIME = 0
LOG_APPEND_TIME = 1

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

_INT32_MAX = 2**31 - 1

_BASE_OFFSET = struct.Struct(">q")
_PARTITION_LEADER_EPOCH_AT = 12
_INT32 = struct.Struct(">i")
_MAGIC_AT = 16
_CRC_AT = 17
_CRC = struct.Struct(">I")
_ATTRIBUTES_AT = 21
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP_AT = 35
_INT64 = struct.Struct(">q")


class RecordsError(Exception):
    """Base of the errors raised for bad record batches."""


class CorruptRecordError(RecordsError):
    """Not a whole, CRC-valid v2 batch (Kafka CORRUPT_MESSAGE)."""


class InvalidRecordError(CorruptRecordError):
    """A well-formed batch whose contents are inconsistent (Kafka INVALID_RECORD)."""


class RecordTooLargeError(RecordsError):
    """A batch larger than the topic's max.message.bytes (Kafka MESSAGE_TOO_LARGE)."""


class BatchHeader:
    """The header of one batch, parsed once; ``position`` is where it starts in its buffer."""

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "position",
        "producer_epoch",
        "producer_id",
        "records_count",
    )

    def __init__(
        self,
        position: int,
        base_offset: int,
        batch_length: int,
        partition_leader_epoch: int,
        magic: int,
        crc: int,
        attributes: int,
        last_offset_delta: int,
        base_timestamp: int,
        max_timestamp: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        records_count: int,
    ) -> None:
        self.position = position
        self.base_offset = base_offset
        self.batch_length = batch_length
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.records_count = records_count

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
        """Parse the header at ``position``; no validation beyond having 61 bytes to read."""
        if position < 0 or len(buf) - position < HEADER_SIZE:
            raise CorruptRecordError(
                f"truncated batch header at position {position}: "
                f"{max(0, len(buf) - position)} bytes left, need {HEADER_SIZE}"
            )
        return cls(position, *HEADER_FORMAT.unpack_from(buf, position))

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """``CREATE_TIME`` or ``LOG_APPEND_TIME``."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_FLAG else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from int32 max to 0 as in Kafka."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    def __repr__(self) -> str:
        return (
            f"BatchHeader(position={self.position}, base_offset={self.base_offset}, "
            f"last_offset={self.last_offset}, size={self.size}, records={self.records_count}, "
            f"producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"base_sequence={self.base_sequence}, max_timestamp={self.max_timestamp})"
        )


def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def compute_crc(buf: bytes | bytearray | memoryview, position: int, size: int) -> int:
    """CRC32C of a batch as stored in its crc field (attributes to end of batch)."""
    return int(crc32c.crc32c(memoryview(buf)[position + _ATTRIBUTES_AT : position + size]))


def has_valid_crc(buf: bytes | bytearray | memoryview, header: BatchHeader) -> bool:
    return compute_crc(buf, header.position, header.size) == header.crc


def parse_complete_header(buf: bytes | bytearray | memoryview, position: int) -> BatchHeader:
    """Parse the header at ``position`` and check the whole v2 batch lies inside ``buf``."""
    available = len(buf) - position
    if available < LOG_OVERHEAD:
        raise CorruptRecordError(f"truncated batch at position {position}: {available} bytes left")
    (batch_length,) = _INT32.unpack_from(buf, position + 8)
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {position} has length {batch_length}, "
            f"less than the minimum {MIN_BATCH_LENGTH}"
        )
    if LOG_OVERHEAD + batch_length > available:
        raise CorruptRecordError(
            f"truncated batch at position {position}: length field says "
            f"{LOG_OVERHEAD + batch_length} bytes, {available} left"
        )
    header = BatchHeader.parse(buf, position)
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(
            f"batch at position {position} has magic {header.magic}; only magic 2 is supported"
        )
    return header


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[BatchHeader]:
    """Walk concatenated whole v2 batches; a truncated or non-v2 batch raises CorruptRecordError.

    Only lengths and magic are checked, not CRCs.
    """
    position = 0
    end = len(buf)
    while position < end:
        header = parse_complete_header(buf, position)
        yield header
        position += header.size


def validate_produce_batches(buf: memoryview, max_batch_bytes: int) -> list[BatchHeader]:
    """Check the batches of a produce request before they are written to a log.

    Raises ``RecordTooLargeError`` for a batch above ``max_batch_bytes``, ``InvalidRecordError``
    (a ``CorruptRecordError``) for a well-formed batch with inconsistent counts, and
    ``CorruptRecordError`` for anything else that is not a whole, CRC-valid v2 batch.
    Garbage input never raises anything else. An empty buffer yields no batches.
    """
    headers = []
    for header in iter_batches(buf):
        if header.size > max_batch_bytes:
            raise RecordTooLargeError(
                f"batch at position {header.position} is {header.size} bytes, "
                f"more than the maximum {max_batch_bytes}"
            )
        if not has_valid_crc(buf, header):
            raise CorruptRecordError(f"batch at position {header.position} fails its CRC check")
        if header.compression > COMPRESSION_ZSTD:
            raise InvalidRecordError(
                f"batch at position {header.position} has unknown compression {header.compression}"
            )
        # Kafka's LogValidator: an empty batch or one whose offset range disagrees with its
        # record count is rejected rather than assigned a misleading range of offsets.
        if header.records_count <= 0:
            raise InvalidRecordError(
                f"batch at position {header.position} has record count {header.records_count}"
            )
        if header.last_offset_delta != header.records_count - 1:
            raise InvalidRecordError(
                f"batch at position {header.position} has last offset delta "
                f"{header.last_offset_delta} for {header.records_count} records"
            )
        headers.append(header)
    return headers


def patch_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Set baseOffset in place; not covered by the CRC."""
    _BASE_OFFSET.pack_into(buf, position, base_offset)


def patch_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Set partitionLeaderEpoch in place; not covered by the CRC."""
    _INT32.pack_into(buf, position + _PARTITION_LEADER_EPOCH_AT, epoch)


def patch_log_append_time(
    buf: bytearray | memoryview, header: BatchHeader, timestamp_ms: int
) -> None:
    """Stamp a batch with the broker's time (topics with LogAppendTime), as Kafka does.

    Sets the timestamp-type attribute and maxTimestamp, which the CRC covers, so the CRC is
    recomputed: the one produce-path change that costs a pass over the batch.
    """
    position = header.position
    _ATTRIBUTES.pack_into(buf, position + _ATTRIBUTES_AT, header.attributes | TIMESTAMP_TYPE_FLAG)
    _INT64.pack_into(buf, position + _MAX_TIMESTAMP_AT, timestamp_ms)
    _CRC.pack_into(buf, position + _CRC_AT, compute_crc(buf, position, header.size))


# -- records inside a batch -----------------------------------------------------------
#
# A pure-Python encoder and decoder for uncompressed batches, used by tests and for the
# broker's own internal topics; the produce and fetch paths never decode records. Record
# layout (varints zigzag-encoded): length varint, attributes int8, timestampDelta varlong,
# offsetDelta varint, keyLength varint (-1 = null), key, valueLength varint, value,
# headerCount varint, then per header keyLength varint, key (UTF-8), valueLength varint, value.

HeaderList = Sequence[tuple[str, bytes | None]]


class NewRecord(NamedTuple):
    """A record to encode; plain ``(key, value, headers, timestamp)`` tuples work too."""

    key: bytes | None
    value: bytes | None
    headers: HeaderList
    timestamp: int


class Record(NamedTuple):
    """A decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _write_varint(out: bytearray, value: int) -> None:
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


def _encode_record(
    record: tuple[bytes | None, bytes | None, HeaderList, int],
    offset_delta: int,
    base_timestamp: int,
) -> bytes:
    key, value, headers, timestamp = record
    body = bytearray(b"\x00")  # record attributes: unused in v2
    _write_varint(body, timestamp - base_timestamp)
    _write_varint(body, offset_delta)
    _write_bytes(body, key)
    _write_bytes(body, value)
    _write_varint(body, len(headers))
    for header_key, header_value in headers:
        _write_bytes(body, header_key.encode())
        _write_bytes(body, header_value)
    out = bytearray()
    _write_varint(out, len(body))
    return bytes(out + body)


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None, HeaderList, int]],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """Encode records as one uncompressed CreateTime v2 batch with a valid CRC."""
    if not records:
        raise ValueError("a batch needs at least one record")
    base_timestamp = records[0][3]
    max_timestamp = max(record[3] for record in records)
    body = b"".join(
        _encode_record(record, offset_delta, base_timestamp)
        for offset_delta, record in enumerate(records)
    )
    attributes = COMPRESSION_NONE
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    batch = bytearray(HEADER_SIZE) + body
    HEADER_FORMAT.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_V2,
        0,  # crc, filled in below
        attributes,
        len(records) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    crc = compute_crc(batch, 0, len(batch))
    batch[17:21] = crc.to_bytes(4, "big")
    return bytes(batch)


class _Reader:
    """Bounds-checked cursor over one batch's record bytes."""

    __slots__ = ("buf", "end", "position")

    def __init__(self, buf: memoryview, position: int, end: int) -> None:
        self.buf = buf
        self.position = position
        self.end = end

    def varint(self) -> int:
        result = 0
        shift = 0
        while True:
            if self.position >= self.end:
                raise CorruptRecordError("record truncated inside a varint")
            byte = self.buf[self.position]
            self.position += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 63:
                raise CorruptRecordError("varint longer than 10 bytes")

    def byte(self) -> int:
        if self.position >= self.end:
            raise CorruptRecordError("record truncated")
        value = self.buf[self.position]
        self.position += 1
        return value

    def nullable_bytes(self) -> bytes | None:
        length = self.varint()
        if length < 0:
            return None
        if length > self.end - self.position:
            raise CorruptRecordError(f"record field of {length} bytes overruns its record")
        data = bytes(self.buf[self.position : self.position + length])
        self.position += length
        return data


class RawRecord(NamedTuple):
    """A record as stored: its absolute offset and timestamp, key, value, and ``encoded``,
    the record's bytes with their length prefix, which can be copied into another batch
    with the same base offset and base timestamp unchanged."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    encoded: memoryview


def records_body(batch: bytes | bytearray | memoryview) -> tuple[BatchHeader, memoryview]:
    """The header of the batch at the start of ``batch`` and its records' bytes,
    decompressed if need be (``CorruptRecordError`` if they do not)."""
    view = memoryview(batch)
    header = parse_complete_header(view, 0)
    body = view[HEADER_SIZE : header.size]
    if header.compression != COMPRESSION_NONE:
        try:
            body = memoryview(compression.decompress(header.compression, body))
        except compression.CompressionError as error:
            raise CorruptRecordError(f"batch at offset {header.base_offset}: {error}") from error
    return header, body


def iter_raw_records(batch: bytes | bytearray | memoryview) -> Iterator[RawRecord]:
    """Decode the records of the batch at the start of ``batch``, of any codec.

    Raises ``CorruptRecordError`` for malformed records or a body that does not
    decompress. With LogAppendTime every record carries the
    batch's max timestamp.
    """
    header, body = records_body(batch)
    log_append_time = header.timestamp_type == LOG_APPEND_TIME
    reader = _Reader(body, 0, len(body))
    for _ in range(header.records_count):
        record_start = reader.position
        length = reader.varint()
        if length < 0 or length > reader.end - reader.position:
            raise CorruptRecordError(f"record length {length} overruns the batch")
        record_end = reader.position + length
        record = _Reader(body, reader.position, record_end)
        record.byte()  # attributes
        timestamp_delta = record.varint()
        offset_delta = record.varint()
        key = record.nullable_bytes()
        value = record.nullable_bytes()
        header_count = record.varint()
        if header_count < 0 or header_count > length:
            raise CorruptRecordError(f"record has {header_count} headers")
        record_headers = []
        for _ in range(header_count):
            header_key = record.nullable_bytes()
            if header_key is None:
                raise CorruptRecordError("record header with a null key")
            try:
                decoded_key = header_key.decode()
            except UnicodeDecodeError as exc:
                raise CorruptRecordError("record header key is not UTF-8") from exc
            record_headers.append((decoded_key, record.nullable_bytes()))
        if record.position != record_end:
            raise CorruptRecordError("record length disagrees with its fields")
        reader.position = record_end
        timestamp = (
            header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
        )
        yield RawRecord(
            header.base_offset + offset_delta,
            timestamp,
            key,
            value,
            record_headers,
            body[record_start:record_end],
        )
    if reader.position != len(body):
        raise CorruptRecordError("batch has bytes after its last record")


def iter_records(batch: bytes | bytearray | memoryview) -> Iterator[Record]:
    """Decode the records of the batch at the start of ``batch``, of any codec."""
    for raw in iter_raw_records(batch):
        yield Record(raw.offset, raw.timestamp, raw.key, raw.value, raw.headers)


def rebuild_batch(
    header: BatchHeader,
    kept: Sequence[RawRecord],
    max_timestamp: int | None = None,
    codec: int | None = None,
) -> bytes:
    """A batch holding only ``kept`` records of the batch ``header`` describes.

    Base offset, last offset delta, base timestamp, producer fields, leader epoch and
    attributes stay as they were, so the kept records keep their offsets and a producer's
    sequence range is unchanged; the records are compressed with ``codec`` (by default the
    batch's own), and the max timestamp (CreateTime) is that of the kept records. With no
    record kept it is an empty batch that still covers its offsets.
    """
    body = b"".join(bytes(record.encoded) for record in kept)
    target = header.compression if codec is None else codec
    attributes = (header.attributes & ~COMPRESSION_MASK) | target
    if not kept:
        # Kafka writes an emptied batch uncompressed: there is nothing to decompress.
        attributes &= ~COMPRESSION_MASK
    elif target != COMPRESSION_NONE:
        body = compression.compress(target, body)
    if max_timestamp is None:
        max_timestamp = header.max_timestamp
        if header.timestamp_type == CREATE_TIME and kept:
            max_timestamp = max(record.timestamp for record in kept)
    batch = bytearray(HEADER_SIZE) + body
    HEADER_FORMAT.pack_into(
        batch,
        0,
        header.base_offset,
        len(batch) - LOG_OVERHEAD,
        header.partition_leader_epoch,
        MAGIC_V2,
        0,  # crc, filled in below
        attributes,
        header.last_offset_delta,
        header.base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(kept),
    )
    _CRC.pack_into(batch, _CRC_AT, compute_crc(batch, 0, len(batch)))
    return bytes(batch)
