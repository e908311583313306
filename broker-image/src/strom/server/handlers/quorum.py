"""DescribeQuorum: the metadata quorum's leader, epoch, high watermark and replicas
(what kafka-metadata-quorum.sh describe --status and --replication print)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import metadata_log
from strom.protocol import apis, shaping

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext


def _replica(state: Any) -> dict[str, Any]:
    return {
        "replica_id": state.node_id,
        "replica_directory_id": None,
        "log_end_offset": state.log_end_offset,
        "last_fetch_timestamp": state.last_fetch_ms,
        "last_caught_up_timestamp": state.last_caught_up_ms,
    }


async def handle_describe_quorum(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    quorum = broker.quorum.describe(broker.clock.time_ms())
    # Only the leader knows the voters' progress (Kafka's KafkaRaftClient answers
    # NOT_LEADER_OR_FOLLOWER elsewhere; a broker forwards the request to the leader).
    leading = quorum.leader_id == broker.node_id
    topics = []
    for topic in request.body.topics:
        partitions = []
        for wanted in topic.partitions:
            index = int(wanted.partition_index)
            known = topic.topic_name == metadata_log.METADATA_TOPIC and index == 0
            error = ErrorCode.none if known else ErrorCode.unknown_topic_or_partition
            if known and not leading:
                error, known = ErrorCode.not_leader_or_follower, False
            partitions.append(
                {
                    "partition_index": index,
                    "error_code": error,
                    "error_message": None,
                    "leader_id": quorum.leader_id if known else -1,
                    "leader_epoch": quorum.leader_epoch if known else -1,
                    "high_watermark": quorum.high_watermark if known else -1,
                    "current_voters": [_replica(v) for v in quorum.voters] if known else (),
                    "observers": [_replica(o) for o in quorum.observers] if known else (),
                }
            )
        topics.append({"topic_name": topic.topic_name, "partitions": partitions})
    voters = {voter.node_id for voter in quorum.voters}
    settings = broker.config.quorum
    if settings.controller_listener_name is not None:
        # the voters where the quorum reaches them: their controller listeners
        nodes = [
            {
                "node_id": voter.node_id,
                "listeners": [
                    {
                        "name": settings.controller_listener_name,
                        "host": voter.host,
                        "port": voter.port,
                    }
                ],
            }
            for voter in settings.voters
        ]
    else:  # a quorum of one without a controller listener serves it on its own
        nodes = [
            {
                "node_id": broker.node_id,
                "listeners": [
                    {"name": e.listener, "host": e.host, "port": e.port} for e in broker.endpoints
                ],
            }
        ]
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(
        response_type,
        {
            "error_code": ErrorCode.none,
            "error_message": None,
            "topics": topics,
            "nodes": nodes if broker.node_id in voters and leading else (),
        },
    )
