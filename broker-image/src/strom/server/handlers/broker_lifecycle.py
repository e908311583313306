"""BrokerRegistration, BrokerHeartbeat, AllocateProducerIds and AlterPartition: what
brokers ask the active controller on its controller listener (Kafka's ControllerApis).

Each goes to this node's Controller, which refuses with NotControllerError when it is not
the active controller; its refusals become the Kafka error codes a broker's lifecycle
manager acts on (NOT_CONTROLLER: find the controller again and retry; STALE_BROKER_EPOCH:
register again; DUPLICATE_BROKER_REGISTRATION: the id is taken by a live incarnation).
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import broker_sessions, isr_changes, topics
from strom.cluster import image as images
from strom.protocol import apis
from strom.server import context

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
    topics.CommitTimeoutError: ErrorCode.request_timed_out,
}


def lifecycle_error_code(error: topics.MetadataError) -> ErrorCode:
    for error_type, code in _LIFECYCLE_ERRORS.items():
        if isinstance(error, error_type):
            return code
    return ErrorCode.unknown_server_error


_response = apis.build_response


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


async def handle_alter_partition(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    """A partition leader's ISR changes (v2+ names topics by id; v3 gives each new ISR
    member's broker epoch)."""
    body = request.body
    if not broker.quorum.is_active_controller():
        return _response(request, {"error_code": ErrorCode.not_controller, "topics": []})
    changes = [
        _isr_change(topic.topic_id, partition)
        for topic in body.topics
        for partition in topic.partitions
    ]
    try:
        outcomes = await broker.controller.alter_partition(
            int(body.broker_id), int(body.broker_epoch), changes
        )
    except topics.MetadataError as error:
        return _response(request, {"error_code": lifecycle_error_code(error), "topics": []})
    if any(outcome.error == ErrorCode.stale_broker_epoch for outcome in outcomes):
        return _response(request, {"error_code": ErrorCode.stale_broker_epoch, "topics": []})
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for outcome in outcomes:
        by_topic.setdefault(outcome.topic_id, []).append(
            {
                "partition_index": outcome.partition,
                "error_code": outcome.error,
                "leader_id": outcome.leader,
                "leader_epoch": outcome.leader_epoch,
                "isr": list(outcome.isr),
                "leader_recovery_state": 0,
                "partition_epoch": outcome.partition_epoch,
            }
        )
    return _response(
        request,
        {
            "error_code": ErrorCode.none,
            "topics": [
                {"topic_id": topic_id, "partitions": partitions}
                for topic_id, partitions in by_topic.items()
            ],
        },
    )


def _isr_change(topic_id: uuid.UUID | None, partition: Any) -> isr_changes.IsrChange:
    with_epochs = getattr(partition, "new_isr_with_epochs", None)
    if with_epochs is not None:
        isr = tuple(int(member.broker_id) for member in with_epochs)
        epochs = tuple(int(member.broker_epoch) for member in with_epochs)
    else:
        isr, epochs = tuple(int(member) for member in partition.new_isr), ()
    return isr_changes.IsrChange(
        topic_id=topic_id or context.ZERO_UUID,
        partition=int(partition.partition_index),
        leader_epoch=int(partition.leader_epoch),
        partition_epoch=int(partition.partition_epoch),
        new_isr=isr,
        broker_epochs=epochs,
    )
