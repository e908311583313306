"""ListOffsets (earliest, latest, max timestamp, by timestamp) and DeleteRecords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.protocol import apis, shaping
from strom.replication import partition as replicated_partition
from strom.storage import partition_log

if TYPE_CHECKING:
    from strom.server.broker import Broker
    from strom.server.dispatch import RequestContext

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
_DELETE_TO_HIGH_WATERMARK = -1


def _leader_epoch_error(
    partition: replicated_partition.Partition, requested_epoch: int
) -> ErrorCode | None:
    if requested_epoch < 0 or requested_epoch == partition.leader_epoch:
        return None
    if requested_epoch < partition.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    return ErrorCode.unknown_leader_epoch


def _list_offset(partition: replicated_partition.Partition, timestamp: int) -> dict[str, Any]:
    log = partition.log
    found: tuple[int, int] | None
    if timestamp == LATEST:
        found = (-1, partition.high_watermark)
    elif timestamp in (EARLIEST, EARLIEST_LOCAL):
        found = (-1, log.log_start_offset)
    elif timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset()
    elif timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        # No tiered storage: Kafka answers -1 for these without an error.
        found = None
    else:
        hit = log.offset_for_timestamp(timestamp)
        found = None if hit is None else (hit[1], hit[0])
    searched = timestamp >= 0 or timestamp == MAX_TIMESTAMP
    if searched and found is not None and found[1] >= partition.high_watermark:
        found = None  # not yet committed: invisible to consumers
    if found is None:
        return {"error_code": ErrorCode.none, "timestamp": -1, "offset": -1, "leader_epoch": -1}
    found_timestamp, offset = found
    return {
        "error_code": ErrorCode.none,
        "timestamp": found_timestamp,
        "offset": offset,
        "leader_epoch": partition.leader_epoch,
    }


async def handle_list_offsets(
    broker: Broker, request: apis.Request, context: RequestContext
) -> Any:
    topics = []
    for topic in request.body.topics:
        partitions = []
        for wanted in topic.partitions:
            index = int(wanted.partition_index)
            partition = broker.partition(str(topic.name), index)
            if partition is None:
                entry: dict[str, Any] = {"error_code": ErrorCode.unknown_topic_or_partition}
            elif error := _leader_epoch_error(
                partition, int(getattr(wanted, "current_leader_epoch", -1))
            ):
                entry = {"error_code": error}
            else:
                entry = _list_offset(partition, int(wanted.timestamp))
            entry["partition_index"] = index
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "topics": topics})


async def handle_delete_records(
    broker: Broker, request: apis.Request, context: RequestContext
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
                offset = int(wanted.offset)
                if offset == _DELETE_TO_HIGH_WATERMARK:
                    offset = partition.high_watermark
                if offset < 0 or offset > partition.high_watermark:
                    entry["error_code"] = ErrorCode.offset_out_of_range
                else:
                    try:
                        entry["low_watermark"] = partition.log.delete_records_before(offset)
                        entry["error_code"] = ErrorCode.none
                    except partition_log.OffsetOutOfRangeError:
                        entry["error_code"] = ErrorCode.offset_out_of_range
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "topics": topics})
