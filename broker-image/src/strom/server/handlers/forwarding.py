"""Admin requests on a client listener go to the active controller (Kafka's forwarding).

`forwarded(handler)` wraps the handler of CreateTopics, DeleteTopics, CreatePartitions,
AlterConfigs, IncrementalAlterConfigs, ElectLeaders, AlterPartitionReassignments or
ListPartitionReassignments in the client listener's table:
when the broker has a `controller_forwarder` and this node is not the active controller,
the decoded request goes unchanged to the active controller's controller listener and its
response comes back as it is (same API and version, so it is the response the client
expects).
Otherwise the handler runs here. When no controller answers in time, every topic or
resource of the request gets NOT_CONTROLLER (no active controller found) or
REQUEST_TIMED_OUT; both are retriable, and Kafka's clients retry them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import topics
from strom.protocol import apis, shaping

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

log = logging.getLogger(__name__)

Handler = Callable[["BrokerContext", apis.Request, "RequestContext"], Awaitable[Any]]

_ZERO_UUID = uuid.UUID(int=0)


def forwarded(handler: Handler) -> Handler:
    """`handler`, run here only when this node is the active controller."""

    async def forward_or_handle(
        broker: BrokerContext, request: apis.Request, request_context: RequestContext
    ) -> Any:
        forwarder = broker.controller_forwarder
        if forwarder is None or forwarder.is_local():
            return await handler(broker, request, request_context)
        try:
            return await forwarder.forward(request.body)
        except topics.MetadataError as error:
            code = metadata_error_code(error)
            log.info(
                "could not forward %s to the active controller: %s",
                apis.ApiKey(request.header.api_key).name,
                error,
            )
            return failed_response(request, code, str(error))

    forward_or_handle.__name__ = f"forwarded_{handler.__name__}"
    return forward_or_handle


NOT_CONTROLLER = "This node is not the active controller."


def metadata_error_code(error: topics.MetadataError) -> ErrorCode:
    """What a request the active controller could not take answers: NOT_CONTROLLER when
    no controller accepted it, else REQUEST_TIMED_OUT (both retriable)."""
    if isinstance(error, topics.NotControllerError):
        return ErrorCode.not_controller
    return ErrorCode.request_timed_out


def failed_response(request: apis.Request, code: ErrorCode, message: str) -> Any:
    """The response of a forwardable admin request whose every topic or resource failed
    with `code` (Kafka's AbstractRequest.getErrorResponse)."""
    body = request.body
    api_key = apis.ApiKey(request.header.api_key)
    fields: dict[str, Any] = {"throttle_time": 0}
    if api_key == apis.ApiKey.CREATE_TOPICS:
        fields["topics"] = [
            {
                "name": topic.name,
                "topic_id": _ZERO_UUID,
                "error_code": code,
                "error_message": message,
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": None,
            }
            for topic in body.topics
        ]
    elif api_key == apis.ApiKey.DELETE_TOPICS:
        named = [(name, _ZERO_UUID) for name in getattr(body, "topic_names", ())]
        named += [(topic.name, topic.topic_id) for topic in getattr(body, "topics", ())]
        fields["responses"] = [
            {"name": name, "topic_id": topic_id, "error_code": code, "error_message": message}
            for name, topic_id in named
        ]
    elif api_key == apis.ApiKey.CREATE_PARTITIONS:
        fields["results"] = [
            {"name": topic.name, "error_code": code, "error_message": message}
            for topic in body.topics
        ]
    elif api_key in (apis.ApiKey.ALTER_CONFIGS, apis.ApiKey.INCREMENTAL_ALTER_CONFIGS):
        fields["responses"] = [
            {
                "error_code": code,
                "error_message": message,
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
            }
            for resource in body.resources
        ]
    elif api_key == apis.ApiKey.ELECT_LEADERS:
        fields["error_code"] = code
        fields["replica_election_results"] = [
            {
                "topic": entry.topic,
                "partition_result": [
                    {"partition_id": index, "error_code": code, "error_message": message}
                    for index in entry.partitions
                ],
            }
            for entry in body.topic_partitions or ()
        ]
    elif api_key == apis.ApiKey.ALTER_PARTITION_REASSIGNMENTS:
        fields.update(error_code=code, error_message=message, responses=())
    elif api_key == apis.ApiKey.LIST_PARTITION_REASSIGNMENTS:
        fields.update(error_code=code, error_message=message, topics=())
    elif api_key == apis.ApiKey.DESCRIBE_QUORUM:
        fields.update(error_code=code, error_message=message, topics=(), nodes=())
    else:
        raise ValueError(f"{api_key.name} is not forwarded to the controller")
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, fields)
