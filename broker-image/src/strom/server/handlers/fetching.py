"""Fetch: file ranges of whole batches, long-polled until min.bytes or max.wait, in fetch
sessions (KIP-227).

Responses carry the log's bytes as file ranges; the connection sends them with sendfile
where the transport allows. The session rules (fetch_contexts.py) say what a request
reads and which answers its response holds: an incremental fetch reads every partition
of its session and answers only those with something new.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.protocol import apis, shaping
from strom.protocol.fetch_metadata import FetchMetadata
from strom.replication import outcomes
from strom.replication import partition as partitions
from strom.server import context, fetch_contexts
from strom.server.fetch_session_cache import PartitionAnswer, PartitionKey, PartitionRequest

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
    key: PartitionKey  # as the client named it: topic id from v13, name before
    topic: str | None  # resolved name
    request: PartitionRequest
    partition: partitions.Partition | None
    unknown_id: bool


async def handle_fetch(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    version = request.header.api_version
    response_type = apis.response_class(request.header.api_key, version)
    replica_id = _replica_id(body)
    fetcher = "follower" if replica_id >= 0 else "consumer"
    # Before v7 there are no sessions: a sessionless fetch.
    metadata = FetchMetadata(
        int(getattr(body, "session_id", 0)), int(getattr(body, "session_epoch", -1))
    )
    fetch_context = fetch_contexts.new_context(
        broker.fetch_sessions,
        version,
        metadata,
        privileged=replica_id >= 0,
        requested=_requested(body),
        forgotten=_forgotten(body),
        now_ms=broker.clock.time_ms(),
    )
    broker.metrics.fetch_contexts.labels(fetch_context.kind.value, fetcher).inc()
    wanted = _resolve(broker, fetch_context.partitions())
    max_wait_ms = shaping.as_millis(body.max_wait)
    deadline = broker.clock.monotonic() + max(max_wait_ms, 0) / 1000
    isolation = (
        outcomes.Isolation.READ_COMMITTED
        if getattr(body, "isolation_level", 0) == outcomes.Isolation.READ_COMMITTED
        else outcomes.Isolation.READ_UNCOMMITTED
    )
    answers: list[tuple[_Wanted, dict[str, Any]]] = []
    throttled_bytes = 0
    while fetch_context.error == ErrorCode.none:
        answers, total_bytes, has_error, throttled_bytes = _read_all(
            broker, wanted, int(body.max_bytes), isolation, replica_id, request_context.listener
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
            with broker.metrics.fetch_purgatory.labels(fetcher).track_inprogress():
                await asyncio.wait([waiter], timeout=remaining)
        finally:
            partitions.release(waiting, waiter)
            waiter.cancel()
    if replica_id >= 0:
        # What a follower is sent of throttled partitions counts against the leader's
        # replication quota (Kafka records it as the response is made).
        broker.replicas.quotas.leader.record(throttled_bytes)
    error, session_id, included = fetch_context.respond(
        [(item.key, _summary(result)) for item, result in answers], broker.clock.time_ms()
    )
    if error != ErrorCode.none:
        broker.metrics.request_errors.labels("FETCH", error.name, request_context.listener).inc()
    by_topic: dict[str | uuid.UUID, list[dict[str, Any]]] = {}
    # `included` is empty on a session error: no partition is answered then.
    for (item, result), include in zip(answers, included, strict=False):
        if include:
            by_topic.setdefault(item.key[0], []).append(result)
    partition_count = sum(len(parts) for parts in by_topic.values())
    broker.metrics.fetch_response_partitions.labels(fetch_context.kind.value, fetcher).inc(
        partition_count
    )
    responses = [
        {"topic": topic, "topic_id": context.ZERO_UUID, "partitions": parts}
        if isinstance(topic, str)
        else {"topic": "", "topic_id": topic, "partitions": parts}
        for topic, parts in by_topic.items()
    ]
    return shaping.build(
        response_type,
        {
            "throttle_time": 0,
            "error_code": error,
            "session_id": session_id,
            "responses": responses,
        },
    )


def _replica_id(body: Any) -> int:
    """The fetching follower's id (v15+ in ReplicaState), -1 for a consumer."""
    if hasattr(body, "replica_state"):
        return int(body.replica_state.replica_id)
    return int(getattr(body, "replica_id", -1))


def _topic_key(topic: Any) -> str | uuid.UUID:
    # v13+ names topics by id only, and kio reads the zero id as None. A zero id names
    # no topic: answer UNKNOWN_TOPIC_ID under that same id, as Kafka does.
    if hasattr(topic, "topic"):
        return str(topic.topic)
    topic_id: uuid.UUID | None = topic.topic_id
    return topic_id or context.ZERO_UUID


def _requested(body: Any) -> dict[PartitionKey, PartitionRequest]:
    requested = {}
    for topic in body.topics:
        key = _topic_key(topic)
        for p in topic.partitions:
            requested[(key, int(p.partition))] = PartitionRequest(
                fetch_offset=int(p.fetch_offset),
                max_bytes=int(p.partition_max_bytes),
                current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                last_fetched_epoch=int(getattr(p, "last_fetched_epoch", -1)),
                log_start_offset=int(getattr(p, "log_start_offset", -1)),
            )
    return requested


def _forgotten(body: Any) -> list[PartitionKey]:
    return [
        (_topic_key(topic), int(index))
        for topic in shaping.seq(getattr(body, "forgotten_topics_data", None))
        for index in topic.partitions
    ]


def _resolve(
    broker: BrokerContext, wanted: list[tuple[PartitionKey, PartitionRequest]]
) -> list[_Wanted]:
    names: dict[str | uuid.UUID, str | None] = {}
    resolved = []
    for key, request in wanted:
        topic_key, index = key
        if topic_key in names:
            name = names[topic_key]
        else:
            found = (
                broker.resolve_topic(None, topic_key)
                if isinstance(topic_key, uuid.UUID)
                else broker.resolve_topic(topic_key, None)
            )
            name = names[topic_key] = found.name if found.topic is not None else None
        resolved.append(
            _Wanted(
                key=key,
                topic=name,
                request=request,
                partition=broker.partition(name, index) if name else None,
                unknown_id=isinstance(topic_key, uuid.UUID) and name is None,
            )
        )
    return resolved


def _read_all(
    broker: BrokerContext,
    wanted: list[_Wanted],
    response_max_bytes: int,
    isolation: outcomes.Isolation,
    replica_id: int,
    listener: str,
) -> tuple[list[tuple[_Wanted, dict[str, Any]]], int, bool, int]:
    """Each partition's answer, their record bytes, whether any has an error, and the
    record bytes of partitions the leader replication quota throttles."""
    answers = []
    total = throttled = 0
    quota = broker.replicas.quotas.leader
    has_error = False  # or a follower to truncate: answered at once either way
    for item in wanted:
        result = _read_partition(
            broker, item, response_max_bytes - total, total == 0, isolation, replica_id
        )
        size = len(result["records"])
        total += size
        if size and replica_id >= 0 and quota.is_throttled(item.topic or "", item.key[1]):
            throttled += size
        has_error = has_error or "diverging_epoch" in result
        if result["error_code"] != ErrorCode.none:
            has_error = True
            broker.metrics.request_errors.labels("FETCH", result["error_code"].name, listener).inc()
        answers.append((item, result))
    return answers, total, has_error, throttled


def _summary(result: dict[str, Any]) -> PartitionAnswer:
    return PartitionAnswer(
        records_size=len(result["records"]),
        high_watermark=result["high_watermark"],
        last_stable_offset=result["last_stable_offset"],
        log_start_offset=result["log_start_offset"],
        errored=result["error_code"] != ErrorCode.none,
        diverging="diverging_epoch" in result,
    )


def _read_partition(
    broker: BrokerContext,
    item: _Wanted,
    bytes_left: int,
    first: bool,
    isolation: outcomes.Isolation,
    replica_id: int,
) -> dict[str, Any]:
    request = item.request
    result: dict[str, Any] = {
        "partition_index": item.key[1],
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
    max_bytes = min(request.max_bytes, bytes_left)
    if replica_id >= 0 and broker.replicas.quotas.leader.should_throttle(
        partition.topic, partition.index, in_sync=replica_id in partition.isr
    ):
        # Over the leader's replication quota: no records for this follower now (it asks
        # again), but the fetch still tells us where its log ends.
        max_bytes, first = 0, False
    # KIP-74: only the first partition with data may exceed the limits, by one batch.
    read = partition.read(
        request.fetch_offset,
        max_bytes,
        isolation=isolation,
        current_leader_epoch=request.current_leader_epoch,
        follower=(
            outcomes.FollowerFetch(replica_id, request.last_fetched_epoch)
            if replica_id >= 0
            else None
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
    if read.aborted_transactions:
        result["aborted_transactions"] = [
            {"producer_id": producer_id, "first_offset": first_offset}
            for producer_id, first_offset in read.aborted_transactions
        ]
    return result
