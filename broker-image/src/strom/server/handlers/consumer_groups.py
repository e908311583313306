"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat and ConsumerGroupDescribe.

The protocol work lives in `strom.coordinator` (`consumer`, `consumer_group`); these
functions translate between it and the messages. Neither API is served when
group.coordinator.rebalance.protocols leaves out `consumer` (ApiVersions then does not
advertise them either, see `versions`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.coordinator import consumer
from strom.coordinator import consumer_group as model
from strom.protocol import apis, shaping
from strom.server.handlers import groups

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

# ConsumerGroupDescribe v1's member type: a member heartbeating with the consumer protocol
CONSUMER_MEMBER_TYPE = 1
_DISABLED = "The consumer group protocol is not enabled (group.coordinator.rebalance.protocols)."


async def handle_consumer_group_heartbeat(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    group_id = str(body.group_id)
    empty = {"member_epoch": -1, "heartbeat_interval": 0}
    if not broker.groups.config.consumer_protocol_enabled:
        return apis.build_response(
            request,
            {**empty, "error_code": ErrorCode.unsupported_version, "error_message": _DISABLED},
        )
    if groups.coordinator_of(broker, group_id) not in (None, broker.node_id):
        return apis.build_response(request, {**empty, "error_code": ErrorCode.not_coordinator})
    owned = body.topic_partitions
    names = body.subscribed_topic_names
    result = await broker.groups.consumer_heartbeat(
        consumer.Heartbeat(
            group_id=group_id,
            member_id=str(body.member_id),
            member_epoch=int(body.member_epoch),
            client_id=request.header.client_id or "",
            client_host=request_context.client_host,
            instance_id=body.instance_id,
            rack_id=body.rack_id,
            rebalance_timeout_ms=shaping.as_millis(body.rebalance_timeout),
            subscribed_topic_names=None if names is None else tuple(str(n) for n in names),
            subscribed_topic_regex=body.subscribed_topic_regex,
            server_assignor=body.server_assignor,
            owned=None
            if owned is None
            else [(t.topic_id, [int(p) for p in t.partitions]) for t in owned if t.topic_id],
        ),
        groups.topic_lookup(broker),
        broker.clock.time_ms(),
    )
    if result.error != ErrorCode.none:
        return apis.build_response(
            request,
            {**empty, "error_code": result.error, "error_message": result.error_message},
        )
    assignment = None
    if result.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": topic_id, "partitions": sorted(partitions)}
                for topic_id, partitions in sorted(result.assignment.items(), key=_by_id)
            ]
        }
    return apis.build_response(
        request,
        {
            "error_code": ErrorCode.none,
            "member_id": result.member_id,
            "member_epoch": result.member_epoch,
            "heartbeat_interval": result.heartbeat_interval_ms,
            "assignment": assignment,
        },
    )


async def handle_consumer_group_describe(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    described = []
    for group_id in (str(g) for g in request.body.group_ids):
        entry: dict[str, Any] = {
            "group_id": group_id,
            "group_state": "",
            "group_epoch": -1,
            "assignment_epoch": -1,
            "assignor_name": "",
            "members": (),
            "error_code": ErrorCode.none,
        }
        group = broker.groups.groups.get(group_id)
        if not broker.groups.config.consumer_protocol_enabled:
            entry.update(error_code=ErrorCode.unsupported_version, error_message=_DISABLED)
        elif groups.coordinator_of(broker, group_id) not in (None, broker.node_id):
            entry["error_code"] = ErrorCode.not_coordinator
        elif group is None or group.consumer is None:
            # Kafka's answer for a classic group too: the admin client then asks
            # DescribeGroups.
            entry.update(
                error_code=ErrorCode.group_id_not_found,
                error_message=f"Group {group_id} not found."
                if group is None
                else f"Group {group_id} is not a consumer group.",
            )
        else:
            entry.update(_describe(broker, group.consumer))
        described.append(entry)
    return apis.build_response(request, {"groups": described})


def _describe(broker: BrokerContext, group: model.ConsumerGroup) -> dict[str, Any]:
    default_assignor = broker.groups.config.consumer_assignors[0]
    return {
        "group_state": group.state.value,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.preferred_assignor(default_assignor),
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topics),
                "subscribed_topic_regex": m.subscribed_regex,
                "assignment": _named_assignment(broker, m.assigned),
                "target_assignment": _named_assignment(broker, group.target.get(m.member_id, {})),
                "member_type": CONSUMER_MEMBER_TYPE,
            }
            for m in group.members.values()
        ],
    }


def _named_assignment(
    broker: BrokerContext, assignment: Mapping[uuid.UUID, frozenset[int]]
) -> dict[str, Any]:
    partitions = []
    for topic_id, indexes in sorted(assignment.items(), key=_by_id):
        topic = broker.image.topic_by_id(topic_id)
        if topic is not None:  # a topic deleted since: nothing to show
            partitions.append(
                {"topic_id": topic_id, "topic_name": topic.name, "partitions": sorted(indexes)}
            )
    return {"topic_partitions": partitions}


def _by_id(item: tuple[uuid.UUID, frozenset[int]]) -> str:
    return str(item[0])
