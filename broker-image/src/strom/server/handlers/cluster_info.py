"""Metadata (with auto-creation) and DescribeCluster."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import metadata as cluster_metadata
from strom.protocol import apis, shaping

if TYPE_CHECKING:
    from strom.server.broker import Broker
    from strom.server.dispatch import RequestContext

_ZERO_UUID = uuid.UUID(int=0)
_BROKERS_ENDPOINT_TYPE = 1


def _broker_entries(broker: Broker, context: RequestContext) -> list[dict[str, Any]]:
    endpoint = broker.endpoint_for(context.listener)
    return [
        {
            "node_id": broker.node_id,
            "broker_id": broker.node_id,
            "host": endpoint.host,
            "port": endpoint.port,
            "rack": broker.config.broker_rack,
        }
    ]


def topic_entry(broker: Broker, topic: cluster_metadata.TopicMetadata) -> dict[str, Any]:
    partitions = []
    for index in range(topic.partitions):
        partition = broker.partition(topic.name, index)
        leader_epoch = partition.leader_epoch if partition is not None else -1
        partitions.append(
            {
                "error_code": ErrorCode.none,
                "partition_index": index,
                "leader_id": broker.node_id,
                "leader_epoch": leader_epoch,
                "replica_nodes": (broker.node_id,),
                "isr_nodes": (broker.node_id,),
                "offline_replicas": (),
            }
        )
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.name in cluster_metadata.INTERNAL_TOPICS,
        "partitions": partitions,
    }


def _error_topic(name: str | None, topic_id: uuid.UUID | None, error: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": error,
        "name": name,
        "topic_id": topic_id or _ZERO_UUID,
        "is_internal": False,
        "partitions": (),
    }


async def handle_metadata(broker: Broker, request: apis.Request, context: RequestContext) -> Any:
    body = request.body
    version = request.header.api_version
    image = broker.metadata.image
    requested = body.topics
    # v0: an empty list means every topic; v1+: null means every topic.
    all_topics = requested is None or (version == 0 and not requested)
    allow_auto_create = getattr(body, "allow_auto_topic_creation", True)

    topics: list[dict[str, Any]] = []
    if all_topics:
        topics = [topic_entry(broker, t) for t in list(image.topics.values())]
    else:
        for wanted in requested:
            name = getattr(wanted, "name", None)
            topic_id = getattr(wanted, "topic_id", None)
            if name is None and topic_id is not None and topic_id != _ZERO_UUID:
                by_id = broker.metadata.topic_by_id(topic_id)
                topics.append(
                    topic_entry(broker, by_id)
                    if by_id
                    else _error_topic(None, topic_id, ErrorCode.unknown_topic_id)
                )
                continue
            if name is None:
                topics.append(_error_topic(None, None, ErrorCode.invalid_request))
                continue
            topics.append(
                _named_topic(
                    broker,
                    name,
                    allow_auto_create,
                    f"client {request.header.client_id!r} at {context.client_host}",
                )
            )

    response_type = apis.response_class(request.header.api_key, version)
    return shaping.build(
        response_type,
        {
            "throttle_time": 0,
            "brokers": _broker_entries(broker, context),
            "cluster_id": image.cluster_id,
            "controller_id": broker.node_id,
            "topics": topics,
            "error_code": ErrorCode.none,
        },
    )


def _named_topic(
    broker: Broker, name: str, allow_auto_create: bool, requested_by: str
) -> dict[str, Any]:
    existing = broker.metadata.image.topics.get(name)
    if existing is not None:
        return topic_entry(broker, existing)
    try:
        cluster_metadata.validate_topic_name(name)
    except cluster_metadata.InvalidTopicError:
        return _error_topic(name, None, ErrorCode.invalid_topic_exception)
    if not (allow_auto_create and broker.config.auto_create_topics_enable):
        return _error_topic(name, None, ErrorCode.unknown_topic_or_partition)
    try:
        created = broker.auto_create_topic(name, requested_by)
    except cluster_metadata.InvalidTopicError:
        return _error_topic(name, None, ErrorCode.invalid_topic_exception)
    except cluster_metadata.InvalidReplicationFactorError:
        return _error_topic(name, None, ErrorCode.invalid_replication_factor)
    return topic_entry(broker, created)


async def handle_describe_cluster(
    broker: Broker, request: apis.Request, context: RequestContext
) -> Any:
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    endpoint_type = getattr(request.body, "endpoint_type", _BROKERS_ENDPOINT_TYPE)
    if endpoint_type != _BROKERS_ENDPOINT_TYPE:
        return shaping.build(
            response_type,
            {
                "throttle_time": 0,
                "error_code": ErrorCode.unsupported_endpoint_type,
                "error_message": "Only broker endpoints are served by this node",
                "endpoint_type": endpoint_type,
                "cluster_id": broker.metadata.image.cluster_id,
                "brokers": (),
            },
        )
    return shaping.build(
        response_type,
        {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "endpoint_type": endpoint_type,
            "cluster_id": broker.metadata.image.cluster_id,
            "controller_id": broker.node_id,
            "brokers": _broker_entries(broker, context),
        },
    )
