"""DescribeTopicPartitions (KIP-966): Kafka 4's AdminClient describes topics with it, a
page of partitions at a time (Kafka's DescribeTopicPartitionsRequestHandler and
KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse).

Topics are answered in name order from the cursor on; at most
min(response_partition_limit, max.request.partition.size.limit) partitions go in one
response, and `next_cursor` names the first partition left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import image as images
from strom.cluster import topics
from strom.protocol import apis, shaping
from strom.server import context

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

PARTITION_LIMIT_KEY = "max.request.partition.size.limit"

# Kafka's AclOperation codes of what a TOPIC supports (READ WRITE CREATE DELETE ALTER
# DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS); with no authorizer every one of them is
# authorized (AuthHelper.authorizedOperations), as a 32-bit field: 3576, as Kafka answers.
_TOPIC_OPERATIONS = (3, 4, 5, 6, 7, 8, 10, 11)
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << code for code in _TOPIC_OPERATIONS)


class InvalidCursorError(Exception):
    pass


def _offline_replicas(image: images.MetadataImage, partition: images.PartitionImage) -> list[int]:
    offline = []
    for node_id in partition.replicas:
        registered = image.brokers.get(node_id)
        if registered is None or registered.fenced:
            offline.append(node_id)
    return offline


def _partition_entry(
    image: images.MetadataImage, partition: images.PartitionImage
) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "partition_index": partition.index,
        "leader_id": partition.leader,
        "leader_epoch": partition.leader_epoch,
        "replica_nodes": partition.replicas,
        "isr_nodes": partition.isr,
        # Strom keeps no eligible leader replicas (KIP-966's ELR): empty, as Kafka without it
        "eligible_leader_replicas": (),
        "last_known_elr": (),
        "offline_replicas": _offline_replicas(image, partition),
    }


def _topic_entry(
    topic: images.TopicImage, partitions: list[dict[str, Any]], error: ErrorCode
) -> dict[str, Any]:
    return {
        "error_code": error,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.name in topics.INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": TOPIC_AUTHORIZED_OPERATIONS,
    }


def _missing_topic_entry(name: str) -> dict[str, Any]:
    try:
        topics.validate_topic_name(name)
        error = ErrorCode.unknown_topic_or_partition
    except topics.InvalidTopicError:
        error = ErrorCode.invalid_topic_exception
    return {
        "error_code": error,
        "name": name,
        "topic_id": context.ZERO_UUID,
        "is_internal": name in topics.INTERNAL_TOPICS,
        "partitions": (),
        "topic_authorized_operations": TOPIC_AUTHORIZED_OPERATIONS,
    }


def describe_page(
    image: images.MetadataImage,
    requested: Iterable[str] | None,
    cursor: tuple[str, int] | None,
    limit: int,
) -> tuple[list[dict[str, Any]], tuple[str, int] | None]:
    """The topics' entries from `cursor` on with at most `limit` partitions in all, and the
    cursor of the next page (None when everything was answered).

    `requested` None means every topic; named topics that do not exist get an error
    entry. Raises InvalidCursorError for a cursor Kafka refuses."""
    cursor_topic, cursor_partition = cursor if cursor is not None else ("", 0)
    if cursor is not None and cursor_partition < 0:
        raise InvalidCursorError(f"cursor partition must be valid: {cursor_partition}")
    names = set(image.topics) if requested is None else set(requested)
    names = {name for name in names if name >= cursor_topic}
    if cursor is not None and requested is not None and cursor_topic not in names:
        raise InvalidCursorError(f"the topic list should contain the cursor topic {cursor_topic}")
    entries: list[dict[str, Any]] = []
    remaining = limit
    for name in sorted(names):
        if remaining <= 0:
            return entries, (name, 0)
        topic = image.topics.get(name)
        if topic is None:
            if requested is not None:
                entries.append(_missing_topic_entry(name))
            continue
        start = cursor_partition if name == cursor_topic else 0
        end = min(topic.partition_count, start + remaining)
        partitions = [
            _partition_entry(image, topic.partitions[index])
            for index in range(start, end)
            if index in topic.partitions
        ]
        entries.append(_topic_entry(topic, partitions, ErrorCode.none))
        if end < topic.partition_count:
            return entries, (name, end)
        remaining -= len(partitions)
    return entries, None


async def handle_describe_topic_partitions(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    requested = [str(t.name) for t in body.topics] if body.topics else None
    cursor = (
        (str(body.cursor.topic_name), int(body.cursor.partition_index))
        if body.cursor is not None
        else None
    )
    limit = max(min(broker.config.get_int(PARTITION_LIMIT_KEY), body.response_partition_limit), 1)
    next_cursor: tuple[str, int] | None = None
    try:
        entries, next_cursor = describe_page(broker.image, requested, cursor, limit)
    except InvalidCursorError:
        # As Kafka's getErrorResponse: every named topic with the error.
        entries = [
            {
                "error_code": ErrorCode.invalid_request,
                "name": name,
                "topic_id": context.ZERO_UUID,
                "partitions": (),
            }
            for name in requested or ()
        ]
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(
        response_type,
        {
            "throttle_time": 0,
            "topics": entries,
            "next_cursor": (
                {"topic_name": next_cursor[0], "partition_index": next_cursor[1]}
                if next_cursor is not None
                else None
            ),
        },
    )
