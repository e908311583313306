"""What a produced record set must satisfy before a leader appends it (Kafka's LogValidator).

Works on the bytes as the client sent them: sizes and CRCs are checked over the batch
header, records are decoded only where Kafka decodes them (compacted topics need keys)
and a batch is rebuilt only when the topic's `compression.type` names a codec other
than the batch's. A refusal is an `InvalidBatch` with a typed reason, which the request
handler maps to Kafka's error code.
"""

from __future__ import annotations

import dataclasses
import enum

from strom.records import batches, compression

# compression.type values that make the broker recompress ("producer" keeps the batch's).
TOPIC_CODECS = {
    "uncompressed": compression.NONE,
    "gzip": compression.GZIP,
    "snappy": compression.SNAPPY,
    "lz4": compression.LZ4,
    "zstd": compression.ZSTD,
}


class Reason(enum.Enum):
    CORRUPT = "corrupt"  # CORRUPT_MESSAGE
    TOO_LARGE = "too_large"  # MESSAGE_TOO_LARGE
    INVALID_RECORD = "invalid_record"  # INVALID_RECORD
    # transactional batches in a request with no transactional id (Kafka answers
    # TRANSACTIONAL_ID_AUTHORIZATION_FAILED: no id is authorized to write them)
    TRANSACTIONAL_ID_REQUIRED = "transactional_id_required"


class InvalidBatch(Exception):
    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclasses.dataclass(frozen=True, slots=True)
class Rules:
    """The topic settings validation depends on."""

    max_message_bytes: int
    compacted: bool
    compression_type: str  # "producer", or a codec the broker rewrites batches into


def validate(
    data: bytearray, rules: Rules, *, transactional: bool, where: str
) -> tuple[bytearray, list[batches.BatchHeader]]:
    """The bytes to append (the same buffer, or a recompressed one) and their headers.

    `transactional`: the request carries a transactional id. `where` names the
    partition in messages ("orders-3")."""
    try:
        headers = batches.validate_produce_batches(memoryview(data), rules.max_message_bytes)
    except batches.RecordTooLargeError as error:
        raise InvalidBatch(Reason.TOO_LARGE, str(error)) from None
    except batches.InvalidRecordError as error:
        raise InvalidBatch(Reason.INVALID_RECORD, str(error)) from None
    except batches.CorruptRecordError as error:
        raise InvalidBatch(Reason.CORRUPT, str(error)) from None
    if rules.compacted and _has_null_key(data, headers):
        raise InvalidBatch(
            Reason.INVALID_RECORD,
            f"Compacted topic cannot accept message without key in topic partition {where}.",
        )
    if len(headers) != 1:
        # Kafka: produce v3+ carries exactly one batch per partition.
        raise InvalidBatch(
            Reason.INVALID_RECORD,
            f"Compressed outer record has more than one batch ({len(headers)})",
        )
    codec = TOPIC_CODECS.get(rules.compression_type)
    if codec is not None and headers[0].compression != codec:
        data, headers = _recompressed(data, headers[0], codec, rules.max_message_bytes)
    header = headers[0]
    if header.is_control:
        raise InvalidBatch(
            Reason.INVALID_RECORD, "Clients are not allowed to write control records"
        )
    if header.is_transactional and not transactional:
        raise InvalidBatch(
            Reason.TRANSACTIONAL_ID_REQUIRED,
            "Transactional records need the producer's transactional.id in the request",
        )
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidBatch(
            Reason.INVALID_RECORD,
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id}",
        )
    return data, headers


def _has_null_key(data: bytearray, headers: list[batches.BatchHeader]) -> bool:
    """Whether a record lacks a key: the one produce check that decodes (and decompresses)
    records, made only for compacted topics, as Kafka does."""
    view = memoryview(data)
    try:
        return any(
            record.key is None
            for header in headers
            for record in batches.iter_raw_records(
                view[header.position : header.position + header.size]
            )
        )
    except batches.CorruptRecordError as error:
        raise InvalidBatch(Reason.CORRUPT, str(error)) from None


def _recompressed(
    data: bytearray, header: batches.BatchHeader, codec: int, max_bytes: int
) -> tuple[bytearray, list[batches.BatchHeader]]:
    """The batch in the topic's compression.type, as Kafka rewrites it on the produce path
    (only for topics that set one: "producer", the default, keeps batches verbatim)."""
    try:
        records = list(batches.iter_raw_records(memoryview(data)[: header.size]))
        rebuilt = bytearray(batches.rebuild_batch(header, records, codec=codec))
        return rebuilt, batches.validate_produce_batches(memoryview(rebuilt), max_bytes)
    except batches.RecordTooLargeError as error:
        raise InvalidBatch(Reason.TOO_LARGE, str(error)) from None
    except batches.CorruptRecordError as error:
        raise InvalidBatch(Reason.CORRUPT, str(error)) from None
