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
from strom.coordinator.record_structs import Reader, Writer
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


def encode_key(transactional_id: str) -> bytes:
    return bytes(Writer().int16(KEY_VERSION).string(transactional_id).buffer)


def parse_key(data: bytes) -> str:
    reader = Reader(data, RecordFormatError)
    version = reader.int16()
    if version != KEY_VERSION:
        raise RecordFormatError(f"unknown transaction log key version {version}")
    return reader.string()


def encode_value(value: TransactionLogValue, version: int = 0) -> bytes:
    """The value bytes. v0 has no tagged fields: the producer id links are dropped, as
    Kafka's valueToBytes only sets them when it writes v1."""
    if version not in VALUE_VERSIONS:
        raise ValueError(f"unsupported transaction log value version {version}")
    if value.state is TransactionState.EMPTY and value.partitions:
        # Kafka throws here too: an Empty transaction has no partitions
        raise ValueError(f"an Empty transaction cannot have partitions: {value}")
    flexible = version >= 1
    writer = Writer().int16(version).int64(value.producer_id)
    writer.int16(value.producer_epoch).int32(value.timeout_ms).int8(value.state)
    # Kafka writes a null list for Empty, and a (possibly empty) list otherwise
    topics = None if value.state is TransactionState.EMPTY else _group_by_topic(value.partitions)
    writer.array_length(None if topics is None else len(topics), compact=flexible)
    for topic, partition_ids in topics or ():
        writer.string(topic, compact=flexible).array_length(len(partition_ids), compact=flexible)
        for partition_id in partition_ids:
            writer.int32(partition_id)
        if flexible:
            writer.tagged_fields({})  # PartitionsSchema's own (none)
    writer.int64(value.last_update_ms).int64(value.start_ms)
    if flexible:
        writer.tagged_fields(_tagged_fields(value))
    return bytes(writer.buffer)


def parse_value(data: bytes | None) -> TransactionLogValue | None:
    """The value, or None for a tombstone."""
    if data is None:
        return None
    reader = Reader(data, RecordFormatError)
    version = reader.int16()
    if version not in VALUE_VERSIONS:
        raise RecordFormatError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    producer_id = reader.int64()
    producer_epoch = reader.int16()
    timeout_ms = reader.int32()
    state_id = reader.int8()
    try:
        state = TransactionState(state_id)
    except ValueError:
        raise RecordFormatError(f"unknown transaction state id {state_id}") from None
    partitions = set()
    for _ in range(reader.array_length(compact=flexible) or 0):
        topic = reader.string(compact=flexible)
        for _ in range(reader.array_length(compact=flexible) or 0):
            partitions.add((topic, reader.int32()))
        if flexible:
            reader.skip_tagged_fields()
    last_update_ms = reader.int64()
    start_ms = reader.int64()
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


def _tagged_fields(value: TransactionLogValue) -> dict[int, bytes]:
    """The tagged fields that differ from their defaults (Kafka writes only those)."""
    fields = [
        (_TAG_PREVIOUS_PRODUCER_ID, ">q", value.previous_producer_id, -1),
        (_TAG_NEXT_PRODUCER_ID, ">q", value.next_producer_id, -1),
        (_TAG_CLIENT_TRANSACTION_VERSION, ">h", value.client_transaction_version, 0),
        (_TAG_NEXT_PRODUCER_EPOCH, ">h", value.next_producer_epoch, -1),
    ]
    return {tag: struct.pack(fmt, field) for tag, fmt, field, default in fields if field != default}


def _tagged_int(tagged: dict[int, bytes], tag: int, fmt: str, default: int) -> int:
    if tag not in tagged:
        return default
    if len(tagged[tag]) != struct.calcsize(fmt):
        raise RecordFormatError(f"tagged field {tag} has {len(tagged[tag])} bytes")
    return int(struct.unpack(fmt, tagged[tag])[0])
