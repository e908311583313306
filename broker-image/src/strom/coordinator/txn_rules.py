"""What the transaction coordinator decides for each request, as pure functions.

Kafka's TransactionCoordinator.scala (4.3: handleInitProducerId, handleAddPartitions-
ToTransaction, handleVerifyPartitionsInTransaction, endTransactionWithTV1 and
endTransaction, abortTimedOutTransactions) and the cache scans of
TransactionStateManager.scala (timedOutTransactions, removeExpiredTransactionalIds,
listTransactionStates). Each function looks at a `TransactionMetadata` (or None for an
unknown id) and returns one of:

- `Reply`: nothing to write, answer this;
- `Write`: write `transit.to_log_value()` under the id's key; once it is in the log
  (with the coordinator epoch unchanged, else NOT_COORDINATOR) call
  `metadata.complete(transit)`, then answer `then` if it is a Reply, or call
  `after_end_txn_written(metadata, then, now_ms)` if it is an `EndTxnCheck`. When the
  write fails, call `write_failed(write, append_error)` and answer what it returns;
- `NeedProducerId`: call again with `new_producer_id=` a fresh id (the allocation is
  asynchronous, so it cannot happen in here). Nothing was changed.

A Write may have set `pending_state` (and, for an epoch fence, the epoch) on the
metadata already: that is Kafka's order too, and why the caller must answer every
Write with either `complete` or `write_failed`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strom.coordinator.txn_metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransitionError,
    TransactionMetadata,
    TxnTransit,
    is_epoch_exhausted,
)
from strom.coordinator.txn_states import TransactionState, TransactionVersion

OFFSETS_TOPIC = "__consumer_offsets"

_IDLE = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)
_PREPARED = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})
_FENCE = TransactionState.PREPARE_EPOCH_FENCE


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer the request with this (the ids only matter to InitProducerId and EndTxn
    v5+)."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class NeedProducerId:
    """Call again with `new_producer_id=` a freshly allocated producer id."""


@dataclass(frozen=True, slots=True)
class EndTxnCheck:
    """What to check once a PrepareCommit/PrepareAbort record is written, before the
    markers go out (endTransaction's sendTxnMarkersCallback)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    client_transaction_version: TransactionVersion
    # InitProducerId that fenced an ongoing transaction answers CONCURRENT_TRANSACTIONS,
    # so that the client retries once the abort is complete
    success: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class Write:
    metadata: TransactionMetadata
    transit: TxnTransit
    then: Reply | EndTxnCheck
    # the write carries a fenced epoch: if it fails, the next fence must not bump again
    epoch_fence: bool = False
    # a new id's metadata: put it in the cache now (Kafka keeps it even if the write fails)
    created: bool = False


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


@dataclass(frozen=True, slots=True)
class TimedOut:
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """One entry of DescribeTransactions (Kafka leaves the fields at 0 on an error)."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = 0
    producer_epoch: int = 0
    timeout_ms: int = 0
    start_ms: int = 0
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionList:
    error: ErrorCode
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[ListedTransaction, ...] = ()


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
        return _fence_and_abort(
            metadata,
            server_transaction_version,
            now_ms,
            new_producer_id,
            success=ErrorCode.concurrent_transactions,
        )
    raise IllegalTransitionError(f"{transactional_id} is in state {state.kafka_name}")


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


def coordinator_error(append_error: ErrorCode) -> ErrorCode:
    """The error a client gets when the coordinator's own write failed
    (TransactionStateManager.appendTransactionToLog)."""
    if append_error in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return ErrorCode.coordinator_not_available
    if append_error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if append_error in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return ErrorCode.unknown_server_error
    return append_error


def write_failed(write: Write, append_error: ErrorCode) -> Reply:
    """A Write's record could not be written: nothing changes but the pending state is
    dropped, and an epoch fence is remembered so that the next one does not bump again
    (the bumped epoch was never answered). Not for a changed coordinator epoch: then the
    metadata belongs to the partition's next load and is left alone."""
    write.metadata.pending_state = None
    if write.epoch_fence:
        write.metadata.has_failed_epoch_fence = True
    return Reply(coordinator_error(append_error))


def completion_write_failed(metadata: TransactionMetadata, append_error: ErrorCode) -> bool:
    """A CompleteX record (Markers.complete) could not be written: True to retry it later
    with the pending state kept (the log was unavailable), False to give up because
    another coordinator, or this one's next load, will finish the transaction
    (TransactionMarkerChannelManager.tryAppendToLog)."""
    if coordinator_error(append_error) is ErrorCode.coordinator_not_available:
        return True
    metadata.pending_state = None
    return False


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
    return _fence_and_abort(
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


def describe(metadata: TransactionMetadata | None, transactional_id: str) -> TransactionDescription:
    """DescribeTransactions for one id (handleDescribeTransactions); the caller answers
    COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR itself."""
    if not transactional_id:
        return TransactionDescription(transactional_id, ErrorCode.invalid_request)
    # a Dead id is being expired: as good as gone
    if metadata is None or metadata.state is TransactionState.DEAD:
        return TransactionDescription(transactional_id, ErrorCode.transactional_id_not_found)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return TransactionDescription(
        transactional_id,
        ErrorCode.none,
        state=metadata.state.kafka_name,
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        timeout_ms=metadata.timeout_ms,
        start_ms=metadata.start_ms,
        topics=tuple((topic, tuple(ids)) for topic, ids in by_topic.items()),
    )


def list_transactions(
    metadata: Iterable[TransactionMetadata],
    *,
    state_filters: Iterable[str] = (),
    producer_id_filters: Iterable[int] = (),
    duration_filter_ms: int = -1,
    transactional_id_pattern: str | None = None,
    now_ms: int,
) -> TransactionList:
    """ListTransactions over the loaded ids (TransactionStateManager.
    listTransactionStates). Unknown state names are echoed back, not an error; the
    pattern must match the whole id (RE2J's matches(), here Python's fullmatch)."""
    pattern = None
    if transactional_id_pattern:
        try:
            pattern = re.compile(transactional_id_pattern)
        except re.error:
            return TransactionList(ErrorCode.invalid_regular_expression)
    state_names = set(state_filters)
    states = set()
    unknown = []
    for name in sorted(state_names):
        try:
            states.add(TransactionState.from_kafka_name(name))
        except ValueError:
            unknown.append(name)
    producer_ids = set(producer_id_filters)

    def wanted(entry: TransactionMetadata) -> bool:
        # Dead is transient: the id is being expired or unloaded
        if entry.state is TransactionState.DEAD:
            return False
        if producer_ids and entry.producer_id not in producer_ids:
            return False
        if state_names and entry.state not in states:
            return False
        # KIP-994: only transactions running for longer than the duration
        if duration_filter_ms >= 0 and now_ms - entry.start_ms <= duration_filter_ms:
            return False
        return pattern is None or pattern.fullmatch(entry.transactional_id) is not None

    listed = tuple(
        ListedTransaction(entry.transactional_id, entry.producer_id, entry.state.kafka_name)
        for entry in metadata
        if wanted(entry)
    )
    return TransactionList(ErrorCode.none, tuple(unknown), listed)


def _is_valid_producer_id(metadata: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    # prepareInitProducerIdTransit.isValidProducerId: a just-created id, the current id
    # (the epoch is checked by the bump), or the previous id at an exhausted epoch (a
    # retry of a rotation whose answer was lost)
    return (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == metadata.producer_id
        or (producer_id == metadata.previous_producer_id and is_epoch_exhausted(epoch))
    )


def _fence_and_abort(
    metadata: TransactionMetadata,
    server_transaction_version: TransactionVersion,
    now_ms: int,
    new_producer_id: int | None,
    *,
    success: ErrorCode,
) -> Write | NeedProducerId:
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
