"""Fetch: file ranges of whole batches, long-polled until min.bytes or max.wait.

Responses carry the log's bytes as file ranges; the connection sends them with sendfile
where the transport allows. Fetch sessions (KIP-227) are not kept: answering with
session id 0 makes clients send full fetch requests, which Kafka also does when its
session cache is full.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.protocol import apis, shaping
from strom.replication import outcomes
from strom.replication import partition as partitions
from strom.server import context

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

READ_ERRORS = {
    outcomes.ReadError.NOT_LEADER: ErrorCode.not_leader_or_follower,
    outcomes.ReadError.FENCED_LEADER_EPOCH: ErrorCode.fenced_leader_epoch,
    outcomes.ReadError.UNKNOWN_LEADER_EPOCH: ErrorCode.unknown_leader_epoch,
    outcomes.ReadError.OFFSET_OUT_OF_RANGE: ErrorCode.offset_out_of_range,
    outcomes.ReadError.OFFSET_NOT_AVAILABLE: ErrorCode.offset_not_available,
}


@dataclass(slots=True)
class _Wanted:
    topic_key: tuple[str | None, uuid.UUID | None]  # as the client named it
    topic: str | None  # resolved name
    index: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    partition: partitions.Partition | None
    unknown_id: bool


async def handle_fetch(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
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
    deadline = broker.clock.monotonic() + max(max_wait_ms, 0) / 1000
    isolation = (
        outcomes.Isolation.READ_COMMITTED
        if getattr(body, "isolation_level", 0) == outcomes.Isolation.READ_COMMITTED
        else outcomes.Isolation.READ_UNCOMMITTED
    )
    replica_id = _replica_id(body)
    while True:
        responses, total_bytes, has_error, throttled_bytes = _read_all(
            broker, wanted, int(body.max_bytes), isolation, replica_id
        )
        remaining = deadline - broker.clock.monotonic()
        if total_bytes >= int(body.min_bytes) or has_error or remaining <= 0:
            break
        waiting = [w.partition for w in wanted if w.partition is not None]
        if not waiting:
            # Nothing to wait for: the client asked only for unknown partitions.
            break
        waiter = partitions.wait_for_any(waiting, follower=replica_id >= 0)
        try:
            await asyncio.wait([waiter], timeout=remaining)
        finally:
            partitions.release(waiting, waiter)
            waiter.cancel()
    if replica_id >= 0:
        # What a follower is sent of throttled partitions counts against the leader's
        # replication quota (Kafka records it as the response is made).
        broker.replicas.quotas.leader.record(throttled_bytes)
    return shaping.build(
        response_type,
        {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": responses},
    )


def _replica_id(body: Any) -> int:
    """The fetching follower's id (v15+ in ReplicaState), -1 for a consumer."""
    if hasattr(body, "replica_state"):
        return int(body.replica_state.replica_id)
    return int(getattr(body, "replica_id", -1))


def _resolve(broker: BrokerContext, body: Any) -> list[_Wanted]:
    wanted = []
    for topic in body.topics:
        # v13+ names topics by id only, and kio reads the zero id as None. A zero id names
        # no topic: answer UNKNOWN_TOPIC_ID under that same id, as Kafka does. The answer
        # names each topic as the request did.
        by_id = not hasattr(topic, "topic")
        topic_id = (topic.topic_id or context.ZERO_UUID) if by_id else None
        resolved = broker.resolve_topic(getattr(topic, "topic", None), topic_id)
        name = resolved.name if resolved.topic is not None else None
        key = (resolved.name, topic_id if by_id else resolved.topic_id)
        unknown_id = by_id and resolved.topic is None
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
                    last_fetched_epoch=int(getattr(p, "last_fetched_epoch", -1)),
                    partition=broker.partition(name, index) if name else None,
                    unknown_id=unknown_id,
                )
            )
    return wanted


def _read_all(
    broker: BrokerContext,
    wanted: list[_Wanted],
    response_max_bytes: int,
    isolation: outcomes.Isolation,
    replica_id: int,
) -> tuple[list[dict[str, Any]], int, bool, int]:
    """The partitions' answers by topic, their record bytes, whether any has an error,
    and the record bytes of partitions the leader replication quota throttles."""
    by_topic: dict[tuple[str | None, uuid.UUID | None], list[dict[str, Any]]] = {}
    total = throttled = 0
    quota = broker.replicas.quotas.leader
    has_error = False  # or a follower to truncate: answered at once either way
    for item in wanted:
        result = _read_partition(
            broker, item, response_max_bytes - total, total == 0, isolation, replica_id
        )
        size = len(result["records"])
        total += size
        if size and replica_id >= 0 and quota.is_throttled(item.topic or "", item.index):
            throttled += size
        has_error = has_error or "diverging_epoch" in result
        if result["error_code"] != ErrorCode.none:
            has_error = True
            broker.metrics.request_errors.labels("FETCH", result["error_code"].name).inc()
        by_topic.setdefault(item.topic_key, []).append(result)
    responses = [
        {"topic": name or "", "topic_id": topic_id or context.ZERO_UUID, "partitions": parts}
        for (name, topic_id), parts in by_topic.items()
    ]
    return responses, total, has_error, throttled


def _read_partition(
    broker: BrokerContext,
    item: _Wanted,
    bytes_left: int,
    first: bool,
    isolation: outcomes.Isolation,
    replica_id: int,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "partition_index": item.index,
        "error_code": ErrorCode.none,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": () if isolation is outcomes.Isolation.READ_COMMITTED else None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    partition = item.partition
    if partition is None:
        result["error_code"] = (
            ErrorCode.unknown_topic_id if item.unknown_id else ErrorCode.unknown_topic_or_partition
        )
        return result
    max_bytes = min(item.max_bytes, bytes_left)
    if replica_id >= 0 and broker.replicas.quotas.leader.should_throttle(
        partition.topic, partition.index, in_sync=replica_id in partition.isr
    ):
        # Over the leader's replication quota: no records for this follower now (it asks
        # again), but the fetch still tells us where its log ends.
        max_bytes, first = 0, False
    # KIP-74: only the first partition with data may exceed the limits, by one batch.
    read = partition.read(
        item.fetch_offset,
        max_bytes,
        isolation=isolation,
        current_leader_epoch=item.current_leader_epoch,
        follower=(
            outcomes.FollowerFetch(replica_id, item.last_fetched_epoch) if replica_id >= 0 else None
        ),
        min_one_batch=first,
    )
    if read.diverging_epoch is not None:
        epoch, end_offset = read.diverging_epoch
        result["diverging_epoch"] = {"epoch": epoch, "end_offset": end_offset}
    result["high_watermark"] = read.high_watermark
    result["last_stable_offset"] = read.last_stable_offset
    result["log_start_offset"] = read.log_start_offset
    if read.error is not None:
        result["error_code"] = READ_ERRORS[read.error]
        return result
    if read.records is not None:
        result["records"] = read.records  # counted in bytes_out when sent
    return result
