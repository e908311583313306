"""Produce: validate batches as bytes, assign offsets by patching them, append verbatim.

Batches are never re-encoded: the CRC is checked over the bytes the client sent, the
base offset (outside the CRC) is patched in place, and the same bytes go to the log.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import metadata as cluster_metadata
from strom.protocol import apis, shaping
from strom.records import batches as record_batches
from strom.records import compression
from strom.server import connection
from strom.storage import producer_state

if TYPE_CHECKING:
    from strom.server.broker import Broker
    from strom.server.dispatch import RequestContext

log = logging.getLogger(__name__)

_ZERO_UUID = uuid.UUID(int=0)
# compression.type values that make the broker recompress ("producer" keeps the batch's).
_TOPIC_CODECS = {
    "uncompressed": compression.NONE,
    "gzip": compression.GZIP,
    "snappy": compression.SNAPPY,
    "lz4": compression.LZ4,
    "zstd": compression.ZSTD,
}
_VALID_ACKS = (-1, 0, 1)


class AcksZeroFailure(connection.CloseConnection):
    """A produce with acks=0 failed: Kafka closes the connection so the client notices."""


def _partition_result(
    index: int, error: ErrorCode, message: str | None = None, **fields: Any
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "index": index,
        "error_code": error,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "record_errors": (),
        "error_message": message,
    }
    result.update(fields)
    return result


async def handle_produce(broker: Broker, request: apis.Request, context: RequestContext) -> Any:
    body = request.body
    acks = int(body.acks)
    responses = []
    failed = False
    for topic_data in body.topic_data:
        name, topic_id = _resolve_topic(broker, topic_data)
        results = []
        for partition_data in topic_data.partition_data:
            index = int(partition_data.index)
            if acks not in _VALID_ACKS:
                result = _partition_result(index, ErrorCode.invalid_required_acks)
            elif name is None:
                error = (
                    ErrorCode.unknown_topic_id if topic_id else ErrorCode.unknown_topic_or_partition
                )
                result = _partition_result(index, error)
            elif name in cluster_metadata.INTERNAL_TOPICS:
                result = _partition_result(
                    index,
                    ErrorCode.invalid_topic_exception,
                    f"Cannot append to internal topic {name}",
                )
            else:
                result = _append(broker, name, index, partition_data.records, acks, body)
            if result["error_code"] != ErrorCode.none:
                failed = True
                broker.metrics.request_errors.labels("PRODUCE", result["error_code"].name).inc()
            results.append(result)
        responses.append(
            {
                "name": name or getattr(topic_data, "name", ""),
                "topic_id": topic_id or _ZERO_UUID,
                "partition_responses": results,
            }
        )
    if acks == 0:
        if failed:
            raise AcksZeroFailure("a produce request with acks=0 failed")
        return None
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"responses": responses, "throttle_time": 0})


def _resolve_topic(broker: Broker, topic_data: Any) -> tuple[str | None, uuid.UUID | None]:
    topic_id = getattr(topic_data, "topic_id", None)
    if topic_id is not None and topic_id != _ZERO_UUID:
        topic = broker.metadata.topic_by_id(topic_id)
        return (topic.name if topic else None), topic_id
    name = str(topic_data.name)
    topic = broker.metadata.image.topics.get(name)
    return (name if topic else None), (topic.topic_id if topic else None)


def _append(
    broker: Broker, topic: str, index: int, records: bytes | None, acks: int, body: Any
) -> dict[str, Any]:
    partition = broker.partition(topic, index)
    if partition is None:
        return _partition_result(index, ErrorCode.unknown_topic_or_partition)
    if not records:
        # An empty record set is not an error in Kafka: nothing is appended.
        return _partition_result(
            index, ErrorCode.none, log_start_offset=partition.log.log_start_offset
        )
    topic_config = broker.topic_config(topic)
    if acks == -1 and topic_config.min_insync_replicas > 1:
        # The ISR of a single node is the leader alone.
        return _partition_result(
            index,
            ErrorCode.not_enough_replicas,
            f"The size of the current ISR {{{broker.node_id}}} is insufficient to satisfy "
            f"the min.isr requirement of {topic_config.min_insync_replicas}",
        )
    data = bytearray(records)
    try:
        headers = record_batches.validate_produce_batches(
            memoryview(data), topic_config.max_message_bytes
        )
    except record_batches.RecordTooLargeError as error:
        return _partition_result(index, ErrorCode.message_too_large, str(error))
    except record_batches.InvalidRecordError as error:
        return _partition_result(index, ErrorCode.invalid_record, str(error))
    except record_batches.CorruptRecordError as error:
        log.warning("rejected corrupt batch for %s-%d: %s", topic, index, error)
        return _partition_result(index, ErrorCode.corrupt_message, str(error))
    try:
        keyless = "compact" in topic_config.cleanup_policy and _has_null_key(data, headers)
    except record_batches.CorruptRecordError as error:
        return _partition_result(index, ErrorCode.corrupt_message, str(error))
    if keyless:
        return _partition_result(
            index,
            ErrorCode.invalid_record,
            f"Compacted topic cannot accept message without key in topic partition "
            f"{topic}-{index}.",
        )
    if len(headers) != 1:
        # Kafka: produce v3+ carries exactly one batch per partition.
        return _partition_result(
            index,
            ErrorCode.invalid_record,
            f"Compressed outer record has more than one batch ({len(headers)})",
        )
    codec = _TOPIC_CODECS.get(topic_config.compression_type)
    if codec is not None and headers[0].compression != codec:
        try:
            data, headers = _recompressed(data, headers[0], codec, topic_config.max_message_bytes)
        except record_batches.RecordTooLargeError as error:
            return _partition_result(index, ErrorCode.message_too_large, str(error))
        except record_batches.CorruptRecordError as error:
            return _partition_result(index, ErrorCode.corrupt_message, str(error))
    if any(h.is_transactional for h in headers) or body.transactional_id is not None:
        return _partition_result(
            index,
            ErrorCode.transactional_id_authorization_failed,
            "Transactions are not supported by this broker yet",
        )
    try:
        result = partition.append(data, headers, now_ms=broker.clock())
    except producer_state.OutOfOrderSequenceError as error:
        return _partition_result(index, ErrorCode.out_of_order_sequence_number, str(error))
    except producer_state.InvalidProducerEpochError as error:
        return _partition_result(index, ErrorCode.invalid_producer_epoch, str(error))
    except OSError as error:
        # A full disk or a failing one: the segment cut the partial write back off, so
        # the log is as it was; the producer may retry once space is back.
        log.error("cannot append to %s-%d: %s", topic, index, error)
        broker.metrics.storage_errors.labels(error.strerror or type(error).__name__).inc()
        return _partition_result(
            index,
            ErrorCode.kafka_storage_error,
            f"Disk error when trying to append to {topic}-{index}: {error.strerror or error}",
        )
    if not result.duplicate:
        broker.metrics.bytes_in.labels(topic).inc(len(data))
        broker.metrics.messages_in.labels(topic).inc(sum(h.records_count for h in headers))
    return _partition_result(
        index,
        ErrorCode.none,
        base_offset=result.base_offset,
        log_append_time=result.log_append_time_ms,
        log_start_offset=result.log_start_offset,
    )


def _has_null_key(data: bytearray, headers: list[record_batches.BatchHeader]) -> bool:
    """Whether a record lacks a key: the one produce check that decodes (and decompresses)
    records, made only for compacted topics, as Kafka does."""
    view = memoryview(data)
    return any(
        record.key is None
        for header in headers
        for record in record_batches.iter_raw_records(
            view[header.position : header.position + header.size]
        )
    )


def _recompressed(
    data: bytearray, header: record_batches.BatchHeader, codec: int, max_bytes: int
) -> tuple[bytearray, list[record_batches.BatchHeader]]:
    """The batch in the topic's compression.type, as Kafka rewrites it on the produce path
    (only for topics that set one: "producer", the default, keeps batches verbatim)."""
    records = list(record_batches.iter_raw_records(memoryview(data)[: header.size]))
    rebuilt = bytearray(record_batches.rebuild_batch(header, records, codec=codec))
    return rebuilt, record_batches.validate_produce_batches(memoryview(rebuilt), max_bytes)
