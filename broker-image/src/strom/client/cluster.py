"""Cluster operations: the brokers and the controller, leader elections, partition
reassignments, log dirs and the KRaft metadata quorum.

Each operation is a generator of `steps` (see there) that `admin.Admin` runs blocking and
`admin.AsyncAdmin` awaits. librdkafka has calls for the cluster description and elections
only; reassignments, log dirs and the quorum are kio requests that `wire` sends (as
`steps.Request`), and their error codes become ClientErrors here.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import confluent_kafka
from kio.schema.alter_partition_reassignments.v0 import request as alter_reassignments_request
from kio.schema.alter_partition_reassignments.v0 import response as alter_reassignments_response
from kio.schema.describe_log_dirs.v4 import request as log_dirs_request
from kio.schema.describe_log_dirs.v4 import response as log_dirs_response
from kio.schema.describe_quorum.v1 import request as quorum_request
from kio.schema.describe_quorum.v1 import response as quorum_response
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0 import request as list_reassignments_request
from kio.schema.list_partition_reassignments.v0 import response as list_reassignments_response
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta

from strom.client import errors, results, steps, wire

Election = Literal["preferred", "unclean"]
METADATA_TOPIC = "__cluster_metadata"  # the KRaft metadata log's topic


def describe_cluster(session: steps.Session) -> steps.Operation[results.ClusterInfo]:
    described = yield steps.Future(
        session.client.describe_cluster(request_timeout=session.timeout), "the cluster description"
    )
    controller = described.controller
    return results.ClusterInfo(
        cluster_id=described.cluster_id,
        controller=None if controller is None else controller.id,
        nodes=tuple(as_node(n) for n in described.nodes),
    )


def elect_leaders(
    session: steps.Session, election: Election, partitions: Iterable[results.TopicPartition] | None
) -> steps.Operation[dict[results.TopicPartition, errors.ClientError | None]]:
    election_type = (
        confluent_kafka.ElectionType.PREFERRED
        if election == "preferred"
        else confluent_kafka.ElectionType.UNCLEAN
    )
    wanted = (
        None
        if partitions is None
        else [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
    )
    # No request_timeout/operation_timeout: confluent-kafka 2.16.1 rejects either one
    # ("more argument specifiers than keyword list entries"); librdkafka's defaults
    # apply, and our own deadline bounds the wait as for every call.
    future = session.client.elect_leaders(election_type, wanted)
    elected = yield steps.Future(future, f"the {election} leader election")
    out: dict[results.TopicPartition, errors.ClientError | None] = {}
    for key, failure in elected.items():
        tp = results.TopicPartition(key.topic, key.partition)
        # a KafkaError per partition (the docstring says KafkaException: accept both)
        if isinstance(failure, confluent_kafka.KafkaError):
            failure = confluent_kafka.KafkaException(failure)
        error = None if failure is None else errors.kafka_error(failure)
        if failure is None or (
            error is not None and error.code() == confluent_kafka.KafkaError.ELECTION_NOT_NEEDED
        ):
            out[tp] = None
        else:
            out[tp] = steps.translate(failure, key.topic)
    return out


def alter_partition_reassignments(
    session: steps.Session, reassignments: Mapping[results.TopicPartition, Sequence[int] | None]
) -> steps.Operation[dict[results.TopicPartition, errors.ClientError | None]]:
    if not reassignments:
        return {}
    by_topic: dict[str, list[alter_reassignments_request.ReassignablePartition]] = {}
    for tp, replicas in sorted(reassignments.items()):
        by_topic.setdefault(tp.topic, []).append(
            alter_reassignments_request.ReassignablePartition(
                partition_index=i32(tp.partition),
                replicas=None if replicas is None else tuple(BrokerId(r) for r in replicas),
            )
        )
    request = alter_reassignments_request.AlterPartitionReassignmentsRequest(
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=session.timeout)),
        topics=tuple(
            alter_reassignments_request.ReassignableTopic(
                name=TopicName(topic), partitions=tuple(partitions)
            )
            for topic, partitions in by_topic.items()
        ),
    )
    response = yield any_broker(
        session,
        request,
        alter_reassignments_response.AlterPartitionReassignmentsResponse,
        "the partition reassignments",
    )
    raise_for(response.error_code, response.error_message, "the partition reassignments")
    out: dict[results.TopicPartition, errors.ClientError | None] = {}
    for topic in response.responses:
        for p in topic.partitions:
            tp = results.TopicPartition(str(topic.name), int(p.partition_index))
            out[tp] = error_for(p.error_code, p.error_message, f"reassigning {tp}")
    return out


def list_partition_reassignments(
    session: steps.Session, partitions: Iterable[results.TopicPartition] | None
) -> steps.Operation[dict[results.TopicPartition, results.Reassignment]]:
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(set(partitions)):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = tuple(
            list_reassignments_request.ListPartitionReassignmentsTopics(
                name=TopicName(topic), partition_indexes=tuple(i32(p) for p in indexes)
            )
            for topic, indexes in by_topic.items()
        )
    request = list_reassignments_request.ListPartitionReassignmentsRequest(
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=session.timeout)), topics=topics
    )
    response = yield any_broker(
        session,
        request,
        list_reassignments_response.ListPartitionReassignmentsResponse,
        "the ongoing partition reassignments",
    )
    raise_for(response.error_code, response.error_message, "listing reassignments")
    out = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = results.TopicPartition(str(topic.name), int(p.partition_index))
            out[tp] = results.Reassignment(
                partition=tp,
                replicas=tuple(int(r) for r in p.replicas),
                adding_replicas=tuple(int(r) for r in p.adding_replicas),
                removing_replicas=tuple(int(r) for r in p.removing_replicas),
            )
    return dict(sorted(out.items()))


def describe_log_dirs(
    session: steps.Session, broker_ids: Sequence[int] | None
) -> steps.Operation[dict[int, tuple[results.LogDirInfo, ...]]]:
    cluster = yield from describe_cluster(session)
    nodes = {node.id: node for node in cluster.nodes}
    wanted = sorted(nodes) if broker_ids is None else list(broker_ids)
    out = {}
    for broker in wanted:
        if broker not in nodes:
            raise errors.NotFoundError(f"Broker {broker} is not in the cluster")
        node = nodes[broker]
        what = f"the log dirs of broker {broker}"
        response = yield steps.Request(
            ((node.host, node.port),),
            log_dirs_request.DescribeLogDirsRequest(topics=None),
            log_dirs_response.DescribeLogDirsResponse,
            what,
        )
        raise_for(response.error_code, None, what)
        out[broker] = tuple(
            results.LogDirInfo(
                path=result.log_dir,
                error=error_for(result.error_code, None, result.log_dir),
                total_bytes=None if result.total_bytes < 0 else int(result.total_bytes),
                usable_bytes=None if result.usable_bytes < 0 else int(result.usable_bytes),
                replicas=tuple(
                    sorted(
                        (
                            results.LogDirReplica(
                                partition=results.TopicPartition(
                                    str(topic.name), int(p.partition_index)
                                ),
                                size=int(p.partition_size),
                                offset_lag=int(p.offset_lag),
                                is_future=bool(p.is_future_key),
                            )
                            for topic in result.topics
                            for p in topic.partitions
                        ),
                        key=lambda r: r.partition,
                    )
                ),
            )
            for result in response.results
        )
    return out


def describe_metadata_quorum(session: steps.Session) -> steps.Operation[results.QuorumInfo]:
    request = quorum_request.DescribeQuorumRequest(
        topics=(
            quorum_request.TopicData(
                topic_name=TopicName(METADATA_TOPIC),
                partitions=(quorum_request.PartitionData(partition_index=i32(0)),),
            ),
        )
    )
    what = "the metadata quorum description"
    response = yield any_broker(session, request, quorum_response.DescribeQuorumResponse, what)
    raise_for(response.error_code, None, what)
    [topic] = response.topics
    [partition] = topic.partitions
    raise_for(partition.error_code, None, what)

    def replicas(states: Iterable[Any]) -> tuple[results.QuorumReplica, ...]:
        return tuple(
            results.QuorumReplica(
                id=int(s.replica_id),
                log_end_offset=int(s.log_end_offset),
                last_fetch_timestamp=_optional_ms(s.last_fetch_timestamp),
                last_caught_up_timestamp=_optional_ms(s.last_caught_up_timestamp),
            )
            for s in states
        )

    return results.QuorumInfo(
        leader_id=int(partition.leader_id),
        leader_epoch=int(partition.leader_epoch),
        high_watermark=int(partition.high_watermark),
        voters=replicas(partition.current_voters),
        observers=replicas(partition.observers),
    )


def any_broker(
    session: steps.Session, request: Any, response_type: type[Any], what: str
) -> steps.Request:
    """A request for whichever bootstrap server answers first (brokers forward
    controller requests to the active controller, as for the Java admin client)."""
    wire.check_security(session.security_protocol)
    addresses = tuple(wire.split_addresses(session.bootstrap))
    return steps.Request(addresses, request, response_type, what)


def as_node(described: Any) -> results.Node:
    """A confluent-kafka Node (a broker, a group's coordinator) as plain data."""
    return results.Node(id=int(described.id), host=str(described.host), port=int(described.port))


def error_for(code: ErrorCode, message: str | None, what: str) -> errors.ClientError | None:
    """A kio error code (with the broker's message) as a ClientError; None for NONE."""
    if code == ErrorCode.none:
        return None
    text = f"{what}: {wire.error_name(code)}" + (f" ({message})" if message else "")
    if code == ErrorCode.unknown_topic_or_partition:
        return errors.NotFoundError(text)
    if code == ErrorCode.unsupported_version:
        return errors.UnsupportedError(text)
    return errors.ClientError(text)


def raise_for(code: ErrorCode, message: str | None, what: str) -> None:
    error = error_for(code, message, what)
    if error is not None:
        raise error


def _optional_ms(value: int) -> int | None:
    return None if value < 0 else int(value)
