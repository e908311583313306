"""Metadata (with auto-creation) and DescribeCluster."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import image as images
from strom.cluster import topic_requests, topics
from strom.protocol import apis, shaping
from strom.server import context

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

log = logging.getLogger(__name__)

_BROKERS_ENDPOINT_TYPE = 1
_CONTROLLERS_ENDPOINT_TYPE = 2


def _broker_entries(
    broker: BrokerContext, request_context: RequestContext, *, include_fenced: bool = False
) -> list[dict[str, Any]]:
    """The live brokers (and the fenced ones too if asked: DescribeCluster v2) with their
    endpoint on the listener the request came in on."""
    entries = []
    image = broker.image
    registered_brokers = (
        [b for _, b in sorted(image.brokers.items())] if include_fenced else image.live_brokers()
    )
    for registered in registered_brokers:
        endpoint = registered.endpoint(request_context.listener)
        if endpoint is not None:
            entry = _broker_entry(registered.node_id, endpoint.host, endpoint.port, registered.rack)
            entries.append({**entry, "is_fenced": registered.fenced})
    if not entries:
        # before any broker registered (a node still starting, or a bare test broker)
        own = broker.endpoint_for(request_context.listener)
        entries.append(_broker_entry(broker.node_id, own.host, own.port, broker.config.broker_rack))
    return entries


def _broker_entry(node_id: int, host: str, port: int, rack: str | None) -> dict[str, Any]:
    return {"node_id": node_id, "broker_id": node_id, "host": host, "port": port, "rack": rack}


def controller_id(broker: BrokerContext) -> int:
    """What clients are told is the controller: this broker, as Kafka's KRaft brokers
    name a live broker rather than the quorum leader. Clients send it their admin
    requests and it forwards them to the active controller; naming the quorum leader
    would leave a client waiting on a dead node until the image fences it."""
    return broker.node_id


def topic_entry(topic: images.TopicImage) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.name in topics.INTERNAL_TOPICS,
        "partitions": [
            {
                # a partition whose leader's broker is gone and no in-sync replica is left
                "error_code": ErrorCode.none
                if partition.leader >= 0
                else ErrorCode.leader_not_available,
                "partition_index": partition.index,
                "leader_id": partition.leader,
                "leader_epoch": partition.leader_epoch,
                "replica_nodes": partition.replicas,
                "isr_nodes": partition.isr,
                "offline_replicas": (),
            }
            for partition in sorted(topic.partitions.values(), key=lambda p: p.index)
        ],
    }


def _error_topic(name: str | None, topic_id: uuid.UUID | None, error: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": error,
        "name": name,
        "topic_id": topic_id or context.ZERO_UUID,
        "is_internal": False,
        "partitions": (),
    }


async def handle_metadata(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    version = request.header.api_version
    requested = body.topics
    # v0: an empty list means every topic; v1+: null means every topic.
    all_topics = requested is None or (version == 0 and not requested)
    allow_auto_create = getattr(body, "allow_auto_topic_creation", True)

    entries: list[dict[str, Any]] = []
    if all_topics:
        entries = [topic_entry(t) for t in broker.image.topics.values()]
    else:
        to_create: list[str] = []
        for wanted in requested:
            name = getattr(wanted, "name", None)
            topic_id = getattr(wanted, "topic_id", None)
            resolved = broker.resolve_topic(name, topic_id)
            if resolved.topic is not None:
                entries.append(topic_entry(resolved.topic))
            elif resolved.missing_error_is_unknown_id:
                entries.append(_error_topic(None, topic_id, ErrorCode.unknown_topic_id))
            elif name is None:
                entries.append(_error_topic(None, None, ErrorCode.invalid_request))
            else:
                entries.append(_error_topic(name, None, ErrorCode.unknown_topic_or_partition))
                to_create.append(name)
        if to_create:
            await _auto_create(
                broker,
                entries,
                to_create,
                allow_auto_create,
                f"client {request.header.client_id!r} at {request_context.client_host}",
            )

    response_type = apis.response_class(request.header.api_key, version)
    return shaping.build(
        response_type,
        {
            "throttle_time": 0,
            "brokers": _broker_entries(broker, request_context),
            "cluster_id": broker.image.cluster_id,
            "controller_id": controller_id(broker),
            "topics": entries,
            "error_code": ErrorCode.none,
        },
    )


async def _auto_create(
    broker: BrokerContext,
    entries: list[dict[str, Any]],
    names: list[str],
    allow_auto_create: bool,
    requested_by: str,
) -> None:
    """Create unknown topics (auto.create.topics.enable) and fill their entries in."""
    creatable: list[str] = []
    errors: dict[str, ErrorCode] = {}
    for name in dict.fromkeys(names):
        try:
            topics.validate_topic_name(name)
        except topics.InvalidTopicError:
            errors[name] = ErrorCode.invalid_topic_exception
            continue
        if allow_auto_create and broker.config.auto_create_topics_enable:
            creatable.append(name)
    if creatable:
        outcomes = await broker.cluster_control.create_topics(
            [topic_requests.NewTopic(name) for name in creatable]
        )
        for outcome in outcomes:
            if outcome.error is None:
                log.info(
                    "auto-created topic %s with %d partition(s) for a metadata request of %s",
                    outcome.name,
                    outcome.partitions,
                    requested_by,
                )
            elif isinstance(outcome.error, topics.InvalidTopicError):
                errors[outcome.name] = ErrorCode.invalid_topic_exception
            elif isinstance(outcome.error, topics.InvalidReplicationFactorError):
                errors[outcome.name] = ErrorCode.invalid_replication_factor
            elif not isinstance(outcome.error, topics.TopicExistsError):
                # A disk error, or a limit: the client retries while the topic is unknown.
                log.warning("cannot auto-create topic %s: %s", outcome.name, outcome.error)
    image = broker.image
    for position, entry in enumerate(entries):
        name = entry["name"]
        if entry["error_code"] != ErrorCode.unknown_topic_or_partition or name not in names:
            continue
        created = image.topics.get(name)
        if created is not None:
            entries[position] = topic_entry(created)
        elif name in errors:
            entry["error_code"] = errors[name]


def _endpoint_type_refusal(
    request: apis.Request, endpoint_type: int, served: int
) -> tuple[ErrorCode, str] | None:
    """Why a DescribeCluster asking for `endpoint_type` gets no nodes from a listener that
    serves `served` (Kafka's AuthHelper.computeDescribeClusterResponse), or None."""
    if endpoint_type == served:
        return None
    if request.header.api_version == 0:  # v0 has no endpoint type to get wrong
        return ErrorCode.invalid_request, f"Unsupported endpoint type {endpoint_type}"
    if endpoint_type not in (_BROKERS_ENDPOINT_TYPE, _CONTROLLERS_ENDPOINT_TYPE):
        return ErrorCode.unsupported_endpoint_type, f"Unsupported endpoint type {endpoint_type}"
    return (
        ErrorCode.mismatched_endpoint_type,
        f"The request was sent to an endpoint of type {served}, "
        f"but we wanted an endpoint of type {endpoint_type}",
    )


def _describe_cluster_response(
    broker: BrokerContext,
    request: apis.Request,
    endpoint_type: int,
    *,
    controller: int = -1,
    brokers: Sequence[dict[str, Any]] = (),
    refusal: tuple[ErrorCode, str] | None = None,
) -> Any:
    error_code, message = refusal if refusal is not None else (ErrorCode.none, None)
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(
        response_type,
        {
            "throttle_time": 0,
            "error_code": error_code,
            "error_message": message,
            "endpoint_type": endpoint_type,
            "cluster_id": broker.image.cluster_id,
            "controller_id": controller if refusal is None else -1,
            "brokers": brokers,
        },
    )


async def handle_describe_cluster(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    endpoint_type = getattr(request.body, "endpoint_type", _BROKERS_ENDPOINT_TYPE)
    refusal = _endpoint_type_refusal(request, endpoint_type, _BROKERS_ENDPOINT_TYPE)
    if refusal is not None:
        return _describe_cluster_response(broker, request, endpoint_type, refusal=refusal)
    include_fenced = bool(getattr(request.body, "include_fenced_brokers", False))
    return _describe_cluster_response(
        broker,
        request,
        endpoint_type,
        controller=controller_id(broker),
        brokers=_broker_entries(broker, request_context, include_fenced=include_fenced),
    )


async def handle_describe_controllers(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    """DescribeCluster on the controller listener, as Kafka's ControllerApis answers it: the
    quorum's voters at their controller endpoints as the "brokers", the Raft leader as the
    controller id (-1 when unknown). Only endpoint type 2 (controllers) is served here."""
    endpoint_type = getattr(request.body, "endpoint_type", _BROKERS_ENDPOINT_TYPE)
    refusal = _endpoint_type_refusal(request, endpoint_type, _CONTROLLERS_ENDPOINT_TYPE)
    if refusal is not None:
        return _describe_cluster_response(broker, request, endpoint_type, refusal=refusal)
    voters = broker.config.quorum.voters
    leader_id = broker.quorum.active_controller()
    return _describe_cluster_response(
        broker,
        request,
        endpoint_type,
        controller=leader_id if leader_id in {v.node_id for v in voters} else -1,
        brokers=[
            {
                "broker_id": voter.node_id,
                "host": voter.host,
                "port": voter.port,
                "rack": None,
                "is_fenced": False,
            }
            for voter in voters
        ],
    )
