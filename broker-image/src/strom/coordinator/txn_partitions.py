"""AddPartitionsToTxn and AddOffsetsToTxn: partitions joining a transaction, and the
verification a partition leader asks for before a transactional batch opens one there
(KIP-890 part 1). Answers as `txn_decisions` says."""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from strom.coordinator.txn_decisions import Reply, Write
from strom.coordinator.txn_metadata import TransactionMetadata
from strom.coordinator.txn_states import TransactionState, TransactionVersion

OFFSETS_TOPIC = "__consumer_offsets"

_PREPARED = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})


def still_ending(metadata: TransactionMetadata | None) -> bool:
    """Would AddPartitionsToTxn answer CONCURRENT_TRANSACTIONS only because the id's last
    transaction is still being ended (its Prepare* or CompleteX write, or its markers)?
    The coordinator then holds the request a while instead (see TransactionCoordinator)."""
    return metadata is not None and (
        metadata.pending_transition_in_progress or metadata.state in _PREPARED
    )


def add_partitions(
    metadata: TransactionMetadata | None,
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[tuple[str, int]],
    client_transaction_version: TransactionVersion = TransactionVersion.TV_0,
    now_ms: int,
) -> Reply | Write:
    """AddPartitionsToTxn (the client form, v0-3, is TV0; v4+ without verify_only, the
    leader adding a partition for a TV2 producer, is TV2)."""
    added = frozenset(partitions)
    if not transactional_id:
        return Reply(ErrorCode.invalid_request)
    if metadata is None:
        return Reply(ErrorCode.invalid_producer_id_mapping)
    # Kafka 4.3 checks the pending transition first
    if metadata.pending_transition_in_progress:
        return Reply(ErrorCode.concurrent_transactions)
    if metadata.producer_id != producer_id:
        return Reply(ErrorCode.invalid_producer_id_mapping)
    if metadata.producer_epoch != producer_epoch:
        return Reply(ErrorCode.producer_fenced)
    if metadata.state in _PREPARED:
        return Reply(ErrorCode.concurrent_transactions)
    if metadata.state is TransactionState.ONGOING and added <= metadata.partitions:
        return Reply(ErrorCode.none)  # already there: no write
    transit = metadata.prepare_add_partitions(added, now_ms, client_transaction_version)
    return Write(metadata, transit, Reply(ErrorCode.none))


def add_offsets(
    metadata: TransactionMetadata | None,
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    offsets_partition: int,
    now_ms: int,
) -> Reply | Write:
    """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction
    (KafkaApis.handleAddOffsetsToTxnRequest; the caller computes the partition)."""
    return add_partitions(
        metadata,
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partitions=[(OFFSETS_TOPIC, offsets_partition)],
        now_ms=now_ms,
    )


def verify_partitions(
    metadata: TransactionMetadata | None,
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[tuple[str, int]],
) -> dict[tuple[str, int], ErrorCode]:
    """AddPartitionsToTxn v4+ with verify_only (KIP-890 part 1): is each partition in the
    transaction? Nothing is written; a transaction-level error goes to every partition.
    The pending state is not looked at: the append checks again."""
    asked = list(partitions)
    if not transactional_id:
        return dict.fromkeys(asked, ErrorCode.invalid_request)
    if metadata is None or metadata.producer_id != producer_id:
        return dict.fromkeys(asked, ErrorCode.invalid_producer_id_mapping)
    if metadata.producer_epoch != producer_epoch:
        return dict.fromkeys(asked, ErrorCode.producer_fenced)
    if metadata.state in _PREPARED:
        return dict.fromkeys(asked, ErrorCode.concurrent_transactions)
    return {
        partition: (
            ErrorCode.none if partition in metadata.partitions else ErrorCode.transaction_abortable
        )
        for partition in asked
    }
