"""The records of `__transaction_state`, in Kafka's own formats so Kafka's tools can read
them: TransactionLogKey v0 and TransactionLogValue v0 (fixed) and v1 (flexible, with
tagged fields). A null value is a tombstone: the transactional id expired.

The schemas are Kafka's transaction-coordinator/src/main/resources/common/message/
TransactionLog{Key,Value}.json, the encoding rules those of TransactionLog.valueToBytes
(core/.../transaction/TransactionLog.scala, TransactionLog.java in 4.x).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from strom.coordinator import offsets_records
from strom.coordinator.txn_states import TransactionState

TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSIONS = (0, 1)

# TransactionLogValue's tagged fields (v1+); each is written only when it differs from
# its default
_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2
# Kafka 4.3 (KIP-939): read and written back, never set by Strom's coordinator
_TAG_NEXT_PRODUCER_EPOCH = 3


class RecordFormatError(offsets_records.RecordFormatError):
    """A record of __transaction_state that we cannot read."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    next_producer_epoch: int = -1


class _Writer:
    def __init__(self) -> None:
        self.buffer = bytearray()

    def pack(self, fmt: str, value: int) -> _Writer:
        self.buffer += struct.pack(fmt, value)
        return self

    def unsigned_varint(self, value: int) -> _Writer:
        while value >= 0x80:
            self.buffer.append((value & 0x7F) | 0x80)
            value >>= 7
        self.buffer.append(value)
        return self

    def string(self, value: str, *, compact: bool) -> _Writer:
        encoded = value.encode()
        if compact:
            self.unsigned_varint(len(encoded) + 1)
        else:
            self.pack(">h", len(encoded))
        self.buffer += encoded
        return self

    def array_length(self, length: int | None, *, compact: bool) -> _Writer:
        if compact:
            return self.unsigned_varint(0 if length is None else length + 1)
        return self.pack(">i", -1 if length is None else length)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def _take(self, size: int) -> bytes:
        if size < 0 or self._position + size > len(self._data):
            raise RecordFormatError("record is truncated")
        chunk = self._data[self._position : self._position + size]
        self._position += size
        return chunk

    def unpack(self, fmt: str) -> int:
        return int(struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0])

    def unsigned_varint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RecordFormatError("varint is longer than 5 bytes")

    def string(self, *, compact: bool) -> str:
        length = self.unsigned_varint() - 1 if compact else self.unpack(">h")
        if length < 0:
            raise RecordFormatError("null string where Kafka's schema has none")
        try:
            return self._take(length).decode()
        except UnicodeDecodeError as error:
            raise RecordFormatError(f"string is not UTF-8: {error}") from error

    def array_length(self, *, compact: bool) -> int | None:
        length = self.unsigned_varint() - 1 if compact else self.unpack(">i")
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


def encode_key(transactional_id: str) -> bytes:
    return bytes(_Writer().pack(">h", KEY_VERSION).string(transactional_id, compact=False).buffer)


def parse_key(data: bytes) -> str:
    reader = _Reader(data)
    version = reader.unpack(">h")
    if version != KEY_VERSION:
        raise RecordFormatError(f"unknown transaction log key version {version}")
    return reader.string(compact=False)


def encode_value(value: TransactionLogValue, version: int = 0) -> bytes:
    """The value bytes. v0 has no tagged fields: the producer id links are dropped, as
    Kafka's valueToBytes only sets them when it writes v1."""
    if version not in VALUE_VERSIONS:
        raise ValueError(f"unsupported transaction log value version {version}")
    if value.state is TransactionState.EMPTY and value.partitions:
        # Kafka throws here too: an Empty transaction has no partitions
        raise ValueError(f"an Empty transaction cannot have partitions: {value}")
    flexible = version >= 1
    writer = _Writer().pack(">h", version).pack(">q", value.producer_id)
    writer.pack(">h", value.producer_epoch).pack(">i", value.timeout_ms).pack(">b", value.state)
    # Kafka writes a null list for Empty, and a (possibly empty) list otherwise
    topics = None if value.state is TransactionState.EMPTY else _group_by_topic(value.partitions)
    writer.array_length(None if topics is None else len(topics), compact=flexible)
    for topic, partition_ids in topics or ():
        writer.string(topic, compact=flexible).array_length(len(partition_ids), compact=flexible)
        for partition_id in partition_ids:
            writer.pack(">i", partition_id)
        if flexible:
            writer.unsigned_varint(0)  # PartitionsSchema's own tagged fields
    writer.pack(">q", value.last_update_ms).pack(">q", value.start_ms)
    if flexible:
        _write_tagged_fields(writer, value)
    return bytes(writer.buffer)


def parse_value(data: bytes | None) -> TransactionLogValue | None:
    """The value, or None for a tombstone."""
    if data is None:
        return None
    reader = _Reader(data)
    version = reader.unpack(">h")
    if version not in VALUE_VERSIONS:
        raise RecordFormatError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    producer_id = reader.unpack(">q")
    producer_epoch = reader.unpack(">h")
    timeout_ms = reader.unpack(">i")
    state_id = reader.unpack(">b")
    try:
        state = TransactionState(state_id)
    except ValueError:
        raise RecordFormatError(f"unknown transaction state id {state_id}") from None
    partitions = set()
    for _ in range(reader.array_length(compact=flexible) or 0):
        topic = reader.string(compact=flexible)
        for _ in range(reader.array_length(compact=flexible) or 0):
            partitions.add((topic, reader.unpack(">i")))
        if flexible:
            reader.skip_tagged_fields()
    last_update_ms = reader.unpack(">q")
    start_ms = reader.unpack(">q")
    tagged = reader.tagged_fields() if flexible else {}
    return TransactionLogValue(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        timeout_ms=timeout_ms,
        state=state,
        # Kafka ignores the partitions of an Empty record when it loads one
        partitions=frozenset() if state is TransactionState.EMPTY else frozenset(partitions),
        last_update_ms=last_update_ms,
        start_ms=start_ms,
        previous_producer_id=_tagged_int(tagged, _TAG_PREVIOUS_PRODUCER_ID, ">q", -1),
        next_producer_id=_tagged_int(tagged, _TAG_NEXT_PRODUCER_ID, ">q", -1),
        client_transaction_version=_tagged_int(tagged, _TAG_CLIENT_TRANSACTION_VERSION, ">h", 0),
        next_producer_epoch=_tagged_int(tagged, _TAG_NEXT_PRODUCER_EPOCH, ">h", -1),
    )


def partition_for(transactional_id: str, partition_count: int) -> int:
    """The `__transaction_state` partition of a transactional id: the same hash as the
    group coordinator's (TransactionStateManager.partitionFor)."""
    return offsets_records.partition_for(transactional_id, partition_count)


def _group_by_topic(partitions: Iterable[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return [(topic, sorted(by_topic[topic])) for topic in sorted(by_topic)]


def _write_tagged_fields(writer: _Writer, value: TransactionLogValue) -> None:
    fields = [
        (_TAG_PREVIOUS_PRODUCER_ID, ">q", value.previous_producer_id, -1),
        (_TAG_NEXT_PRODUCER_ID, ">q", value.next_producer_id, -1),
        (_TAG_CLIENT_TRANSACTION_VERSION, ">h", value.client_transaction_version, 0),
        (_TAG_NEXT_PRODUCER_EPOCH, ">h", value.next_producer_epoch, -1),
    ]
    present = [(tag, fmt, field) for tag, fmt, field, default in fields if field != default]
    writer.unsigned_varint(len(present))
    for tag, fmt, field in present:
        writer.unsigned_varint(tag).unsigned_varint(struct.calcsize(fmt)).pack(fmt, field)


def _tagged_int(tagged: dict[int, bytes], tag: int, fmt: str, default: int) -> int:
    if tag not in tagged:
        return default
    if len(tagged[tag]) != struct.calcsize(fmt):
        raise RecordFormatError(f"tagged field {tag} has {len(tagged[tag])} bytes")
    return int(struct.unpack(fmt, tagged[tag])[0])
