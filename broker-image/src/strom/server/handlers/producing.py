"""Produce: validate batches as bytes, assign offsets by patching them, append verbatim.

Batches are never re-encoded: the CRC is checked over the bytes the client sent, the
base offset (outside the CRC) is patched in place, and the same bytes go to the log.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import topics
from strom.protocol import apis, shaping
from strom.replication import outcomes
from strom.replication import partition as partitions
from strom.server import closing, context
from strom.server.handlers import txn_verification

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

log = logging.getLogger(__name__)

_VALID_ACKS = (-1, 0, 1)
APPEND_ERROR_CODES = {
    outcomes.AppendError.NOT_LEADER: ErrorCode.not_leader_or_follower,
    outcomes.AppendError.NOT_ENOUGH_REPLICAS: ErrorCode.not_enough_replicas,
    outcomes.AppendError.NOT_ENOUGH_REPLICAS_AFTER_APPEND: (
        ErrorCode.not_enough_replicas_after_append
    ),
    outcomes.AppendError.TIMED_OUT: ErrorCode.request_timed_out,
    outcomes.AppendError.MESSAGE_TOO_LARGE: ErrorCode.message_too_large,
    outcomes.AppendError.INVALID_RECORD: ErrorCode.invalid_record,
    outcomes.AppendError.CORRUPT_MESSAGE: ErrorCode.corrupt_message,
    outcomes.AppendError.TRANSACTIONAL_ID_REQUIRED: (
        ErrorCode.transactional_id_authorization_failed
    ),
    outcomes.AppendError.INVALID_TXN_STATE: ErrorCode.invalid_txn_state,
    outcomes.AppendError.TRANSACTION_COORDINATOR_FENCED: (ErrorCode.transaction_coordinator_fenced),
    outcomes.AppendError.OUT_OF_ORDER_SEQUENCE: ErrorCode.out_of_order_sequence_number,
    outcomes.AppendError.INVALID_PRODUCER_EPOCH: ErrorCode.invalid_producer_epoch,
    outcomes.AppendError.STORAGE_ERROR: ErrorCode.kafka_storage_error,
}


class AcksZeroFailure(closing.CloseConnection):
    """A produce with acks=0 failed: Kafka closes the connection so the client notices."""


@dataclass(slots=True)
class _Appended:
    """One partition of a request: refused before appending (`refusal`), or appended
    with `outcome`."""

    index: int
    refusal: ErrorCode | None = None
    message: str | None = None
    log_start_offset: int = -1
    partition: partitions.Partition | None = None
    outcome: outcomes.AppendOutcome | None = None
    min_insync_replicas: int = 1


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


async def handle_produce(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    acks = int(body.acks)
    # Partitions are appended in request order; with acks=all each is then answered
    # once its high watermark covers the batch.
    appended: list[tuple[str, Any, list[_Appended]]] = []
    verified = await txn_verification.verify(broker, body, request.header.api_version)
    for topic_data in body.topic_data:
        resolved = broker.resolve_topic(
            getattr(topic_data, "name", None), getattr(topic_data, "topic_id", None)
        )
        appends = [
            _append(broker, resolved, p, acks, body, verified) for p in topic_data.partition_data
        ]
        name = str(resolved.name or getattr(topic_data, "name", "") or "")
        appended.append((name, resolved.topic_id or context.ZERO_UUID, appends))
    if acks == -1:
        # On the event loop's clock, which asyncio's timeouts read.
        timeout_s = max(shaping.as_millis(body.timeout), 0) / 1000
        deadline = asyncio.get_running_loop().time() + timeout_s
        with broker.metrics.produce_purgatory.track_inprogress():
            for _, _, appends in appended:
                for each in appends:
                    await _wait_committed(each, deadline)
    failed = False
    responses = []
    for name, topic_id, appends in appended:
        results = []
        for each in appends:
            result = _result(broker, name, each)
            if result["error_code"] != ErrorCode.none:
                failed = True
                broker.metrics.request_errors.labels(
                    "PRODUCE", result["error_code"].name, request_context.listener
                ).inc()
            results.append(result)
        responses.append({"name": name, "topic_id": topic_id, "partition_responses": results})
    if acks == 0:
        if failed:
            raise AcksZeroFailure("a produce request with acks=0 failed")
        return None
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"responses": responses, "throttle_time": 0})


async def _wait_committed(each: _Appended, deadline: float) -> None:
    """acks=all: the partition's answer waits until its high watermark covers the batch
    (Kafka's DelayedProduce), or REQUEST_TIMED_OUT at the request's timeout."""
    if each.partition is None or each.outcome is None:
        return
    try:
        async with asyncio.timeout_at(deadline):
            error = await each.partition.wait_committed(each.outcome, each.min_insync_replicas)
    except TimeoutError:
        error = outcomes.AppendError.TIMED_OUT
    if error is not None:
        each.outcome = outcomes.AppendOutcome(error)


def _append(
    broker: BrokerContext,
    resolved: context.ResolvedTopic,
    partition_data: Any,
    acks: int,
    body: Any,
    verified: dict[tuple[str, int], txn_verification.Verified],
) -> _Appended:
    index = int(partition_data.index)
    if acks not in _VALID_ACKS:
        return _Appended(index, ErrorCode.invalid_required_acks)
    if resolved.topic is None or resolved.name is None:
        if resolved.missing_error_is_unknown_id:
            return _Appended(index, ErrorCode.unknown_topic_id)
        return _Appended(index, ErrorCode.unknown_topic_or_partition)
    name = resolved.name
    if name in topics.INTERNAL_TOPICS:
        return _Appended(
            index, ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {name}"
        )
    partition = broker.partition(name, index)
    if partition is None:
        return _Appended(index, ErrorCode.unknown_topic_or_partition)
    records = partition_data.records
    if not records:
        # An empty record set is not an error in Kafka: nothing is appended.
        return _Appended(index, ErrorCode.none, log_start_offset=partition.log_start_offset)
    verification = verified.get((name, index))
    if isinstance(verification, ErrorCode):
        return _Appended(index, verification, "the transaction's coordinator did not verify it")
    min_insync_replicas = broker.configs.topic(name).min_insync_replicas
    outcome = partition.append_as_leader(
        bytearray(records),
        acks=acks,
        rules=broker.configs.produce_rules(name),
        min_insync_replicas=min_insync_replicas,
        transactional=body.transactional_id is not None,
        now_ms=broker.clock.time_ms(),
        verification=verification,
    )
    return _Appended(
        index, partition=partition, outcome=outcome, min_insync_replicas=min_insync_replicas
    )


def _result(broker: BrokerContext, topic: str, appended: _Appended) -> dict[str, Any]:
    index = appended.index
    outcome = appended.outcome
    if outcome is None:
        assert appended.refusal is not None
        return _partition_result(
            index,
            appended.refusal,
            appended.message,
            log_start_offset=appended.log_start_offset,
        )
    if outcome.error is not None:
        if outcome.error is outcomes.AppendError.CORRUPT_MESSAGE:
            log.warning("rejected corrupt batch for %s-%d: %s", topic, index, outcome.message)
        elif outcome.error is outcomes.AppendError.STORAGE_ERROR:
            log.error("cannot append to %s-%d: %s", topic, index, outcome.message)
        return _partition_result(index, APPEND_ERROR_CODES[outcome.error], outcome.message)
    if not outcome.duplicate:
        broker.metrics.bytes_in.labels(topic).inc(outcome.size)
        broker.metrics.messages_in.labels(topic).inc(outcome.records)
    return _partition_result(
        index,
        ErrorCode.none,
        base_offset=outcome.base_offset,
        log_append_time=outcome.log_append_time,
        log_start_offset=outcome.log_start_offset,
    )
