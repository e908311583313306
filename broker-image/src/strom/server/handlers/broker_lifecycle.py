"""BrokerRegistration, BrokerHeartbeat and AllocateProducerIds: what brokers ask the
active controller on its controller listener (Kafka's ControllerApis).

Each goes to this node's Controller, which refuses with NotControllerError when it is not
the active controller; its refusals become the Kafka error codes a broker's lifecycle
manager acts on (NOT_CONTROLLER: find the controller again and retry; STALE_BROKER_EPOCH:
register again; DUPLICATE_BROKER_REGISTRATION: the id is taken by a live incarnation).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import broker_sessions, topics
from strom.cluster import image as images
from strom.protocol import apis, shaping

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

log = logging.getLogger(__name__)

_LIFECYCLE_ERRORS: dict[type[Exception], ErrorCode] = {
    broker_sessions.DuplicateBrokerRegistrationError: ErrorCode.duplicate_broker_registration,
    broker_sessions.InconsistentClusterError: ErrorCode.inconsistent_cluster_id,
    broker_sessions.StaleBrokerEpochError: ErrorCode.stale_broker_epoch,
    topics.NotControllerError: ErrorCode.not_controller,
    # The change could not be made durable: the broker retries, as on a timeout.
    topics.StorageFailedError: ErrorCode.kafka_storage_error,
}


def lifecycle_error_code(error: topics.MetadataError) -> ErrorCode:
    for error_type, code in _LIFECYCLE_ERRORS.items():
        if isinstance(error, error_type):
            return code
    return ErrorCode.unknown_server_error


def _response(request: apis.Request, fields: dict[str, Any]) -> Any:
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, **fields})


def registration_of(body: Any) -> broker_sessions.Registration:
    """The Registration a BrokerRegistration request (any version) carries."""
    return broker_sessions.Registration(
        node_id=int(body.broker_id),
        cluster_id=str(body.cluster_id),
        incarnation_id=body.incarnation_id,
        endpoints=tuple(
            images.BrokerEndpoint(
                listener=str(listener.name),
                host=str(listener.host),
                port=int(listener.port),
                security_protocol=int(listener.security_protocol),
            )
            for listener in body.listeners
        ),
        rack=body.rack,
    )


async def handle_broker_registration(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    if body.incarnation_id is None:
        return _response(request, {"error_code": ErrorCode.invalid_request, "broker_epoch": -1})
    try:
        epoch = await broker.controller.register_broker(
            registration_of(body), broker.clock.time_ms()
        )
    except topics.MetadataError as error:
        log.info("refused the registration of broker %d: %s", int(body.broker_id), error)
        return _response(request, {"error_code": lifecycle_error_code(error), "broker_epoch": -1})
    return _response(request, {"error_code": ErrorCode.none, "broker_epoch": epoch})


async def handle_broker_heartbeat(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    try:
        answer = await broker.controller.broker_heartbeat(
            int(body.broker_id),
            int(body.broker_epoch),
            int(body.current_metadata_offset),
            want_fence=bool(body.want_fence),
            want_shut_down=bool(body.want_shut_down),
            now_ms=broker.clock.time_ms(),
        )
    except topics.MetadataError as error:
        return _response(
            request,
            {
                "error_code": lifecycle_error_code(error),
                "is_caught_up": False,
                "is_fenced": True,
                "should_shut_down": False,
            },
        )
    return _response(
        request,
        {
            "error_code": ErrorCode.none,
            "is_caught_up": answer.is_caught_up,
            "is_fenced": answer.is_fenced,
            "should_shut_down": answer.should_shut_down,
        },
    )


async def handle_allocate_producer_ids(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    try:
        block = await broker.controller.allocate_producer_ids(int(request.body.broker_id))
    except topics.MetadataError as error:
        return _response(
            request,
            {
                "error_code": lifecycle_error_code(error),
                "producer_id_start": -1,
                "producer_id_len": 0,
            },
        )
    return _response(
        request,
        {
            "error_code": ErrorCode.none,
            "producer_id_start": block.start,
            "producer_id_len": len(block),
        },
    )
