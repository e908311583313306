"""OffsetForLeaderEpoch: where a leader epoch ended in this leader's log.

Followers ask it to find where their log diverges from the leader's; consumers ask it
after a leader change or on resuming from a committed position (KIP-320) to check that
the records before their position were not truncated away. As Kafka: only the leader
answers, after the same leader-epoch fencing as Fetch; a partition this broker does not
host is NOT_LEADER_OR_FOLLOWER if the topic has it, else UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.protocol import apis, shaping
from strom.replication import leader_epochs
from strom.server.handlers import fetching

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext


async def handle_offset_for_leader_epoch(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    image = broker.image
    topics = []
    for topic in request.body.topics:
        name = str(topic.topic)
        known = image.topics.get(name)
        results = []
        for wanted in topic.partitions:
            index = int(wanted.partition)
            entry: dict[str, Any] = {"partition": index, "leader_epoch": -1, "end_offset": -1}
            partition = broker.partition(name, index)
            if partition is not None:
                found = leader_epochs.last_offset_for_leader_epoch(
                    partition, int(wanted.current_leader_epoch), int(wanted.leader_epoch)
                )
                if found.error is not None:
                    entry["error_code"] = fetching.READ_ERRORS[found.error]
                else:
                    entry["error_code"] = ErrorCode.none
                    entry["leader_epoch"] = found.leader_epoch
                    entry["end_offset"] = found.end_offset
            elif known is not None and index in known.partitions:
                entry["error_code"] = ErrorCode.not_leader_or_follower
            else:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            results.append(entry)
        topics.append({"topic": name, "partitions": results})
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "topics": topics})
