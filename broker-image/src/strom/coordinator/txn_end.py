"""EndTxn and the markers that end a transaction (Kafka 4.3's TransactionCoordinator:
endTransactionWithTV1, endTransaction and its sendTxnMarkersCallback).

A client's EndTxn, and the abort the coordinator itself starts when it fences an epoch
(InitProducerId over an ongoing transaction, a timeout), write PrepareCommit or
PrepareAbort; once that is in the log, `after_end_txn_written` checks nothing moved
and gives the `Markers` to send, then the CompleteCommit/CompleteAbort record to write.
TV2 (EndTxn v5+, KIP-890 part 2) bumps the epoch at every end. Answers as
`txn_decisions` says.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strom.coordinator.txn_decisions import EndTxnCheck, NeedProducerId, Reply, Write
from strom.coordinator.txn_metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransitionError,
    TransactionMetadata,
    TxnTransit,
)
from strom.coordinator.txn_states import TransactionState, TransactionVersion

_PREPARED = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})
_FENCE = TransactionState.PREPARE_EPOCH_FENCE


@dataclass(frozen=True, slots=True)
class Markers:
    """The markers a prepared transaction needs, and the record that ends it."""

    transactional_id: str
    commit: bool
    producer_id: int
    producer_epoch: int
    transaction_version: TransactionVersion
    partitions: frozenset[tuple[str, int]]
    # write this once every partition has its marker (pending_state is already set)
    complete: TxnTransit


def end_txn(
    metadata: TransactionMetadata | None,
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    client_transaction_version: TransactionVersion,
    now_ms: int,
    new_producer_id: int | None = None,
) -> Reply | Write | NeedProducerId:
    """EndTxn from a client: TV2 (v5+) bumps the epoch at every end and answers the new
    producer id and epoch; older versions are TV0."""
    if not transactional_id:
        return Reply(ErrorCode.invalid_request)
    check = EndTxnCheck(producer_id, producer_epoch, commit, client_transaction_version)
    return _end_transaction(
        metadata, check, from_client=True, now_ms=now_ms, new_producer_id=new_producer_id
    )


def after_end_txn_written(
    metadata: TransactionMetadata, check: EndTxnCheck, now_ms: int
) -> tuple[Reply, Markers | None]:
    """The Prepare* record is written and completed: check nothing moved meanwhile, then
    the answer and the markers to send (TransactionCoordinator's sendTxnMarkersCallback).
    On an error there are no markers: the transaction stays prepared until the next
    load of its partition sends them."""
    tv2 = check.client_transaction_version.supports_epoch_bump
    epochs = {check.producer_epoch, check.producer_epoch + 1} if tv2 else {check.producer_epoch}
    wanted = TransactionState.PREPARE_COMMIT if check.commit else TransactionState.PREPARE_ABORT
    error = ErrorCode.none
    if metadata.producer_id != check.producer_id:
        error = ErrorCode.invalid_producer_id_mapping
    elif metadata.producer_epoch not in epochs:
        error = ErrorCode.producer_fenced
    elif metadata.pending_transition_in_progress:
        error = ErrorCode.concurrent_transactions
    elif metadata.state in (TransactionState.DEAD, _FENCE):
        raise IllegalTransitionError(
            f"{metadata.transactional_id} is in state {metadata.state.kafka_name}"
        )
    elif metadata.state is not wanted:
        error = ErrorCode.invalid_txn_state
    if error is not ErrorCode.none:
        return Reply(error), None
    markers = complete_after_markers(metadata, now_ms)
    if check.success is not ErrorCode.none:
        return Reply(check.success), markers
    if tv2:
        # Kafka 4.3 answers the ids of the CompleteX record: after an overflow, the new id
        return Reply(
            ErrorCode.none, markers.complete.producer_id, markers.complete.producer_epoch
        ), markers
    return Reply(ErrorCode.none), markers


def complete_after_markers(metadata: TransactionMetadata, now_ms: int) -> Markers:
    """A prepared transaction's markers and its CompleteX record (prepareComplete sets the
    pending state): after the Prepare* write, and for every prepared transaction found
    when a partition of __transaction_state is loaded. The markers carry the epoch of
    the Prepare* record."""
    if metadata.state not in _PREPARED:
        raise IllegalTransitionError(
            f"{metadata.transactional_id}: markers in state {metadata.state.kafka_name}"
        )
    partitions = frozenset(metadata.partitions)
    complete = metadata.prepare_complete(now_ms)
    return Markers(
        transactional_id=metadata.transactional_id,
        commit=metadata.state is TransactionState.PREPARE_COMMIT,
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        transaction_version=metadata.client_transaction_version,
        partitions=partitions,
        complete=complete,
    )


def fence_and_abort(
    metadata: TransactionMetadata,
    server_transaction_version: TransactionVersion,
    now_ms: int,
    new_producer_id: int | None,
    *,
    success: ErrorCode,
) -> Write | NeedProducerId:
    """Fence the producer's epoch and abort its ongoing transaction, for InitProducerId
    from a restarted producer (`txn_init`) and for a timeout (`txn_expiry`);
    `success` is what the written abort answers."""
    # the TV2 abort needs a next producer id when the epoch is exhausted: ask before the
    # fence changes anything, so that a second call starts from the same state
    if (
        server_transaction_version.supports_epoch_bump
        and metadata.is_producer_epoch_exhausted
        and new_producer_id is None
    ):
        return NeedProducerId()
    fence = metadata.prepare_fence_producer_epoch()
    # not from the client, at the server's transaction version
    check = EndTxnCheck(
        fence.producer_id, fence.producer_epoch, False, server_transaction_version, success
    )
    outcome = _end_transaction(
        metadata, check, from_client=False, now_ms=now_ms, new_producer_id=new_producer_id
    )
    if not isinstance(outcome, Write):
        # cannot happen: the fence's own epoch and id always pass endTransaction's checks
        raise IllegalTransitionError(f"{metadata.transactional_id}: fence refused: {outcome}")
    return outcome


def _end_transaction(
    metadata: TransactionMetadata | None,
    check: EndTxnCheck,
    *,
    from_client: bool,
    now_ms: int,
    new_producer_id: int | None,
) -> Reply | Write | NeedProducerId:
    if metadata is None:
        return Reply(ErrorCode.invalid_producer_id_mapping)
    if check.client_transaction_version.supports_epoch_bump:
        return _end_transaction_tv2(metadata, check, from_client, now_ms, new_producer_id)
    return _end_transaction_tv1(metadata, check, from_client, now_ms)


def _end_transaction_tv1(
    metadata: TransactionMetadata, check: EndTxnCheck, from_client: bool, now_ms: int
) -> Reply | Write:
    # endTransactionWithTV1
    epoch = check.producer_epoch
    if metadata.producer_id != check.producer_id:
        return Reply(ErrorCode.invalid_producer_id_mapping)
    # a client must name the current epoch; the coordinator's own abort a newer one
    if (from_client and epoch != metadata.producer_epoch) or epoch < metadata.producer_epoch:
        return Reply(ErrorCode.producer_fenced)
    if metadata.pending_state not in (None, _FENCE):
        return Reply(ErrorCode.concurrent_transactions)
    state = metadata.state
    if state is TransactionState.ONGOING:
        target = TransactionState.PREPARE_COMMIT if check.commit else TransactionState.PREPARE_ABORT
        epoch_fence = target is TransactionState.PREPARE_ABORT and metadata.pending_state is _FENCE
        if epoch_fence:
            # the fenced epoch goes into memory now, before the write, as in Kafka: a
            # failed write leaves it there, with has_failed_epoch_fence set
            metadata.pending_state = None
            metadata.producer_epoch = epoch
            metadata.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = metadata.prepare_abort_or_commit(
            target, TransactionVersion.TV_0, NO_PRODUCER_ID, now_ms, no_partition_added=False
        )
        return Write(metadata, transit, check, epoch_fence=epoch_fence)
    return Reply(_end_in_other_state(metadata, check.commit, retry=True))


def _end_transaction_tv2(
    metadata: TransactionMetadata,
    check: EndTxnCheck,
    from_client: bool,
    now_ms: int,
    new_producer_id: int | None,
) -> Reply | Write | NeedProducerId:
    # endTransaction (TransactionCoordinator.scala, Kafka 4.3)
    epoch = check.producer_epoch
    state = metadata.state
    epoch_fence = metadata.pending_state is _FENCE
    # a retry of an end whose bump rotated the producer id (epoch Short.MaxValue - 1)
    retry_on_overflow = (
        not epoch_fence
        and metadata.previous_producer_id == check.producer_id
        and epoch == MAX_PRODUCER_EPOCH - 1
        and metadata.producer_epoch == 0
    )
    # a retry of an end that bumped the epoch
    retry_on_bump = not epoch_fence and metadata.producer_epoch == epoch + 1
    is_retry = retry_on_bump or retry_on_overflow
    if epoch_fence:
        valid_epoch = (
            not from_client or epoch == metadata.producer_epoch
        ) and epoch >= metadata.producer_epoch
    elif state in _PREPARED:
        valid_epoch = retry_on_bump
    elif state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
        valid_epoch = is_retry or epoch == metadata.producer_epoch
    else:
        # same epoch and state means the next end, not a retry of the last one
        valid_epoch = epoch == metadata.producer_epoch
    # Kafka 4.3 checks the pending transition before the producer id and epoch
    if metadata.pending_state not in (None, _FENCE):
        return Reply(ErrorCode.concurrent_transactions)
    if metadata.producer_id != check.producer_id and not retry_on_overflow:
        return Reply(ErrorCode.invalid_producer_id_mapping)
    if not valid_epoch:
        return Reply(ErrorCode.producer_fenced)

    def prepare(target: TransactionState, no_partition_added: bool) -> Write | NeedProducerId:
        next_producer_id = NO_PRODUCER_ID
        if metadata.is_producer_epoch_exhausted:
            # this bump is the last epoch: the producer moves to a new id once it is done
            if new_producer_id is None:
                return NeedProducerId()
            next_producer_id = new_producer_id
        if target is TransactionState.PREPARE_ABORT and epoch_fence:
            metadata.pending_state = None
        transit = metadata.prepare_abort_or_commit(
            target, check.client_transaction_version, next_producer_id, now_ms, no_partition_added
        )
        return Write(metadata, transit, check, epoch_fence=epoch_fence)

    if state is TransactionState.ONGOING:
        target = TransactionState.PREPARE_COMMIT if check.commit else TransactionState.PREPARE_ABORT
        return prepare(target, no_partition_added=False)
    # TV2 lets a client abort when unsure whether a transaction is open: from Empty, or
    # from a completed one when it is not a retry
    completed = state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)
    abort_from_idle = not check.commit and (
        state is TransactionState.EMPTY or (completed and not is_retry)
    )
    if abort_from_idle:
        return prepare(TransactionState.PREPARE_ABORT, no_partition_added=True)
    error = _end_in_other_state(metadata, check.commit, retry=is_retry)
    if error is ErrorCode.none:
        # a retry of a completed end: the current ids, no write
        return Reply(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)
    return Reply(error)


def _end_in_other_state(metadata: TransactionMetadata, commit: bool, *, retry: bool) -> ErrorCode:
    # EndTxn outside Ongoing (and outside TV2's aborts from idle states): a retry of the
    # end that already happened is fine, a retry of one in flight must wait, anything
    # else is the wrong state
    state = metadata.state
    same = (
        TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT,
        TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT,
    )
    if state is same[0] and retry:
        return ErrorCode.none
    if state is same[1]:
        return ErrorCode.concurrent_transactions
    if state in (TransactionState.DEAD, _FENCE):
        raise IllegalTransitionError(f"{metadata.transactional_id} is in state {state.kafka_name}")
    return ErrorCode.invalid_txn_state
