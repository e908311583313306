"""KIP-890 part 1 on the produce path: before a transactional batch may open a transaction
in a partition, the producer's coordinator confirms the partition is in its ongoing
transaction (AddPartitionsToTxn v4 `verify_only`, or a local call).

A batch that reaches a partition after its transaction ended (a slow retry, a zombie)
would otherwise open a new "transaction" there that no marker ever closes: its records
would turn visible with the producer's next commit (an aborted read) and the partition's
last stable offset would hang until then. Kafka's ReplicaManager/AddPartitionsToTxnManager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.records import batches
from strom.replication import partition as partitions

if TYPE_CHECKING:
    from strom.server.context import BrokerContext

TopicPartition = tuple[str, int]
Verified = partitions.VerificationGuard | ErrorCode

# What a producer is answered when the verification failed (ReplicaManager's mapping):
# retriable coordinator troubles become NOT_ENOUGH_REPLICAS, which needs no metadata refresh.
_RETRIABLE = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.request_timed_out,
    }
)
# Produce v11+ knows TRANSACTION_ABORTABLE; older versions get INVALID_TXN_STATE.
FIRST_ABORTABLE_PRODUCE_VERSION = 11


def produce_error(error: ErrorCode, api_version: int) -> ErrorCode:
    if error in _RETRIABLE:
        return ErrorCode.not_enough_replicas
    if error is ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if error is ErrorCode.transaction_abortable and api_version < FIRST_ABORTABLE_PRODUCE_VERSION:
        return ErrorCode.invalid_txn_state
    return error


async def verify(
    broker: BrokerContext, body: Any, api_version: int
) -> dict[TopicPartition, Verified]:
    """Per partition of a transactional produce that needs it: the guard to append with,
    or the error to answer instead. Partitions left out need no verification (their
    producer's transaction is open there, or they fail before appending anyway)."""
    transactional_id = body.transactional_id
    if transactional_id is None or broker.verify_transaction is None:
        return {}
    guards: dict[TopicPartition, partitions.VerificationGuard] = {}
    producer: tuple[int, int] | None = None
    for topic_data in body.topic_data:
        resolved = broker.resolve_topic(
            getattr(topic_data, "name", None), getattr(topic_data, "topic_id", None)
        )
        if resolved.name is None:
            continue
        for partition_data in topic_data.partition_data:
            records = partition_data.records
            if not records or len(records) < batches.HEADER_SIZE:
                continue
            header = batches.BatchHeader.parse(records)
            partition = broker.partition(resolved.name, int(partition_data.index))
            if not header.is_transactional or partition is None or not partition.is_leader:
                continue
            guard = partition.transaction_verification(header.producer_id)
            if guard is not None:
                guards[(resolved.name, int(partition_data.index))] = guard
                producer = (header.producer_id, header.producer_epoch)
    if not guards or producer is None:
        return {}
    answers = await broker.verify_transaction(str(transactional_id), *producer, list(guards))
    verified: dict[TopicPartition, Verified] = {}
    for key, guard in guards.items():
        error = answers.get(key, ErrorCode.unknown_server_error)
        verified[key] = guard if error is ErrorCode.none else produce_error(error, api_version)
    return verified
