"""InitProducerId with a transactional id: a new id, a new epoch, or a new producer id once
the epoch is exhausted; a restarted producer fences and aborts its zombie's transaction
(Kafka 4.3's TransactionCoordinator.handleInitProducerId). Answers as `txn_decisions`
says."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from strom.coordinator.txn_decisions import NeedProducerId, Reply, Write
from strom.coordinator.txn_end import fence_and_abort
from strom.coordinator.txn_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransitionError,
    TransactionMetadata,
    TxnTransit,
    is_epoch_exhausted,
)
from strom.coordinator.txn_states import TransactionState, TransactionVersion

_IDLE = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)
_PREPARED = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})


def init_producer_id(
    metadata: TransactionMetadata | None,
    *,
    transactional_id: str,
    timeout_ms: int,
    max_timeout_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    server_transaction_version: TransactionVersion,
    now_ms: int,
    new_producer_id: int | None = None,
) -> Reply | Write | NeedProducerId:
    """InitProducerId with a transactional id (the null id never gets here). The request's
    producer id and epoch are v3+'s (KIP-360), -1 when absent. The answer after the
    write is the transit's producer id and epoch."""
    # KafkaApis.handleInitProducerIdRequest: both or neither
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return Reply(ErrorCode.invalid_request)
    expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
    if not transactional_id:
        return Reply(ErrorCode.invalid_request)
    # TransactionStateManager.validateTransactionTimeoutMs
    if not 0 < timeout_ms <= max_timeout_ms:
        return Reply(ErrorCode.invalid_transaction_timeout)
    created = metadata is None
    if metadata is None:
        if new_producer_id is None:
            return NeedProducerId()
        metadata = TransactionMetadata(
            transactional_id, new_producer_id, timeout_ms=timeout_ms, last_update_ms=now_ms
        )
        new_producer_id = None  # spent on the new metadata
    if metadata.pending_transition_in_progress:
        return Reply(ErrorCode.concurrent_transactions)
    if expected is not None and not _is_valid_producer_id(metadata, *expected):
        return Reply(ErrorCode.producer_fenced)
    state = metadata.state
    if state in _PREPARED:
        return Reply(ErrorCode.concurrent_transactions)
    if state in _IDLE:
        transit: TxnTransit | ErrorCode
        if metadata.is_producer_epoch_exhausted and (
            expected is None or expected[1] == metadata.producer_epoch
        ):
            if new_producer_id is None:
                return NeedProducerId()
            transit = metadata.prepare_producer_id_rotation(
                new_producer_id, timeout_ms, now_ms, record_last_epoch=expected is not None
            )
        else:
            expected_epoch = None if expected is None else expected[1]
            transit = metadata.prepare_increment_producer_epoch(timeout_ms, expected_epoch, now_ms)
        if isinstance(transit, ErrorCode):
            return Reply(transit)
        answer = Reply(ErrorCode.none, transit.producer_id, transit.producer_epoch)
        return Write(metadata, transit, answer, created=created)
    if state is TransactionState.ONGOING:
        # a restarted producer fences its zombie: abort what the old one left open. The
        # bumped epoch is never answered: the client retries on CONCURRENT_TRANSACTIONS
        # and then finds CompleteAbort, and bumps again (rotating the id if need be)
        return fence_and_abort(
            metadata,
            server_transaction_version,
            now_ms,
            new_producer_id,
            success=ErrorCode.concurrent_transactions,
        )
    raise IllegalTransitionError(f"{transactional_id} is in state {state.kafka_name}")


def _is_valid_producer_id(metadata: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    # prepareInitProducerIdTransit.isValidProducerId: a just-created id, the current id
    # (the epoch is checked by the bump), or the previous id at an exhausted epoch (a
    # retry of a rotation whose answer was lost)
    return (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == metadata.producer_id
        or (producer_id == metadata.previous_producer_id and is_epoch_exhausted(epoch))
    )
