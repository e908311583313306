"""OffsetDelete (KIP-496): remove a group's committed offsets of some partitions, as
`kafka-consumer-groups --delete-offsets` does. confluent-kafka has no call for it: the
group's coordinator is found with FindCoordinator and the request sent there by `wire`.

Errors keep Kafka's names (GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC, ...), the group's
and each partition's, so that a tool can print them the way Kafka's does.
"""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as find_request
from kio.schema.find_coordinator.v4 import response as find_response
from kio.schema.offset_delete.v0 import request as delete_request
from kio.schema.offset_delete.v0 import response as delete_response
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32

from strom.client import cluster, results, steps, wire

_GROUP_KEY = 0  # FindCoordinator key_type of a consumer group


def _name(code: ErrorCode) -> str | None:
    return None if code == ErrorCode.none else wire.error_name(code)


def delete_committed_offsets(
    session: steps.Session, group_id: str, partitions: Sequence[results.TopicPartition]
) -> steps.Operation[results.OffsetDeletion]:
    what = f"the coordinator of group '{group_id}'"
    found = yield cluster.any_broker(
        session,
        find_request.FindCoordinatorRequest(key_type=i8(_GROUP_KEY), coordinator_keys=(group_id,)),
        find_response.FindCoordinatorResponse,
        what,
    )
    (coordinator,) = found.coordinators
    cluster.raise_for(coordinator.error_code, coordinator.error_message, what)
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    request = delete_request.OffsetDeleteRequest(
        group_id=GroupId(group_id),
        topics=tuple(
            delete_request.OffsetDeleteRequestTopic(
                name=TopicName(topic),
                partitions=tuple(
                    delete_request.OffsetDeleteRequestPartition(partition_index=i32(p))
                    for p in indexes
                ),
            )
            for topic, indexes in by_topic.items()
        ),
    )
    response = yield steps.Request(
        ((str(coordinator.host), int(coordinator.port)),),
        request,
        delete_response.OffsetDeleteResponse,
        f"the offset deletion of group '{group_id}'",
    )
    return results.OffsetDeletion(
        error=_name(response.error_code),
        partitions={
            results.TopicPartition(str(topic.name), int(p.partition_index)): _name(p.error_code)
            for topic in response.topics
            for p in topic.partitions
        },
    )
