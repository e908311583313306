"""Transactions: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers, DescribeTransactions,
ListTransactions and DescribeProducers.

The coordinator's work lives in `strom.coordinator.transactions` (and the offsets side in
the group coordinator); these functions translate between it and every version of the
messages, as Kafka's KafkaApis does.
"""

from __future__ import annotations

import datetime
import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import topics
from strom.coordinator import offsets_records
from strom.coordinator import transactions as txn_coordinator
from strom.protocol import apis, shaping
from strom.server.handlers import groups

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

log = logging.getLogger(__name__)

_response = apis.build_response
_EPOCH = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
TopicPartition = tuple[str, int]


def _coordinator(broker: BrokerContext) -> txn_coordinator.TransactionCoordinator:
    assert broker.transactions is not None, "the broker builds its transaction coordinator"
    return broker.transactions


async def init_producer_id(broker: BrokerContext, body: Any) -> txn_coordinator.Reply:
    """InitProducerId's transactional branch (the idempotent one is producer_ids')."""
    return await _coordinator(broker).init_producer_id(
        str(body.transactional_id),
        shaping.as_millis(body.transaction_timeout),
        int(getattr(body, "producer_id", -1)),
        int(getattr(body, "producer_epoch", -1)),
    )


async def handle_add_partitions_to_txn(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    coordinator = _coordinator(broker)
    if request.header.api_version <= 3:
        wanted = [
            (str(topic.name), int(index))
            for topic in body.v3_and_below_topics
            for index in topic.partitions
        ]
        errors = await _add_partitions(
            broker,
            str(body.v3_and_below_transactional_id),
            int(body.v3_and_below_producer_id),
            int(body.v3_and_below_producer_epoch),
            wanted,
        )
        return _response(request, {"results_by_topic_v3_and_below": _topic_results(errors)})
    # v4+: brokers asking for several transactions (KIP-890's verification)
    results = []
    for transaction in body.transactions:
        wanted = [
            (str(topic.name), int(index))
            for topic in transaction.topics
            for index in topic.partitions
        ]
        if transaction.verify_only:
            errors = coordinator.verify_partitions(
                str(transaction.transactional_id),
                int(transaction.producer_id),
                int(transaction.producer_epoch),
                wanted,
            )
        else:
            errors = await _add_partitions(
                broker,
                str(transaction.transactional_id),
                int(transaction.producer_id),
                int(transaction.producer_epoch),
                wanted,
            )
        results.append(
            {
                "transactional_id": transaction.transactional_id,
                "topic_results": _topic_results(errors),
            }
        )
    return _response(request, {"error_code": ErrorCode.none, "results_by_transaction": results})


async def _add_partitions(
    broker: BrokerContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    wanted: list[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """Kafka's rule: a partition that does not exist (or an internal topic) fails the
    whole request, the others answering OPERATION_NOT_ATTEMPTED."""
    unknown = {
        each
        for each in wanted
        if each[0] in topics.INTERNAL_TOPICS or not _partition_exists(broker, *each)
    }
    if unknown:
        return {
            each: (
                ErrorCode.unknown_topic_or_partition
                if each in unknown
                else ErrorCode.operation_not_attempted
            )
            for each in wanted
        }
    error = await _coordinator(broker).add_partitions(
        transactional_id, producer_id, producer_epoch, wanted
    )
    return dict.fromkeys(wanted, error)


def _partition_exists(broker: BrokerContext, topic: str, index: int) -> bool:
    known = broker.image.topics.get(topic)
    return known is not None and index in known.partitions


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (topic, index), error in errors.items():
        by_topic[topic].append({"partition_index": index, "partition_error_code": error})
    return [{"name": name, "results_by_partition": parts} for name, parts in by_topic.items()]


async def handle_add_offsets_to_txn(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    offsets_partitions = broker.offsets_topic.partition_count()
    if offsets_partitions is None:
        # Kafka creates __consumer_offsets on FindCoordinator; a producer may get here first.
        try:
            offsets_partitions = (await broker.offsets_topic.ensure()).partition_count
        except topics.MetadataError as error:
            log.warning("cannot create %s: %s", topics.OFFSETS_TOPIC, error)
            return _response(request, {"error_code": ErrorCode.coordinator_not_available})
    added = await _coordinator(broker).add_offsets(
        str(body.transactional_id),
        int(body.producer_id),
        int(body.producer_epoch),
        offsets_records.partition_for(str(body.group_id), offsets_partitions),
    )
    return _response(request, {"error_code": added})


async def handle_end_txn(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    reply = await _coordinator(broker).end_txn(
        str(body.transactional_id),
        int(body.producer_id),
        int(body.producer_epoch),
        bool(body.committed),
    )
    return _response(
        request,
        {
            "error_code": reply.error,
            "producer_id": reply.producer_id,
            "producer_epoch": reply.producer_epoch,
        },
    )


async def handle_txn_offset_commit(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    group_id = str(body.group_id)
    wanted, unknown = groups.commit_entries(broker, body)
    outcome: ErrorCode | dict[TopicPartition, ErrorCode]
    if groups.coordinator_of(broker, group_id) not in (None, broker.node_id):
        outcome = ErrorCode.not_coordinator
    else:
        outcome = await broker.groups.commit_transactional_offsets(
            group_id=group_id,
            producer_id=int(body.producer_id),
            producer_epoch=int(body.producer_epoch),
            generation_id=int(getattr(body, "generation_id", -1)),
            member_id=str(getattr(body, "member_id", "")),
            group_instance_id=getattr(body, "group_instance_id", None),
            offsets=wanted,
            now_ms=broker.clock.time_ms(),
            api_version=request.header.api_version,
        )
    return _response(request, {"topics": groups.commit_answers(body, unknown, outcome)})


async def handle_write_txn_markers(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    """From a transaction coordinator (or `kafka-transactions.sh abort`): one marker per
    listed partition this broker leads."""
    assert broker.local_markers is not None, "the broker builds its marker writer"
    results = []
    for marker in request.body.markers:
        wanted = [
            (str(topic.name), int(index))
            for topic in marker.topics
            for index in topic.partition_indexes
        ]
        errors = await broker.local_markers.write(
            int(marker.producer_id),
            int(marker.producer_epoch),
            bool(marker.transaction_result),
            int(marker.coordinator_epoch),
            wanted,
        )
        by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for (topic, index), error in errors.items():
            by_topic[topic].append({"partition_index": index, "error_code": error})
        results.append(
            {
                "producer_id": marker.producer_id,
                "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
            }
        )
    return _response(request, {"markers": results})


async def handle_describe_transactions(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    coordinator = _coordinator(broker)
    states = []
    for transactional_id in request.body.transactional_ids:
        described = coordinator.describe(str(transactional_id))
        states.append(
            {
                "error_code": described.error,
                "transactional_id": described.transactional_id,
                "transaction_state": described.state,
                "transaction_timeout": described.timeout_ms,
                # -1 (no transaction open) as Kafka sends it: kio's field is a datetime
                "transaction_start_time": _EPOCH
                + datetime.timedelta(milliseconds=described.start_ms),
                "producer_id": described.producer_id,
                "producer_epoch": described.producer_epoch,
                "topics": [
                    {"topic": topic, "partitions": list(indexes)}
                    for topic, indexes in described.topics
                ],
            }
        )
    return _response(request, {"transaction_states": states})


async def handle_list_transactions(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    listed = _coordinator(broker).list(
        state_filters=[str(name) for name in body.state_filters],
        producer_id_filters=[int(each) for each in body.producer_id_filters],
        duration_filter_ms=int(getattr(body, "duration_filter", -1)),
        transactional_id_pattern=getattr(body, "transactional_id_pattern", None),
    )
    return _response(
        request,
        {
            "error_code": listed.error,
            "unknown_state_filters": list(listed.unknown_state_filters),
            "transaction_states": [
                {
                    "transactional_id": each.transactional_id,
                    "producer_id": each.producer_id,
                    "transaction_state": each.state,
                }
                for each in listed.transactions
            ],
        },
    )


async def handle_describe_producers(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    """KIP-664: the active producers of partitions led here (kafka-transactions.sh
    describe-producers and find-hanging)."""
    answered = []
    for topic in request.body.topics:
        partitions = []
        for index in topic.partition_indexes:
            entry: dict[str, Any] = {
                "partition_index": int(index),
                "error_code": ErrorCode.none,
                "error_message": None,
                "active_producers": [],
            }
            partition = broker.partition(str(topic.name), int(index))
            if partition is None:
                exists = _partition_exists(broker, str(topic.name), int(index))
                entry["error_code"] = (
                    ErrorCode.not_leader_or_follower
                    if exists
                    else ErrorCode.unknown_topic_or_partition
                )
            elif not partition.is_leader:
                entry["error_code"] = ErrorCode.not_leader_or_follower
            else:
                entry["active_producers"] = [
                    {
                        "producer_id": producer.producer_id,
                        "producer_epoch": producer.epoch,
                        "last_sequence": producer.last_sequence,
                        "last_timestamp": producer.last_timestamp,
                        "coordinator_epoch": producer.coordinator_epoch,
                        "current_txn_start_offset": producer.current_txn_first_offset,
                    }
                    for producer in partition.log.producer_state.producers.values()
                ]
            partitions.append(entry)
        answered.append({"name": topic.name, "partitions": partitions})
    return _response(request, {"topics": answered})
