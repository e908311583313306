"""AlterPartitionReassignments and ListPartitionReassignments (kafka-reassign-partitions.sh,
Admin.alterPartitionReassignments / listPartitionReassignments), run by the active
controller.

On a client listener both are forwarded to the active controller, as CreateTopics is;
there `cluster.reassignments` decides. A partition's target replicas start a
reassignment (null ones cancel the running one); the answer comes once the records that
start it are committed, not when the data has moved: ListPartitionReassignments shows
what still runs, with its replicas, adding and removing replicas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import topics
from strom.protocol import apis, shaping
from strom.server.handlers import forwarding

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext


async def handle_alter_partition_reassignments(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    if not broker.quorum.is_active_controller():
        return forwarding.failed_response(
            request, ErrorCode.not_controller, forwarding.NOT_CONTROLLER
        )
    wanted: dict[str, dict[int, tuple[int, ...] | None]] = {}
    for topic in body.topics:
        targets = wanted.setdefault(str(topic.name), {})
        for partition in topic.partitions:
            replicas = partition.replicas
            targets[int(partition.partition_index)] = (
                None if replicas is None else tuple(int(r) for r in replicas)
            )
    try:
        outcomes = await broker.controller.alter_partition_reassignments(
            wanted,
            # v0 has no such field: any change was allowed
            allow_replication_factor_change=bool(
                getattr(body, "allow_replication_factor_change", True)
            ),
        )
    except topics.MetadataError as error:
        return forwarding.failed_response(
            request, forwarding.metadata_error_code(error), str(error)
        )
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(
        response_type,
        {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "error_message": None,
            "responses": [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": index,
                            "error_code": outcome.error,
                            "error_message": outcome.message,
                        }
                        for index, outcome in results.items()
                    ],
                }
                for name, results in outcomes.items()
            ],
        },
    )


async def handle_list_partition_reassignments(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    if not broker.quorum.is_active_controller():
        return forwarding.failed_response(
            request, ErrorCode.not_controller, forwarding.NOT_CONTROLLER
        )
    wanted: dict[str, list[int]] | None = None
    if body.topics is not None:
        wanted = {}
        for topic in body.topics:
            wanted.setdefault(str(topic.name), []).extend(int(p) for p in topic.partition_indexes)
    ongoing = broker.controller.list_partition_reassignments(wanted)
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(
        response_type,
        {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "error_message": None,
            "topics": [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": p.index,
                            "replicas": p.replicas,
                            "adding_replicas": p.adding_replicas,
                            "removing_replicas": p.removing_replicas,
                        }
                        for p in partitions
                    ],
                }
                for name, partitions in ongoing.items()
            ],
        },
    )
