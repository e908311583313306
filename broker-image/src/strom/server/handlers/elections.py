"""ElectLeaders (kafka-leader-election.sh, Admin.electLeaders): preferred or unclean
elections, run by the active controller.

On a client listener the request is forwarded to the active controller, as CreateTopics
is; there (or here, when this node is the active controller) `leader_election` decides
each partition. Null topic_partitions means every partition, and then the partitions
whose election is not needed are left out of the answer, as Kafka's controller does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import leader_election, topics
from strom.protocol import apis, shaping
from strom.server.handlers import forwarding

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext


_MESSAGES = {
    ErrorCode.election_not_needed: "Leader election not needed for topic partition.",
    ErrorCode.preferred_leader_not_available: "Failed to elect leader for partition: the "
    "preferred replica is not an active in-sync replica.",
    ErrorCode.eligible_leaders_not_available: "No eligible replica to lead the partition.",
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
}


async def handle_elect_leaders(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    try:
        # v0 has no election type: a preferred election
        election = leader_election.ElectionType(int(getattr(body, "election_type", 0)))
    except ValueError:
        message = f"Unknown election type {int(body.election_type)}"
        return forwarding.failed_response(request, ErrorCode.invalid_request, message)
    if not broker.quorum.is_active_controller():
        return forwarding.failed_response(
            request, ErrorCode.not_controller, forwarding.NOT_CONTROLLER
        )
    wanted: dict[str, list[int]] | None = None
    if body.topic_partitions is not None:
        wanted = {}
        for entry in body.topic_partitions:
            wanted.setdefault(str(entry.topic), []).extend(int(p) for p in entry.partitions)
    try:
        outcomes = await broker.controller.elect_leaders(election, wanted)
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
            "replica_election_results": [
                {
                    "topic": name,
                    "partition_result": [
                        {
                            "partition_id": index,
                            "error_code": code,
                            "error_message": _MESSAGES.get(code),
                        }
                        for index, code in results.items()
                    ],
                }
                for name, results in outcomes.items()
            ],
        },
    )
