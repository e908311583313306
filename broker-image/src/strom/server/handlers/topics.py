"""CreateTopics (incl. validate_only and configs), DeleteTopics, CreatePartitions."""

from __future__ import annotations

import collections
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import metadata as cluster_metadata
from strom.config import definitions as config_definitions
from strom.protocol import apis, shaping

if TYPE_CHECKING:
    from strom.server.broker import Broker
    from strom.server.dispatch import RequestContext

_ZERO_UUID = uuid.UUID(int=0)

_METADATA_ERRORS: dict[type[Exception], ErrorCode] = {
    cluster_metadata.TopicExistsError: ErrorCode.topic_already_exists,
    cluster_metadata.InvalidTopicError: ErrorCode.invalid_topic_exception,
    cluster_metadata.InvalidPartitionsError: ErrorCode.invalid_partitions,
    cluster_metadata.InvalidReplicationFactorError: ErrorCode.invalid_replication_factor,
    cluster_metadata.UnknownTopicError: ErrorCode.unknown_topic_or_partition,
}


def error_code_of(error: Exception) -> ErrorCode:
    if isinstance(error, config_definitions.ConfigError):
        return ErrorCode.invalid_config
    for error_type, code in _METADATA_ERRORS.items():
        if isinstance(error, error_type):
            return code
    return ErrorCode.unknown_server_error


async def handle_create_topics(
    broker: Broker, request: apis.Request, context: RequestContext
) -> Any:
    body = request.body
    validate_only = bool(getattr(body, "validate_only", False))
    counts = collections.Counter(str(t.name) for t in body.topics)
    results = []
    for topic in body.topics:
        name = str(topic.name)
        result: dict[str, Any] = {
            "name": name,
            "topic_id": _ZERO_UUID,
            "error_code": ErrorCode.none,
            "error_message": None,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": None,
        }
        if counts[name] > 1:
            result["error_code"] = ErrorCode.invalid_request
            result["error_message"] = (
                f"Create topics request from client contains a duplicate topic {name}"
            )
            results.append(result)
            continue
        try:
            partitions, replication_factor = _requested_layout(broker, topic)
            configs = {str(c.name): c.value for c in topic.configs}
            created = broker.create_topic(
                name, partitions, replication_factor, configs, validate_only=validate_only
            )
        except (cluster_metadata.MetadataError, config_definitions.ConfigError) as error:
            result["error_code"] = error_code_of(error)
            result["error_message"] = str(error)
            broker.metrics.request_errors.labels("CREATE_TOPICS", result["error_code"].name).inc()
            results.append(result)
            continue
        result["num_partitions"] = partitions
        result["replication_factor"] = replication_factor
        if created is not None:
            result["topic_id"] = created.topic_id
        result["configs"] = [
            {
                "name": entry.name,
                "value": entry.value,
                "read_only": entry.read_only,
                "config_source": entry.source,
                "is_sensitive": entry.is_sensitive,
            }
            for entry in broker.topic_config_entries(configs)
        ]
        results.append(result)
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "topics": results})


def _requested_layout(broker: Broker, topic: Any) -> tuple[int, int]:
    assignments = tuple(getattr(topic, "assignments", ()) or ())
    if assignments:
        if int(topic.num_partitions) != -1 or int(topic.replication_factor) != -1:
            raise cluster_metadata.InvalidPartitionsError(
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time."
            )
        replication_factors = {len(a.broker_ids) for a in assignments}
        for assignment in assignments:
            unknown = set(assignment.broker_ids) - {broker.node_id}
            if unknown:
                raise cluster_metadata.InvalidReplicationFactorError(
                    f"Replica assignment refers to unknown broker(s) {sorted(unknown)}"
                )
        if len(replication_factors) != 1:
            raise cluster_metadata.InvalidReplicationFactorError(
                "All partitions should have the same number of replicas"
            )
        return len(assignments), replication_factors.pop()
    partitions = int(topic.num_partitions)
    replication_factor = int(topic.replication_factor)
    if partitions == -1:
        partitions = broker.config.num_partitions
    if replication_factor == -1:
        replication_factor = broker.config.default_replication_factor
    return partitions, replication_factor


async def handle_delete_topics(
    broker: Broker, request: apis.Request, context: RequestContext
) -> Any:
    body = request.body
    wanted: list[tuple[str | None, uuid.UUID | None]] = []
    if getattr(body, "topic_names", None) is not None:
        wanted = [(str(name), None) for name in body.topic_names]
    for topic in getattr(body, "topics", ()) or ():
        wanted.append((topic.name, topic.topic_id))
    responses = []
    for name, topic_id in wanted:
        response: dict[str, Any] = {
            "name": name,
            "topic_id": topic_id or _ZERO_UUID,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        if name is None and topic_id is not None and topic_id != _ZERO_UUID:
            stored = broker.metadata.topic_by_id(topic_id)
            if stored is None:
                response["error_code"] = ErrorCode.unknown_topic_id
                responses.append(response)
                continue
            name = stored.name
            response["name"] = name
        if not broker.config.delete_topic_enable:
            response["error_code"] = ErrorCode.topic_deletion_disabled
        elif name is None:
            response["error_code"] = ErrorCode.invalid_request
        else:
            stored = broker.metadata.image.topics.get(name)
            if stored is None:
                response["error_code"] = ErrorCode.unknown_topic_or_partition
                response["error_message"] = "This server does not host this topic-partition."
            elif name in cluster_metadata.INTERNAL_TOPICS:
                response["error_code"] = ErrorCode.invalid_topic_exception
                response["error_message"] = f"Internal topic {name} cannot be deleted."
            else:
                response["topic_id"] = stored.topic_id
                broker.delete_topic(name)
        responses.append(response)
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "responses": responses})


async def handle_create_partitions(
    broker: Broker, request: apis.Request, context: RequestContext
) -> Any:
    body = request.body
    results = []
    for topic in body.topics:
        result: dict[str, Any] = {
            "name": topic.name,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        try:
            broker.add_partitions(str(topic.name), int(topic.count), bool(body.validate_only))
        except cluster_metadata.MetadataError as error:
            result["error_code"] = error_code_of(error)
            result["error_message"] = str(error)
        results.append(result)
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "results": results})
