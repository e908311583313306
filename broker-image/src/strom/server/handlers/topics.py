"""CreateTopics (incl. validate_only and configs), DeleteTopics, CreatePartitions.

The controller validates and commits; these functions translate between its outcomes
and every version of the messages.
"""

from __future__ import annotations

import collections
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import topic_requests, topics
from strom.config import definitions as config_definitions
from strom.protocol import apis, shaping
from strom.server import context

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

_METADATA_ERRORS: dict[type[Exception], ErrorCode] = {
    topics.TopicExistsError: ErrorCode.topic_already_exists,
    topics.InvalidTopicError: ErrorCode.invalid_topic_exception,
    topics.InvalidPartitionsError: ErrorCode.invalid_partitions,
    topics.InvalidReplicationFactorError: ErrorCode.invalid_replication_factor,
    topics.UnknownTopicError: ErrorCode.unknown_topic_or_partition,
    topics.PolicyViolationError: ErrorCode.policy_violation,
    topics.StorageFailedError: ErrorCode.kafka_storage_error,
    topics.NotControllerError: ErrorCode.not_controller,
    topics.CommitTimeoutError: ErrorCode.request_timed_out,
}


def error_code_of(error: Exception) -> ErrorCode:
    if isinstance(error, config_definitions.ConfigError):
        return ErrorCode.invalid_config
    for error_type, code in _METADATA_ERRORS.items():
        if isinstance(error, error_type):
            return code
    return ErrorCode.unknown_server_error


async def handle_create_topics(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    validate_only = bool(getattr(body, "validate_only", False))
    counts = collections.Counter(str(t.name) for t in body.topics)
    duplicates = {name for name, count in counts.items() if count > 1}
    wanted = [
        topic_requests.NewTopic(
            name=str(topic.name),
            partitions=int(topic.num_partitions),
            replication_factor=int(topic.replication_factor),
            assignments=tuple(
                tuple(int(b) for b in a.broker_ids) for a in (topic.assignments or ())
            ),
            configs={str(c.name): c.value for c in topic.configs},
        )
        for topic in body.topics
        if str(topic.name) not in duplicates
    ]
    outcomes = {
        outcome.name: outcome
        for outcome in await broker.controller.create_topics(wanted, validate_only=validate_only)
    }
    results = []
    for topic in body.topics:
        name = str(topic.name)
        result: dict[str, Any] = {
            "name": name,
            "topic_id": context.ZERO_UUID,
            "error_code": ErrorCode.none,
            "error_message": None,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": None,
        }
        results.append(result)
        if name in duplicates:
            result["error_code"] = ErrorCode.invalid_request
            result["error_message"] = (
                f"Create topics request from client contains a duplicate topic {name}"
            )
            continue
        outcome = outcomes[name]
        if outcome.error is not None:
            result["error_code"] = error_code_of(outcome.error)
            result["error_message"] = str(outcome.error)
            broker.metrics.request_errors.labels(
                "CREATE_TOPICS", result["error_code"].name, request_context.listener
            ).inc()
            continue
        result["num_partitions"] = outcome.partitions
        result["replication_factor"] = outcome.replication_factor
        result["topic_id"] = outcome.topic_id or context.ZERO_UUID
        result["configs"] = [
            {
                "name": entry.name,
                "value": entry.value,
                "read_only": entry.read_only,
                "config_source": entry.source,
                "is_sensitive": entry.is_sensitive,
            }
            for entry in broker.configs.topic_entries(outcome.configs)
        ]
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "topics": results})


async def handle_delete_topics(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    wanted: list[tuple[str | None, uuid.UUID | None]] = []
    if getattr(body, "topic_names", None) is not None:
        wanted = [(str(name), None) for name in body.topic_names]
    for topic in getattr(body, "topics", ()) or ():
        wanted.append((topic.name, topic.topic_id))
    responses: list[dict[str, Any]] = []
    deleting: dict[str, dict[str, Any]] = {}
    for name, topic_id in wanted:
        response: dict[str, Any] = {
            "name": name,
            "topic_id": topic_id or context.ZERO_UUID,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        responses.append(response)
        resolved = broker.resolve_topic(name, topic_id)
        if resolved.missing_error_is_unknown_id:
            response["error_code"] = ErrorCode.unknown_topic_id
            continue
        response["name"] = resolved.name
        if not broker.config.delete_topic_enable:
            response["error_code"] = ErrorCode.topic_deletion_disabled
        elif resolved.name is None:
            response["error_code"] = ErrorCode.invalid_request
        elif resolved.topic is None:
            response["error_code"] = ErrorCode.unknown_topic_or_partition
            response["error_message"] = "This server does not host this topic-partition."
        elif resolved.name in topics.INTERNAL_TOPICS:
            response["error_code"] = ErrorCode.invalid_topic_exception
            response["error_message"] = f"Internal topic {resolved.name} cannot be deleted."
        else:
            response["topic_id"] = resolved.topic.topic_id
            deleting[resolved.name] = response
    if deleting:
        outcomes = await broker.controller.delete_topics(list(deleting))
        for name, error in outcomes.items():
            if error is not None:
                deleting[name]["error_code"] = error_code_of(error)
                deleting[name]["error_message"] = str(error)
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "responses": responses})


async def handle_create_partitions(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    results = []
    for topic in body.topics:
        result: dict[str, Any] = {
            "name": topic.name,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        assignments = tuple(tuple(int(b) for b in a.broker_ids) for a in (topic.assignments or ()))
        try:
            await broker.controller.create_partitions(
                str(topic.name),
                int(topic.count),
                assignments,
                validate_only=bool(body.validate_only),
            )
        except topics.MetadataError as error:
            result["error_code"] = error_code_of(error)
            result["error_message"] = str(error)
        results.append(result)
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "results": results})
