"""Consumer groups: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, DeleteGroups.

The protocol work lives in `strom.coordinator` (its `groups.GroupCoordinator`); these
functions translate between its calls and every version of the messages.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import topics
from strom.coordinator import consumer_group
from strom.coordinator import states as group_states
from strom.protocol import apis, shaping
from strom.server import coordinator_lookup

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

log = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
CONSUMER_PROTOCOL = "consumer"  # the protocol type of consumers' groups


def coordinator_of(
    broker: BrokerContext, key: str, topic: str = topics.OFFSETS_TOPIC
) -> int | None:
    """The broker that coordinates a group (or, in ``__transaction_state``, a
    transactional id): `coordinator_lookup.coordinator_of` in the image of now."""
    return coordinator_lookup.coordinator_of(broker.image, key, topic)


class _ImageTopics:
    """The topics of the metadata image of now, as the coordinator looks them up."""

    def __init__(self, image: Any) -> None:
        self._image = image

    def __call__(self, name: str) -> consumer_group.TopicMetadata | None:
        topic = self._image.topics.get(name)
        if topic is None:
            return None
        return consumer_group.TopicMetadata(topic.topic_id, topic.partition_count)

    def names(self) -> Iterable[str]:
        return (name for name in self._image.topics if name not in topics.INTERNAL_TOPICS)


def topic_lookup(broker: BrokerContext) -> consumer_group.TopicLookup:
    return _ImageTopics(broker.image)


def _elsewhere(broker: BrokerContext, group_id: str) -> bool:
    """Another broker coordinates this group: the client must ask FindCoordinator again."""
    coordinator = coordinator_of(broker, group_id)
    return coordinator is not None and coordinator != broker.node_id


_NOT_COORDINATOR = {
    "error_code": ErrorCode.not_coordinator,
    "generation_id": -1,
    "protocol_type": None,
    "protocol_name": None,
    "leader": "",
    "skip_assignment": False,
    "member_id": "",
    "members": (),
    "assignment": b"",
}


_response = apis.build_response


async def handle_find_coordinator(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    key_type = int(getattr(body, "key_type", GROUP_KEY_TYPE))
    keys = list(getattr(body, "coordinator_keys", ()) or ())
    if not keys and hasattr(body, "key"):
        keys = [body.key]
    endpoint = broker.endpoint_for(request_context.listener)
    coordinators = []
    for key in keys:
        entry: dict[str, Any] = {
            "key": key,
            "node_id": broker.node_id,
            "host": endpoint.host,
            "port": endpoint.port,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        internal = {
            GROUP_KEY_TYPE: broker.offsets_topic,
            TRANSACTION_KEY_TYPE: broker.transactions_topic,
        }.get(key_type)
        if internal is None:
            entry.update(
                node_id=-1,
                host="",
                port=-1,
                error_code=ErrorCode.invalid_request,
                error_message=f"Unknown coordinator type: {key_type}",
            )
        elif not key:
            entry.update(node_id=-1, host="", port=-1, error_code=ErrorCode.invalid_request)
        else:
            try:
                await internal.ensure()
                _point_at_coordinator(
                    broker, entry, str(key), request_context.listener, internal.name
                )
            except topics.MetadataError as error:
                # The internal topic cannot be created now (a disk error): nothing of it
                # is left behind, and the client retries FindCoordinator.
                log.warning("cannot create %s: %s", internal.name, error)
                entry.update(
                    node_id=-1,
                    host="",
                    port=-1,
                    error_code=ErrorCode.coordinator_not_available,
                    error_message=str(error),
                )
        coordinators.append(entry)
    if request.header.api_version >= 4:
        return _response(request, {"coordinators": coordinators})
    single = coordinators[0]
    return _response(request, {**single})


def _point_at_coordinator(
    broker: BrokerContext, entry: dict[str, Any], key: str, listener: str, topic: str
) -> None:
    coordinator = coordinator_of(broker, key, topic)
    if coordinator is None or coordinator == broker.node_id:
        return
    registered = broker.image.brokers.get(coordinator)
    endpoint = None if registered is None or registered.fenced else registered.endpoint(listener)
    if endpoint is None:
        # the partition's leader is not reachable now: the client asks again
        entry.update(
            node_id=-1,
            host="",
            port=-1,
            error_code=ErrorCode.coordinator_not_available,
            error_message=f"the coordinator of {key} (broker {coordinator}) is not available",
        )
        return
    entry.update(node_id=coordinator, host=endpoint.host, port=endpoint.port)


def _protocols(body: Any) -> list[tuple[str, bytes]]:
    return [(str(p.name), bytes(p.metadata)) for p in body.protocols]


async def handle_join_group(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    if _elsewhere(broker, str(body.group_id)):
        return _response(request, _NOT_COORDINATOR)
    result = await broker.groups.join(
        group_id=str(body.group_id),
        member_id=str(body.member_id),
        group_instance_id=getattr(body, "group_instance_id", None),
        client_id=request.header.client_id or "",
        client_host=request_context.client_host,
        session_timeout_ms=shaping.as_millis(body.session_timeout),
        rebalance_timeout_ms=shaping.as_millis(getattr(body, "rebalance_timeout", -1)),
        protocol_type=str(body.protocol_type),
        protocols=_protocols(body),
        version=request.header.api_version,
        now_ms=broker.clock.time_ms(),
        topics=topic_lookup(broker),
    )
    return _response(
        request,
        {
            "error_code": result.error,
            "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name,
            "leader": result.leader_id,
            "skip_assignment": result.skip_assignment,
            "member_id": result.member_id,
            "members": [
                {"member_id": member_id, "group_instance_id": instance_id, "metadata": metadata}
                for member_id, instance_id, metadata in result.members
            ],
        },
    )


async def handle_sync_group(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    if _elsewhere(broker, str(body.group_id)):
        return _response(request, _NOT_COORDINATOR)
    result = await broker.groups.sync(
        group_id=str(body.group_id),
        generation_id=int(body.generation_id),
        member_id=str(body.member_id),
        group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=getattr(body, "protocol_type", None),
        protocol_name=getattr(body, "protocol_name", None),
        assignments=[(str(a.member_id), bytes(a.assignment)) for a in body.assignments],
        now_ms=broker.clock.time_ms(),
    )
    return _response(
        request,
        {
            "error_code": result.error,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name,
            "assignment": result.assignment,
        },
    )


async def handle_heartbeat(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    if _elsewhere(broker, str(body.group_id)):
        return _response(request, _NOT_COORDINATOR)
    error = broker.groups.heartbeat(
        group_id=str(body.group_id),
        generation_id=int(body.generation_id),
        member_id=str(body.member_id),
        group_instance_id=getattr(body, "group_instance_id", None),
        now_ms=broker.clock.time_ms(),
    )
    return _response(request, {"error_code": error})


async def handle_leave_group(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    if _elsewhere(broker, str(body.group_id)):
        return _response(request, {**_NOT_COORDINATOR, "members": ()})
    if hasattr(body, "members"):
        leaving = [(str(m.member_id), m.group_instance_id) for m in body.members]
    else:
        leaving = [(str(body.member_id), None)]
    error, results = broker.groups.leave(str(body.group_id), leaving, broker.clock.time_ms())
    if not hasattr(body, "members") and results:
        error = results[0][2]  # v0-2 answer for the one member
    return _response(
        request,
        {
            "error_code": error,
            "members": [
                {"member_id": member_id, "group_instance_id": instance_id, "error_code": code}
                for member_id, instance_id, code in results
            ],
        },
    )


CommitEntry = tuple[str, int, int, int, str | None]


def commit_entries(
    broker: BrokerContext, body: Any
) -> tuple[list[CommitEntry], set[tuple[str, int]]]:
    """The (topic, partition, offset, leader epoch, metadata) entries of an OffsetCommit
    or TxnOffsetCommit, and the partitions that do not exist."""
    wanted: list[CommitEntry] = []
    unknown: set[tuple[str, int]] = set()
    for topic in body.topics:
        for p in topic.partitions:
            key = (str(topic.name), int(p.partition_index))
            if not _partition_exists(broker, *key):
                unknown.add(key)
                continue
            wanted.append(
                (
                    key[0],
                    key[1],
                    int(p.committed_offset),
                    int(getattr(p, "committed_leader_epoch", -1)),
                    p.committed_metadata,
                )
            )
    return wanted, unknown


def commit_answers(
    body: Any,
    unknown: set[tuple[str, int]],
    outcome: ErrorCode | dict[tuple[str, int], ErrorCode],
) -> list[dict[str, Any]]:
    """Each asked partition's error, per topic, as both commit responses carry them."""
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            key = (str(topic.name), int(p.partition_index))
            if key in unknown:
                code = ErrorCode.unknown_topic_or_partition
            elif isinstance(outcome, ErrorCode):
                code = outcome
            else:
                code = outcome.get(key, ErrorCode.none)
            partitions.append({"partition_index": key[1], "error_code": code})
        topics.append({"name": topic.name, "partitions": partitions})
    return topics


async def handle_offset_commit(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    wanted, unknown = commit_entries(broker, body)
    outcome: ErrorCode | dict[tuple[str, int], ErrorCode]
    if _elsewhere(broker, str(body.group_id)):
        outcome = ErrorCode.not_coordinator
    else:
        outcome = await broker.groups.commit_offsets(
            group_id=str(body.group_id),
            generation_id=int(body.generation_id_or_member_epoch),
            member_id=str(body.member_id),
            group_instance_id=getattr(body, "group_instance_id", None),
            offsets=wanted,
            now_ms=broker.clock.time_ms(),
            api_version=request.header.api_version,
        )
    return _response(request, {"topics": commit_answers(body, unknown, outcome)})


def _partition_exists(broker: BrokerContext, topic: str, index: int) -> bool:
    known = broker.image.topics.get(topic)
    return known is not None and index in known.partitions


def _fetched_group(
    broker: BrokerContext,
    group_id: str,
    topics: Any,
    member_id: str | None = None,
    member_epoch: int = -1,
    require_stable: bool = False,
) -> dict[str, Any]:
    if _elsewhere(broker, group_id):
        return {"group_id": group_id, "error_code": ErrorCode.not_coordinator, "topics": ()}
    wanted: list[tuple[str, int]] | None = None
    if topics is not None:
        wanted = [(str(t.name), int(i)) for t in topics for i in t.partition_indexes]
    committed = broker.groups.fetch_offsets(group_id, wanted, member_id, member_epoch)
    if isinstance(committed, ErrorCode):
        return {"group_id": group_id, "error_code": committed, "topics": ()}
    group = broker.groups.groups.get(group_id)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in committed.items():
        if require_stable and group is not None and group.has_pending_offset((topic, partition)):
            # KIP-447: an open transaction committed an offset here; the consumer retries
            # until its marker decides it.
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": ErrorCode.unstable_offset_commit,
                }
            )
            continue
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset.offset if offset else -1,
                "committed_leader_epoch": offset.leader_epoch if offset else -1,
                "metadata": offset.metadata if offset else "",
                "error_code": ErrorCode.none,
            }
        )
    return {
        "group_id": group_id,
        "error_code": ErrorCode.none,
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    }


async def handle_offset_fetch(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    if hasattr(body, "groups"):  # v8+: several groups per request
        return _response(
            request,
            {
                "groups": [
                    _fetched_group(
                        broker,
                        str(g.group_id),
                        g.topics,
                        getattr(g, "member_id", None),  # v9+: a consumer-protocol member
                        int(getattr(g, "member_epoch", -1)),
                        bool(getattr(body, "require_stable", False)),
                    )
                    for g in body.groups
                ]
            },
        )
    return _response(
        request,
        _fetched_group(
            broker,
            str(body.group_id),
            body.topics,
            require_stable=bool(getattr(body, "require_stable", False)),  # v7+
        ),
    )


async def handle_offset_delete(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    if _elsewhere(broker, str(body.group_id)):
        return _response(request, {"error_code": ErrorCode.not_coordinator, "topics": ()})
    requested = [(str(t.name), int(p.partition_index)) for t in body.topics for p in t.partitions]
    # As Kafka's KafkaApis: a partition that does not exist is answered here, not deleted.
    image = broker.image
    unknown = {key for key in requested if image.partition(*key) is None}
    wanted = [key for key in requested if key not in unknown]
    outcome = await broker.groups.delete_offsets(str(body.group_id), wanted, broker.clock.time_ms())
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            key = (str(topic.name), int(p.partition_index))
            if key in unknown:
                code = ErrorCode.unknown_topic_or_partition
            else:
                code = ErrorCode.none if isinstance(outcome, ErrorCode) else outcome[key]
            partitions.append({"partition_index": key[1], "error_code": code})
        topics.append({"name": topic.name, "partitions": partitions})
    top = outcome if isinstance(outcome, ErrorCode) else ErrorCode.none
    return _response(request, {"error_code": top, "topics": topics})


async def handle_list_groups(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    states = {str(s).lower() for s in getattr(body, "states_filter", ()) or ()}
    types = {str(t).lower() for t in getattr(body, "types_filter", ()) or ()}
    groups = [
        {
            "group_id": g.group_id,
            "protocol_type": g.protocol_type or "" if g.consumer is None else CONSUMER_PROTOCOL,
            "group_state": g.state_name(),
            "group_type": g.group_type,
        }
        for g in broker.groups.list_groups(states or None)
        if not types or g.group_type in types
    ]
    return _response(request, {"error_code": ErrorCode.none, "groups": groups})


async def handle_describe_groups(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    described = []
    for group_id in request.body.groups:
        group = broker.groups.groups.get(str(group_id))
        if _elsewhere(broker, str(group_id)):
            described.append(
                {
                    "error_code": ErrorCode.not_coordinator,
                    "error_message": None,
                    "group_id": group_id,
                    "group_state": "",
                    "protocol_type": "",
                    "protocol_data": "",
                    "members": (),
                }
            )
            continue
        if group is None or group.consumer is not None:
            # A consumer-protocol group is not there for the classic API, as in Kafka.
            missing = request.header.api_version >= 6
            reason = "not found" if group is None else "is not a classic group"
            described.append(
                {
                    "error_code": ErrorCode.group_id_not_found if missing else ErrorCode.none,
                    "error_message": f"Group {group_id} {reason}." if missing else None,
                    "group_id": group_id,
                    "group_state": group_states.GroupState.DEAD.value,
                    "protocol_type": "",
                    "protocol_data": "",
                    "members": (),
                }
            )
            continue
        protocol = group.protocol_name or ""
        stable = group.state == group_states.GroupState.STABLE
        described.append(
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "group_id": group.group_id,
                "group_state": group.state.value,
                "protocol_type": group.protocol_type or "",
                "protocol_data": protocol if stable else "",
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata_for(protocol) if stable else b"",
                        "member_assignment": m.assignment if stable else b"",
                    }
                    for m in group.members.values()
                ],
            }
        )
    return _response(request, {"groups": described})


async def handle_delete_groups(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    names = [str(g) for g in request.body.groups_names]
    here = [name for name in names if not _elsewhere(broker, name)]
    results = await broker.groups.delete_groups(here, broker.clock.time_ms())
    results = {name: results.get(name, ErrorCode.not_coordinator) for name in names}
    return _response(
        request,
        {"results": [{"group_id": g, "error_code": code} for g, code in results.items()]},
    )
