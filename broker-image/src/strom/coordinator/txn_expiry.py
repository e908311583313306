"""Transactions past their timeout, and transactional ids unused for
transactional.id.expiration.ms (Kafka 4.3's abortTimedOutTransactions and
TransactionStateManager's timedOutTransactions and removeExpiredTransactionalIds). The
coordinator scans its cache with these periodically; answers as `txn_decisions` says."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strom.coordinator.txn_decisions import NeedProducerId, Write
from strom.coordinator.txn_end import fence_and_abort
from strom.coordinator.txn_metadata import TransactionMetadata, TxnTransit
from strom.coordinator.txn_states import TransactionState, TransactionVersion


@dataclass(frozen=True, slots=True)
class TimedOut:
    transactional_id: str
    producer_id: int
    producer_epoch: int


def timed_out(metadata_by_id: Mapping[str, TransactionMetadata], now_ms: int) -> list[TimedOut]:
    """Ongoing transactions past their timeout (TransactionStateManager.
    timedOutTransactions): none with a pending transition, none of KIP-939's."""
    return [
        TimedOut(transactional_id, metadata.producer_id, metadata.producer_epoch)
        for transactional_id, metadata in metadata_by_id.items()
        if not metadata.pending_transition_in_progress
        and metadata.state is TransactionState.ONGOING
        and not metadata.is_distributed_two_phase_commit
        and metadata.start_ms + metadata.timeout_ms < now_ms
    ]


def abort_timed_out(
    metadata: TransactionMetadata,
    timed_out: TimedOut,
    *,
    server_transaction_version: TransactionVersion,
    now_ms: int,
    new_producer_id: int | None = None,
) -> Write | NeedProducerId | None:
    """Fence and abort one timed-out transaction (abortTimedOutTransactions), or None if
    it changed producer or has a transition pending since it was found. Nobody waits
    for the answer: the producer's next request finds itself fenced."""
    if metadata.producer_id != timed_out.producer_id or metadata.pending_transition_in_progress:
        return None
    return fence_and_abort(
        metadata, server_transaction_version, now_ms, new_producer_id, success=ErrorCode.none
    )


def expire(
    metadata_by_id: Mapping[str, TransactionMetadata], now_ms: int, expiration_ms: int
) -> list[tuple[TransactionMetadata, TxnTransit]]:
    """Idle ids not used for `transactional.id.expiration.ms`, each with its Dead transit
    (already pending): write a tombstone (`to_log_value()` is None) for each; on success
    drop the id from the cache if it is still pending Dead at the same epoch, else set
    its pending_state back to None (removeExpiredTransactionalIds)."""
    expired = [
        metadata
        for metadata in metadata_by_id.values()
        if metadata.pending_state is None
        and metadata.state.is_expiration_allowed
        and metadata.last_update_ms <= now_ms - expiration_ms
    ]
    return [(metadata, metadata.prepare_dead()) for metadata in expired]
