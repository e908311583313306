"""ListOffsets (earliest, latest, max timestamp, by timestamp) and DeleteRecords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.protocol import apis, shaping
from strom.replication import outcomes
from strom.server.handlers import fetching

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext


async def handle_list_offsets(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    # v2+: read_committed consumers ask for the last stable offset as "latest".
    isolation = outcomes.Isolation(int(getattr(request.body, "isolation_level", 0)) == 1)
    topics = []
    for topic in request.body.topics:
        partitions = []
        for wanted in topic.partitions:
            index = int(wanted.partition_index)
            partition = broker.partition(str(topic.name), index)
            entry: dict[str, Any]
            if partition is None:
                entry = {"error_code": ErrorCode.unknown_topic_or_partition}
            else:
                listed = partition.list_offset(
                    int(wanted.timestamp),
                    int(getattr(wanted, "current_leader_epoch", -1)),
                    isolation,
                )
                if listed.error is not None:
                    entry = {"error_code": fetching.READ_ERRORS[listed.error]}
                else:
                    entry = {
                        "error_code": ErrorCode.none,
                        "timestamp": listed.timestamp,
                        "offset": listed.offset,
                        "leader_epoch": listed.leader_epoch,
                    }
            entry["partition_index"] = index
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "topics": topics})


async def handle_delete_records(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    topics = []
    for topic in request.body.topics:
        partitions = []
        for wanted in topic.partitions:
            index = int(wanted.partition_index)
            entry: dict[str, Any] = {"partition_index": index, "low_watermark": -1}
            partition = broker.partition(str(topic.name), index)
            if partition is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                error, low_watermark = partition.delete_records(int(wanted.offset))
                entry["error_code"] = (
                    ErrorCode.none if error is None else fetching.READ_ERRORS[error]
                )
                entry["low_watermark"] = low_watermark
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "topics": topics})
