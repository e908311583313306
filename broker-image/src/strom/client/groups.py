"""Consumer group and offset operations: listing, describing and deleting groups, reading
and committing a group's offsets, and ListOffsets (earliest, latest, or by timestamp).

Each operation is a generator of `steps` (see there) that `admin.Admin` runs blocking and
`admin.AsyncAdmin` awaits. States and types are given Kafka's names (`GROUP_STATES`,
`GROUP_TYPES`), as the Java tools print them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import confluent_kafka
from confluent_kafka import admin as kafka_admin

from strom.client import cluster, errors, results, steps

# Kafka's names (org.apache.kafka.common.GroupState / GroupType toString()).
GROUP_STATES = {
    confluent_kafka.ConsumerGroupState.UNKNOWN: "Unknown",
    confluent_kafka.ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    confluent_kafka.ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    confluent_kafka.ConsumerGroupState.STABLE: "Stable",
    confluent_kafka.ConsumerGroupState.DEAD: "Dead",
    confluent_kafka.ConsumerGroupState.EMPTY: "Empty",
}
GROUP_TYPES = {
    confluent_kafka.ConsumerGroupType.UNKNOWN: "Unknown",
    confluent_kafka.ConsumerGroupType.CONSUMER: "Consumer",
    confluent_kafka.ConsumerGroupType.CLASSIC: "Classic",
}

OffsetSpec = Literal["earliest", "latest"] | int  # an int is a timestamp in ms


def list_groups(session: steps.Session) -> steps.Operation[list[results.GroupListing]]:
    listed = yield steps.Future(
        session.client.list_consumer_groups(request_timeout=session.timeout), "the group list"
    )
    if listed.errors:
        raise errors.ClientError(
            "listing groups failed: " + "; ".join(str(e) for e in listed.errors)
        )
    return sorted(
        (
            results.GroupListing(
                group_id=g.group_id,
                state=GROUP_STATES.get(g.state, "Unknown"),
                type=GROUP_TYPES.get(g.type, "Unknown"),
                simple=bool(g.is_simple_consumer_group),
            )
            for g in listed.valid
        ),
        key=lambda g: g.group_id,
    )


def describe_groups(
    session: steps.Session, group_ids: Sequence[str]
) -> steps.Operation[dict[str, results.GroupInfo]]:
    if not group_ids:
        return {}
    futures = session.client.describe_consumer_groups(
        list(group_ids), request_timeout=session.timeout
    )
    out = {}
    for group_id in group_ids:
        try:
            described = yield steps.Future(futures[group_id], f"the description of '{group_id}'")
        except errors.NotFoundError:
            out[group_id] = results.GroupInfo(group_id, "Dead", "Unknown", "", None, (), False)
            continue
        members = tuple(
            results.MemberInfo(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id or None,
                client_id=m.client_id,
                host=m.host,
                assignment=tuple(
                    results.TopicPartition(tp.topic, tp.partition)
                    for tp in (m.assignment.topic_partitions if m.assignment else [])
                ),
            )
            for m in described.members
        )
        out[group_id] = results.GroupInfo(
            group_id=described.group_id,
            state=GROUP_STATES.get(described.state, "Unknown"),
            type=GROUP_TYPES.get(described.type, "Unknown"),
            assignor=described.partition_assignor or "",
            coordinator=None
            if described.coordinator is None
            else cluster.as_node(described.coordinator),
            members=members,
            simple=bool(described.is_simple_consumer_group),
        )
    return out


def committed_offsets(
    session: steps.Session, group_id: str
) -> steps.Operation[dict[results.TopicPartition, int]]:
    request = [confluent_kafka.ConsumerGroupTopicPartitions(group_id)]
    futures = session.client.list_consumer_group_offsets(request, request_timeout=session.timeout)
    result = yield steps.Future(futures[group_id], f"the committed offsets of '{group_id}'")
    out = {}
    for tp in result.topic_partitions or []:
        if tp.error is not None:
            raise errors.ClientError(f"offsets of {tp.topic}-{tp.partition}: {tp.error}")
        if tp.offset >= 0:
            out[results.TopicPartition(tp.topic, tp.partition)] = tp.offset
    return out


def alter_committed_offsets(
    session: steps.Session, group_id: str, offsets: Mapping[results.TopicPartition, int]
) -> steps.Operation[None]:
    if not offsets:
        return
    partitions = [
        confluent_kafka.TopicPartition(tp.topic, tp.partition, offset)
        for tp, offset in sorted(offsets.items())
    ]
    request = [confluent_kafka.ConsumerGroupTopicPartitions(group_id, partitions)]
    futures = session.client.alter_consumer_group_offsets(request, request_timeout=session.timeout)
    result = yield steps.Future(futures[group_id], f"the offset commit of '{group_id}'")
    failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
    if failed:
        raise errors.ClientError(
            f"committing offsets of group '{group_id}' failed: "
            + ", ".join(f"{tp.topic}-{tp.partition}: {tp.error}" for tp in failed)
        )


def delete_groups(
    session: steps.Session, group_ids: Sequence[str]
) -> steps.Operation[dict[str, errors.ClientError | None]]:
    if not group_ids:
        return {}
    futures = session.client.delete_consumer_groups(
        list(group_ids), request_timeout=session.timeout
    )
    out: dict[str, errors.ClientError | None] = {}
    for group_id in group_ids:
        try:
            yield steps.Future(futures[group_id], f"the deletion of '{group_id}'")
            out[group_id] = None
        except errors.ConnectError:
            raise
        except errors.ClientError as e:
            out[group_id] = e
    return out


# --- offsets --------------------------------------------------------------------------


def list_offsets(
    session: steps.Session, partitions: Iterable[results.TopicPartition], spec: OffsetSpec
) -> steps.Operation[dict[results.TopicPartition, int]]:
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    if spec == "earliest":
        offset_spec = kafka_admin.OffsetSpec.earliest()  # type: ignore[no-untyped-call]
    elif spec == "latest":
        offset_spec = kafka_admin.OffsetSpec.latest()  # type: ignore[no-untyped-call]
    else:
        offset_spec = kafka_admin.OffsetSpec.for_timestamp(int(spec))
    request = {confluent_kafka.TopicPartition(tp.topic, tp.partition): offset_spec for tp in wanted}
    futures = session.client.list_offsets(
        request,
        isolation_level=confluent_kafka.IsolationLevel.READ_UNCOMMITTED,
        request_timeout=session.timeout,
    )
    out = {}
    for key, future in futures.items():
        tp = results.TopicPartition(key.topic, key.partition)
        info = yield steps.Future(future, f"the offsets of {tp}", key.topic)
        out[tp] = int(info.offset)
    return out
