"""Fetch: file ranges of whole batches, long-polled until min.bytes or max.wait.

Responses carry the log's bytes as file ranges; the connection sends them with sendfile
where the transport allows. Fetch sessions (KIP-227) are not kept: answering with
session id 0 makes clients send full fetch requests, which Kafka also does when its
session cache is full.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.protocol import apis, shaping
from strom.replication import partition as replicated_partition
from strom.server import connection
from strom.storage import partition_log

if TYPE_CHECKING:
    from strom.server.broker import Broker
    from strom.server.dispatch import RequestContext

_ZERO_UUID = uuid.UUID(int=0)
_READ_COMMITTED = 1


@dataclass(slots=True)
class _Wanted:
    topic_key: tuple[str | None, uuid.UUID | None]  # as the client named it
    topic: str | None  # resolved name
    index: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    partition: replicated_partition.Partition | None


async def handle_fetch(broker: Broker, request: apis.Request, context: RequestContext) -> Any:
    body = request.body
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    if getattr(body, "session_id", 0) != 0:
        return shaping.build(
            response_type,
            {
                "throttle_time": 0,
                "error_code": ErrorCode.fetch_session_id_not_found,
                "session_id": 0,
                "responses": (),
            },
        )
    wanted = _resolve(broker, body)
    max_wait_ms = shaping.as_millis(body.max_wait)
    deadline = time.monotonic() + max(max_wait_ms, 0) / 1000
    read_committed = getattr(body, "isolation_level", 0) == _READ_COMMITTED
    while True:
        responses, total_bytes, has_error = _read_all(
            broker, wanted, int(body.max_bytes), read_committed
        )
        remaining = deadline - time.monotonic()
        if total_bytes >= int(body.min_bytes) or has_error or remaining <= 0:
            break
        partitions = [w.partition for w in wanted if w.partition is not None]
        if not partitions:
            # Nothing to wait for: the client asked only for unknown partitions.
            break
        waiter = replicated_partition.wait_for_any(partitions)
        try:
            await asyncio.wait([waiter], timeout=remaining)
        finally:
            replicated_partition.release(partitions, waiter)
            waiter.cancel()
    return shaping.build(
        response_type,
        {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": responses},
    )


def _resolve(broker: Broker, body: Any) -> list[_Wanted]:
    wanted = []
    for topic in body.topics:
        if not hasattr(topic, "topic"):
            # v13+ names topics by id only, and kio reads the zero id as None. A zero id
            # names no topic: answer UNKNOWN_TOPIC_ID under that same id, as Kafka does,
            # rather than look for a name the request does not have (which dropped the
            # connection). The answer must name each topic as the request did.
            topic_id = topic.topic_id or _ZERO_UUID
            stored = broker.metadata.topic_by_id(topic_id) if topic_id != _ZERO_UUID else None
            name = stored.name if stored else None
            key: tuple[str | None, uuid.UUID | None] = (name, topic_id)
        else:
            name = str(topic.topic)
            stored = broker.metadata.image.topics.get(name)
            key = (name, stored.topic_id if stored else None)
            if stored is None:
                name = None
        for p in topic.partitions:
            index = int(p.partition)
            wanted.append(
                _Wanted(
                    topic_key=key,
                    topic=name,
                    index=index,
                    fetch_offset=int(p.fetch_offset),
                    max_bytes=int(p.partition_max_bytes),
                    current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                    partition=broker.partition(name, index) if name else None,
                )
            )
    return wanted


def _read_all(
    broker: Broker, wanted: list[_Wanted], response_max_bytes: int, read_committed: bool
) -> tuple[list[dict[str, Any]], int, bool]:
    by_topic: dict[tuple[str | None, uuid.UUID | None], list[dict[str, Any]]] = {}
    total = 0
    has_error = False
    for item in wanted:
        result = _read_partition(item, response_max_bytes - total, total == 0, read_committed)
        records = result["records"]
        total += len(records)
        if result["error_code"] != ErrorCode.none:
            has_error = True
            broker.metrics.request_errors.labels("FETCH", result["error_code"].name).inc()
        by_topic.setdefault(item.topic_key, []).append(result)
    responses = [
        {"topic": name or "", "topic_id": topic_id or _ZERO_UUID, "partitions": partitions}
        for (name, topic_id), partitions in by_topic.items()
    ]
    return responses, total, has_error


def _read_partition(
    item: _Wanted, bytes_left: int, first: bool, read_committed: bool
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "partition_index": item.index,
        "error_code": ErrorCode.none,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": () if read_committed else None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    partition = item.partition
    if partition is None:
        missing_id = item.topic is None and item.topic_key[1] is not None
        result["error_code"] = (
            ErrorCode.unknown_topic_id if missing_id else ErrorCode.unknown_topic_or_partition
        )
        return result
    log = partition.log
    high_watermark = partition.high_watermark
    result["high_watermark"] = high_watermark
    result["last_stable_offset"] = high_watermark
    result["log_start_offset"] = log.log_start_offset
    if item.current_leader_epoch >= 0 and item.current_leader_epoch != partition.leader_epoch:
        result["error_code"] = (
            ErrorCode.fenced_leader_epoch
            if item.current_leader_epoch < partition.leader_epoch
            else ErrorCode.unknown_leader_epoch
        )
        return result
    if item.fetch_offset == high_watermark:
        return result
    limit = min(item.max_bytes, bytes_left)
    try:
        # KIP-74: only the first partition with data may exceed the limits, by one batch.
        read = log.read(
            item.fetch_offset, max(limit, 0), max_offset=high_watermark, min_one_batch=first
        )
    except partition_log.OffsetOutOfRangeError:
        result["error_code"] = ErrorCode.offset_out_of_range
        return result
    if read.total_bytes == 0:
        return result
    result["records"] = connection.RecordRegions(partition.topic, read.ranges)
    return result
