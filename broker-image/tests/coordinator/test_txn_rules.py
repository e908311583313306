"""The transaction coordinator's decisions, request by request and state by state, against
Kafka 4.3's rules (cases ported from TransactionCoordinatorTest.scala and the cache scans
of TransactionStateManagerTest.scala)."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from strom.coordinator import (
    txn_decisions,
    txn_end,
    txn_expiry,
    txn_init,
    txn_partitions,
    txn_queries,
)
from strom.coordinator.txn_decisions import EndTxnCheck, NeedProducerId, Reply, Write
from strom.coordinator.txn_end import Markers
from strom.coordinator.txn_metadata import (
    MAX_PRODUCER_EPOCH,
    NO_TIMEOUT_MS,
    IllegalTransitionError,
    TransactionMetadata,
    TxnTransit,
)
from strom.coordinator.txn_states import TransactionState, TransactionVersion

S = TransactionState
E = ErrorCode
TV_0 = TransactionVersion.TV_0
TV_2 = TransactionVersion.TV_2
TXN_ID = "someTransactionalId"
PID = 10
EPOCH = 1
TIMEOUT = 1000
MAX_TIMEOUT = 900_000
NOW = 1_000_000
EXHAUSTED = MAX_PRODUCER_EPOCH - 1
PARTITIONS = frozenset({("topic1", 0), ("topic1", 1)})
IDLE = [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT]
PREPARED = [S.PREPARE_COMMIT, S.PREPARE_ABORT]


def meta(**changes: Any) -> TransactionMetadata:
    state = changes.get("state", S.EMPTY)
    in_transaction = state in (S.ONGOING, S.PREPARE_EPOCH_FENCE, *PREPARED)
    fields: dict[str, Any] = {
        "transactional_id": TXN_ID,
        "producer_id": PID,
        "previous_producer_id": PID,
        "producer_epoch": EPOCH,
        "timeout_ms": TIMEOUT,
        "partitions": set(PARTITIONS) if in_transaction else set(),
        "start_ms": -1 if state is S.EMPTY else NOW - 10,
        "last_update_ms": NOW - 10,
    }
    fields.update(changes)
    return TransactionMetadata(**fields)


def init(metadata: TransactionMetadata | None, **changes: Any) -> Reply | Write | NeedProducerId:
    request: dict[str, Any] = {
        "transactional_id": TXN_ID,
        "timeout_ms": TIMEOUT,
        "max_timeout_ms": MAX_TIMEOUT,
        "server_transaction_version": TV_0,
        "now_ms": NOW,
    }
    request.update(changes)
    return txn_init.init_producer_id(metadata, **request)


def add(metadata: TransactionMetadata | None, **changes: Any) -> Reply | Write:
    request: dict[str, Any] = {
        "transactional_id": TXN_ID,
        "producer_id": PID,
        "producer_epoch": EPOCH,
        "partitions": PARTITIONS,
        "now_ms": NOW,
    }
    request.update(changes)
    return txn_partitions.add_partitions(metadata, **request)


def end(
    metadata: TransactionMetadata | None, commit: bool, **changes: Any
) -> Reply | Write | NeedProducerId:
    request: dict[str, Any] = {
        "transactional_id": TXN_ID,
        "producer_id": PID,
        "producer_epoch": EPOCH,
        "commit": commit,
        "client_transaction_version": TV_0,
        "now_ms": NOW,
    }
    request.update(changes)
    return txn_end.end_txn(metadata, **request)


def written(outcome: object) -> tuple[Reply, Markers | None]:
    """The write succeeded: complete it and see what to answer (and which markers)."""
    assert isinstance(outcome, Write), outcome
    outcome.metadata.complete(outcome.transit)
    if isinstance(outcome.then, EndTxnCheck):
        return txn_end.after_end_txn_written(outcome.metadata, outcome.then, NOW)
    return outcome.then, None


def markers_written(metadata: TransactionMetadata, markers: Markers | None) -> None:
    assert markers is not None
    metadata.complete(markers.complete)


# -- InitProducerId ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"transactional_id": ""}, E.invalid_request),
        # KIP-360: both the producer id and the epoch, or neither
        ({"producer_id": PID}, E.invalid_request),
        ({"producer_epoch": EPOCH}, E.invalid_request),
        ({"timeout_ms": 0}, E.invalid_transaction_timeout),
        ({"timeout_ms": -1}, E.invalid_transaction_timeout),
        ({"timeout_ms": MAX_TIMEOUT + 1}, E.invalid_transaction_timeout),
    ],
)
def test_init_refused_before_looking_at_the_state(changes: dict[str, Any], error: E) -> None:
    assert init(meta(), **changes) == Reply(error)


def test_init_accepts_the_max_timeout() -> None:
    assert isinstance(init(meta(), timeout_ms=MAX_TIMEOUT), Write)


def test_init_unknown_id_needs_a_producer_id_first() -> None:
    assert init(None) == NeedProducerId()


@pytest.mark.parametrize("expected", [{}, {"producer_id": 5, "producer_epoch": 3}])
def test_init_unknown_id_starts_at_epoch_zero(expected: dict[str, int]) -> None:
    # shouldInitPidWithEpochZeroForNewTransactionalId, and ...IfNoStateAndProducerIdAndEpoch-
    # Provided: a producer recovering from UNKNOWN_PRODUCER_ID gets the new id
    outcome = init(None, new_producer_id=77, **expected)
    assert isinstance(outcome, Write)
    assert outcome.created
    assert outcome.metadata.transactional_id == TXN_ID
    assert outcome.transit.state is S.EMPTY
    assert (outcome.transit.producer_id, outcome.transit.producer_epoch) == (77, 0)
    assert written(outcome) == (Reply(E.none, 77, 0), None)
    assert outcome.metadata.last_update_ms == NOW


@pytest.mark.parametrize("state", IDLE)
def test_init_in_an_idle_state_bumps_the_epoch(state: S) -> None:
    metadata = meta(state=state, last_producer_epoch=0, timeout_ms=5)
    outcome = init(metadata, timeout_ms=TIMEOUT + 1)
    assert isinstance(outcome, Write)
    assert not outcome.created
    assert written(outcome) == (Reply(E.none, PID, EPOCH + 1), None)
    assert metadata.state is S.EMPTY
    assert metadata.last_producer_epoch == -1
    assert (metadata.timeout_ms, metadata.partitions, metadata.start_ms) == (TIMEOUT + 1, set(), -1)


@pytest.mark.parametrize("state", PREPARED)
def test_init_waits_for_a_prepared_transaction(state: S) -> None:
    assert init(meta(state=state)) == Reply(E.concurrent_transactions)


@pytest.mark.parametrize("state", [*IDLE, S.ONGOING, *PREPARED])
def test_init_with_a_pending_transition(state: S) -> None:
    assert init(meta(state=state, pending_state=S.DEAD)) == Reply(E.concurrent_transactions)


def test_init_rotates_the_producer_id_when_the_epoch_is_exhausted() -> None:
    metadata = meta(producer_epoch=EXHAUSTED)
    assert init(metadata) == NeedProducerId()
    assert metadata.pending_state is None
    outcome = init(metadata, new_producer_id=11)
    assert written(outcome) == (Reply(E.none, 11, 0), None)
    assert (metadata.previous_producer_id, metadata.last_producer_epoch) == (PID, -1)


def test_init_with_no_last_producer_data() -> None:
    # written by an old broker: no previous id, so the retry cannot be recognised
    metadata = meta(previous_producer_id=-1, producer_epoch=EPOCH + 1)
    assert init(metadata, producer_id=PID, producer_epoch=EPOCH) == Reply(E.producer_fenced)


def test_fence_producer_when_mapping_exists_with_different_producer_id() -> None:
    metadata = meta(producer_id=PID + 1, previous_producer_id=PID, last_producer_epoch=EPOCH - 1)
    assert init(metadata, producer_id=PID, producer_epoch=EPOCH) == Reply(E.producer_fenced)


def test_init_with_current_epoch_provided_and_its_retry() -> None:
    metadata = meta(producer_epoch=10, last_producer_epoch=9)
    outcome = init(metadata, producer_id=PID, producer_epoch=10)
    assert written(outcome) == (Reply(E.none, PID, 11), None)
    # the answer was lost; the retry gets the same epoch
    outcome = init(metadata, producer_id=PID, producer_epoch=10)
    assert written(outcome) == (Reply(E.none, PID, 11), None)


def test_init_with_stale_current_epoch_provided() -> None:
    metadata = meta(producer_epoch=10, last_producer_epoch=9)
    # a new producer bumps to 11 and forgets the last epoch...
    assert written(init(metadata)) == (Reply(E.none, PID, 11), None)
    # ...so the old one, still at 10, is fenced
    assert init(metadata, producer_id=PID, producer_epoch=10) == Reply(E.producer_fenced)


def test_retry_init_after_producer_id_rotation() -> None:
    metadata = meta(producer_epoch=EXHAUSTED, last_producer_epoch=EXHAUSTED - 1)
    request = {"producer_id": PID, "producer_epoch": EXHAUSTED}
    assert written(init(metadata, new_producer_id=PID + 1, **request)) == (
        Reply(E.none, PID + 1, 0),
        None,
    )
    # the retry names the old id at the exhausted epoch: the same answer, no new id
    assert written(init(metadata, **request)) == (Reply(E.none, PID + 1, 0), None)


def test_init_with_invalid_epoch_after_producer_id_rotation() -> None:
    metadata = meta(producer_epoch=EXHAUSTED, last_producer_epoch=EXHAUSTED - 1)
    request = {"producer_id": PID, "producer_epoch": EXHAUSTED}
    written(init(metadata, new_producer_id=PID + 1, **request))
    stale = {"producer_id": PID, "producer_epoch": EXHAUSTED - 1}
    assert init(metadata, **stale) == Reply(E.producer_fenced)


def test_init_fences_and_aborts_an_ongoing_transaction() -> None:
    # shouldAbortTransactionOnHandleInitPidWhenExistingTransactionInOngoingState
    metadata = meta(state=S.ONGOING)
    outcome = init(metadata)
    assert isinstance(outcome, Write)
    assert outcome.epoch_fence
    assert outcome.transit == TxnTransit(
        producer_id=PID,
        previous_producer_id=PID,
        next_producer_id=-1,
        producer_epoch=EPOCH + 1,
        last_producer_epoch=-1,
        timeout_ms=TIMEOUT,
        state=S.PREPARE_ABORT,
        partitions=PARTITIONS,
        start_ms=NOW - 10,
        last_update_ms=NOW,
        client_transaction_version=TV_0,
    )
    reply, markers = written(outcome)
    # the bumped epoch is never answered: the client retries
    assert reply == Reply(E.concurrent_transactions)
    assert markers is not None
    assert (markers.commit, markers.producer_id, markers.producer_epoch) == (False, PID, EPOCH + 1)
    assert markers.partitions == PARTITIONS
    assert init(metadata) == Reply(E.concurrent_transactions)  # CompleteAbort is pending
    markers_written(metadata, markers)
    assert metadata.state is S.COMPLETE_ABORT
    # the retry finds CompleteAbort and bumps again
    assert written(init(metadata)) == (Reply(E.none, PID, EPOCH + 2), None)


def test_init_does_not_bump_twice_when_the_fence_fails_to_be_written() -> None:
    # shouldNotRepeatedlyBumpEpochDueToInitPidDuringOngoingTxnIfAppendToLogFails
    metadata = meta(state=S.ONGOING)
    outcome = init(metadata)
    assert isinstance(outcome, Write)
    assert txn_decisions.write_failed(outcome, E.not_enough_replicas) == Reply(
        E.coordinator_not_available
    )
    # Kafka bumped the epoch in memory before the write and keeps it
    assert (metadata.state, metadata.producer_epoch, metadata.pending_state) == (
        S.ONGOING,
        EPOCH + 1,
        None,
    )
    assert metadata.has_failed_epoch_fence
    again = init(metadata)
    assert isinstance(again, Write)
    assert again.transit.producer_epoch == EPOCH + 1
    reply, markers = written(again)
    assert reply == Reply(E.concurrent_transactions)
    assert not metadata.has_failed_epoch_fence  # the Prepare* record is in
    markers_written(metadata, markers)
    assert written(init(metadata)) == (Reply(E.none, PID, EPOCH + 2), None)


def test_use_last_epoch_to_fence_when_epochs_are_exhausted() -> None:
    metadata = meta(state=S.ONGOING, producer_epoch=EXHAUSTED, last_producer_epoch=EXHAUSTED - 1)
    outcome = init(metadata)
    assert isinstance(outcome, Write)
    assert (outcome.transit.producer_epoch, outcome.transit.last_producer_epoch) == (
        MAX_PRODUCER_EPOCH,
        -1,
    )
    assert metadata.producer_epoch == MAX_PRODUCER_EPOCH
    reply, markers = written(outcome)
    assert reply == Reply(E.concurrent_transactions)
    markers_written(metadata, markers)
    # the client's retry rotates the producer id
    assert init(metadata) == NeedProducerId()
    assert written(init(metadata, new_producer_id=PID + 1)) == (Reply(E.none, PID + 1, 0), None)


def test_init_fence_at_the_overflow_boundary_tv2() -> None:
    # shouldNotCauseEpochOverflowWhenInitPidDuringOngoingTxnV2 and
    # shouldRotateProducerIdWhenInitPidFencesOngoingTxnAtEpochOverflowBoundaryTV2
    metadata = meta(
        state=S.ONGOING,
        producer_epoch=EXHAUSTED,
        last_producer_epoch=EXHAUSTED - 1,
        client_transaction_version=TV_2,
    )
    assert init(metadata, server_transaction_version=TV_2) == NeedProducerId()
    assert metadata.pending_state is None  # nothing changed
    outcome = init(metadata, server_transaction_version=TV_2, new_producer_id=PID + 1)
    assert isinstance(outcome, Write)
    # one bump only, in prepare_abort_or_commit
    assert (outcome.transit.producer_id, outcome.transit.producer_epoch) == (
        PID,
        MAX_PRODUCER_EPOCH,
    )
    assert outcome.transit.next_producer_id == PID + 1
    reply, markers = written(outcome)
    assert reply == Reply(E.concurrent_transactions)
    assert (metadata.state, metadata.producer_epoch) == (S.PREPARE_ABORT, MAX_PRODUCER_EPOCH)
    markers_written(metadata, markers)
    assert (metadata.state, metadata.producer_id, metadata.producer_epoch) == (
        S.COMPLETE_ABORT,
        PID + 1,
        0,
    )
    # the client's late abort with its old id and epoch is a retry on overflow
    late = end(metadata, False, producer_epoch=EXHAUSTED, client_transaction_version=TV_2)
    assert late == Reply(E.none, PID + 1, 0)


@pytest.mark.parametrize("state", [S.DEAD, S.PREPARE_EPOCH_FENCE])
def test_init_in_a_state_never_reached(state: S) -> None:
    with pytest.raises(IllegalTransitionError):
        init(meta(state=state))


# -- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "changes", "error"),
    [
        (meta(), {"transactional_id": ""}, E.invalid_request),
        (None, {}, E.invalid_producer_id_mapping),
        (meta(), {"producer_id": PID + 1}, E.invalid_producer_id_mapping),
        (meta(), {"producer_epoch": EPOCH + 1}, E.producer_fenced),
        (meta(), {"producer_epoch": EPOCH - 1}, E.producer_fenced),
        (meta(state=S.PREPARE_COMMIT), {}, E.concurrent_transactions),
        (meta(state=S.PREPARE_ABORT), {}, E.concurrent_transactions),
        (meta(state=S.ONGOING, pending_state=S.PREPARE_COMMIT), {}, E.concurrent_transactions),
        # Kafka 4.3 looks at the pending transition before the producer id and epoch
        (
            meta(state=S.ONGOING, pending_state=S.PREPARE_COMMIT),
            {"producer_id": PID + 1},
            E.concurrent_transactions,
        ),
        # already in the transaction: NONE with no write
        (meta(state=S.ONGOING), {"partitions": {("topic1", 1)}}, E.none),
    ],
)
def test_add_partitions_answered_at_once(
    metadata: TransactionMetadata | None, changes: dict[str, Any], error: E
) -> None:
    assert add(metadata, **changes) == Reply(error)


@pytest.mark.parametrize("state", IDLE)
def test_add_partitions_starts_a_transaction(state: S) -> None:
    metadata = meta(state=state)
    outcome = add(metadata, partitions={("topic1", 0)})
    assert isinstance(outcome, Write)
    assert (outcome.transit.state, outcome.transit.start_ms) == (S.ONGOING, NOW)
    assert written(outcome) == (Reply(E.none), None)
    assert metadata.partitions == {("topic1", 0)}


def test_add_partitions_to_an_ongoing_transaction() -> None:
    metadata = meta(state=S.ONGOING)
    outcome = add(metadata, partitions={("topic2", 0), ("topic1", 0)})
    assert isinstance(outcome, Write)
    assert outcome.transit.start_ms == NOW - 10  # the start stays
    written(outcome)
    assert metadata.partitions == set(PARTITIONS) | {("topic2", 0)}


def test_add_partitions_records_the_client_transaction_version() -> None:
    outcome = add(meta(), client_transaction_version=TV_2)
    assert isinstance(outcome, Write)
    assert outcome.transit.client_transaction_version is TV_2


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    outcome = txn_partitions.add_offsets(
        meta(), transactional_id=TXN_ID, producer_id=PID, producer_epoch=EPOCH,
        offsets_partition=7, now_ms=NOW,
    )  # fmt: skip
    assert isinstance(outcome, Write)
    assert outcome.transit.partitions == {("__consumer_offsets", 7)}


# -- AddPartitionsToTxn v4+ verify_only ---------------------------------------------------


def verify(metadata: TransactionMetadata | None, **changes: Any) -> dict[Any, E]:
    request: dict[str, Any] = {
        "transactional_id": TXN_ID,
        "producer_id": PID,
        "producer_epoch": EPOCH,
        "partitions": [("topic1", 0), ("topic2", 0)],
    }
    request.update(changes)
    return txn_partitions.verify_partitions(metadata, **request)


@pytest.mark.parametrize(
    ("metadata", "changes", "error"),
    [
        (meta(state=S.ONGOING), {"transactional_id": ""}, E.invalid_request),
        (None, {}, E.invalid_producer_id_mapping),
        (meta(state=S.ONGOING), {"producer_id": PID + 1}, E.invalid_producer_id_mapping),
        (meta(state=S.ONGOING), {"producer_epoch": EPOCH + 1}, E.producer_fenced),
        (meta(state=S.PREPARE_COMMIT), {}, E.concurrent_transactions),
        (meta(state=S.PREPARE_ABORT), {}, E.concurrent_transactions),
    ],
)
def test_verify_errors_go_to_every_partition(
    metadata: TransactionMetadata | None, changes: dict[str, Any], error: E
) -> None:
    assert verify(metadata, **changes) == {("topic1", 0): error, ("topic2", 0): error}


@pytest.mark.parametrize("pending", [None, S.PREPARE_COMMIT])
def test_verify_answers_per_partition(pending: S | None) -> None:
    # the pending state is not looked at: the append checks again
    metadata = meta(state=S.ONGOING, pending_state=pending)
    assert verify(metadata) == {("topic1", 0): E.none, ("topic2", 0): E.transaction_abortable}
    assert metadata.pending_state is pending


@pytest.mark.parametrize("state", IDLE)
def test_verify_outside_a_transaction(state: S) -> None:
    assert set(verify(meta(state=state)).values()) == {E.transaction_abortable}


# -- EndTxn, TV0/TV1 ------------------------------------------------------------------------

# (state, commit) -> the answer of an EndTxn that writes nothing (endTransactionWithTV1)
TV1_END_NO_WRITE = {
    (S.COMPLETE_COMMIT, True): E.none,
    (S.COMPLETE_COMMIT, False): E.invalid_txn_state,
    (S.COMPLETE_ABORT, False): E.none,
    (S.COMPLETE_ABORT, True): E.invalid_txn_state,
    (S.PREPARE_COMMIT, True): E.concurrent_transactions,
    (S.PREPARE_COMMIT, False): E.invalid_txn_state,
    (S.PREPARE_ABORT, False): E.concurrent_transactions,
    (S.PREPARE_ABORT, True): E.invalid_txn_state,
    (S.EMPTY, True): E.invalid_txn_state,
    (S.EMPTY, False): E.invalid_txn_state,
}


@pytest.mark.parametrize(("state", "commit"), list(TV1_END_NO_WRITE))
def test_tv1_end_outside_ongoing(state: S, commit: bool) -> None:
    assert end(meta(state=state), commit) == Reply(TV1_END_NO_WRITE[state, commit])


@pytest.mark.parametrize(
    ("metadata", "changes", "error"),
    [
        (meta(state=S.ONGOING), {"transactional_id": ""}, E.invalid_request),
        (None, {}, E.invalid_producer_id_mapping),
        (meta(state=S.ONGOING), {"producer_id": PID + 1}, E.invalid_producer_id_mapping),
        (meta(state=S.ONGOING), {"producer_epoch": EPOCH + 1}, E.producer_fenced),
        (meta(state=S.ONGOING), {"producer_epoch": EPOCH - 1}, E.producer_fenced),
        (meta(state=S.ONGOING, pending_state=S.ONGOING), {}, E.concurrent_transactions),
        # TV1 checks the producer id and epoch first
        (
            meta(state=S.ONGOING, pending_state=S.ONGOING),
            {"producer_epoch": EPOCH + 1},
            E.producer_fenced,
        ),
        (meta(state=S.COMPLETE_COMMIT), {"producer_epoch": EPOCH - 1}, E.producer_fenced),
    ],
)
@pytest.mark.parametrize("commit", [True, False])
def test_tv1_end_refused(
    metadata: TransactionMetadata | None, changes: dict[str, Any], error: E, commit: bool
) -> None:
    assert end(metadata, commit, **changes) == Reply(error)


@pytest.mark.parametrize("commit", [True, False])
def test_tv1_end_of_an_ongoing_transaction(commit: bool) -> None:
    metadata = meta(state=S.ONGOING)
    outcome = end(metadata, commit)
    assert isinstance(outcome, Write)
    assert not outcome.epoch_fence
    prepared = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    assert outcome.transit.state is prepared
    assert outcome.transit.producer_epoch == EPOCH  # no bump before TV2
    reply, markers = written(outcome)
    assert reply == Reply(E.none)
    assert markers is not None
    assert (markers.commit, markers.producer_id, markers.producer_epoch) == (commit, PID, EPOCH)
    assert (markers.partitions, markers.transaction_version) == (PARTITIONS, TV_0)
    assert markers.complete.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert end(metadata, commit) == Reply(E.concurrent_transactions)  # markers in flight
    markers_written(metadata, markers)
    assert (metadata.partitions, metadata.producer_epoch) == (set(), EPOCH)
    # the client's retry of the same end
    assert end(metadata, commit) == Reply(E.none)
    assert end(metadata, not commit) == Reply(E.invalid_txn_state)


def test_tv1_lifecycle() -> None:
    assert init(None) == NeedProducerId()
    outcome = init(None, new_producer_id=PID)
    assert isinstance(outcome, Write)
    metadata = outcome.metadata
    assert written(outcome) == (Reply(E.none, PID, 0), None)
    ids = {"producer_id": PID, "producer_epoch": 0}
    assert written(add(metadata, **ids)) == (Reply(E.none), None)
    assert add(metadata, **ids) == Reply(E.none)
    offsets = txn_partitions.add_offsets(
        metadata, transactional_id=TXN_ID, offsets_partition=3, now_ms=NOW, **ids
    )
    written(offsets)
    reply, markers = written(end(metadata, True, **ids))
    assert reply == Reply(E.none)
    assert markers is not None
    assert markers.partitions == PARTITIONS | {("__consumer_offsets", 3)}
    markers_written(metadata, markers)
    assert metadata.state is S.COMPLETE_COMMIT
    assert written(add(metadata, **ids)) == (Reply(E.none), None)
    assert metadata.start_ms == NOW
    written(end(metadata, False, **ids))


# -- EndTxn v5, TV2 ------------------------------------------------------------------------

# TransactionCoordinator.scala's table for the idle states under TV2. A retry names the
# epoch before the bump (current - 1). "bump" = a PrepareAbort written at epoch + 1.
TV2_IDLE = {
    (S.EMPTY, False, "retry"): E.producer_fenced,
    (S.EMPTY, False, "current"): "bump",
    (S.EMPTY, True, "retry"): E.producer_fenced,
    (S.EMPTY, True, "current"): E.invalid_txn_state,
    (S.COMPLETE_ABORT, False, "retry"): E.none,
    (S.COMPLETE_ABORT, False, "current"): "bump",
    (S.COMPLETE_ABORT, True, "retry"): E.invalid_txn_state,
    (S.COMPLETE_ABORT, True, "current"): E.invalid_txn_state,
    (S.COMPLETE_COMMIT, False, "retry"): E.invalid_txn_state,
    (S.COMPLETE_COMMIT, False, "current"): "bump",
    (S.COMPLETE_COMMIT, True, "retry"): E.none,
    (S.COMPLETE_COMMIT, True, "current"): E.invalid_txn_state,
}


@pytest.mark.parametrize(("state", "commit", "epoch"), list(TV2_IDLE))
def test_tv2_end_in_an_idle_state(state: S, commit: bool, epoch: str) -> None:
    metadata = meta(state=state, producer_epoch=5, client_transaction_version=TV_2)
    request_epoch = 5 if epoch == "current" else 4
    outcome = end(metadata, commit, producer_epoch=request_epoch, client_transaction_version=TV_2)
    expected = TV2_IDLE[state, commit, epoch]
    if expected == "bump":
        assert isinstance(outcome, Write)
        assert (outcome.transit.state, outcome.transit.producer_epoch) == (S.PREPARE_ABORT, 6)
        # no partition was added: the abort's time is the start time
        assert outcome.transit.start_ms == NOW
        reply, markers = written(outcome)
        assert reply == Reply(E.none, PID, 6)
        assert markers is not None
        assert markers.partitions == frozenset()
    elif expected is E.none:
        # a retry of the end that happened: the current ids, nothing written
        assert outcome == Reply(E.none, PID, 5)
    else:
        assert isinstance(expected, E)
        assert outcome == Reply(expected)


@pytest.mark.parametrize("commit", [True, False])
def test_tv2_end_of_an_ongoing_transaction_bumps_the_epoch(commit: bool) -> None:
    metadata = meta(state=S.ONGOING, producer_epoch=5, client_transaction_version=TV_2)
    assert end(metadata, commit, producer_epoch=4, client_transaction_version=TV_2) == Reply(
        E.producer_fenced
    )
    outcome = end(metadata, commit, producer_epoch=5, client_transaction_version=TV_2)
    assert isinstance(outcome, Write)
    assert (outcome.transit.producer_epoch, outcome.transit.last_producer_epoch) == (6, 5)
    assert outcome.transit.client_transaction_version is TV_2
    reply, markers = written(outcome)
    assert reply == Reply(E.none, PID, 6)
    assert markers is not None
    assert (markers.producer_epoch, markers.transaction_version) == (6, TV_2)
    # a retry while the markers are out must wait
    assert end(metadata, commit, producer_epoch=5, client_transaction_version=TV_2) == Reply(
        E.concurrent_transactions
    )
    markers_written(metadata, markers)
    # and once they are written, it is answered with the new epoch
    assert end(metadata, commit, producer_epoch=5, client_transaction_version=TV_2) == Reply(
        E.none, PID, 6
    )


@pytest.mark.parametrize(
    ("state", "commit", "epoch", "error"),
    [
        (S.PREPARE_COMMIT, True, 4, E.concurrent_transactions),
        (S.PREPARE_COMMIT, False, 4, E.invalid_txn_state),
        (S.PREPARE_ABORT, False, 4, E.concurrent_transactions),
        (S.PREPARE_ABORT, True, 4, E.invalid_txn_state),
        # the same epoch in a prepared state is not a retry: that end bumped it
        (S.PREPARE_COMMIT, True, 5, E.producer_fenced),
        (S.PREPARE_ABORT, False, 5, E.producer_fenced),
        (S.ONGOING, True, 6, E.producer_fenced),
        (S.COMPLETE_COMMIT, True, 6, E.producer_fenced),
    ],
)
def test_tv2_end_answered_at_once(state: S, commit: bool, epoch: int, error: E) -> None:
    metadata = meta(state=state, producer_epoch=5, client_transaction_version=TV_2)
    outcome = end(metadata, commit, producer_epoch=epoch, client_transaction_version=TV_2)
    assert outcome == Reply(error)


def test_tv2_checks_the_pending_transition_first() -> None:
    metadata = meta(state=S.ONGOING, producer_epoch=5, pending_state=S.ONGOING)
    outcome = end(metadata, True, producer_id=PID + 1, client_transaction_version=TV_2)
    assert outcome == Reply(E.concurrent_transactions)


def test_tv2_end_at_the_overflow_boundary_rotates_the_producer_id() -> None:
    metadata = meta(state=S.ONGOING, producer_epoch=EXHAUSTED, client_transaction_version=TV_2)
    request = {"producer_epoch": EXHAUSTED, "client_transaction_version": TV_2}
    assert end(metadata, True, **request) == NeedProducerId()
    assert metadata.pending_state is None
    outcome = end(metadata, True, new_producer_id=PID + 1, **request)
    assert isinstance(outcome, Write)
    assert (outcome.transit.producer_epoch, outcome.transit.next_producer_id) == (
        MAX_PRODUCER_EPOCH,
        PID + 1,
    )
    reply, markers = written(outcome)
    # Kafka 4.3 answers the ids of the CompleteCommit record: the new id at epoch 0
    assert reply == Reply(E.none, PID + 1, 0)
    assert markers is not None
    # the markers still carry the old id at the last epoch
    assert (markers.producer_id, markers.producer_epoch) == (PID, MAX_PRODUCER_EPOCH)
    markers_written(metadata, markers)
    assert (metadata.producer_id, metadata.producer_epoch) == (PID + 1, 0)
    # a retry with the old id and epoch is recognised
    assert end(metadata, True, **request) == Reply(E.none, PID + 1, 0)
    assert end(metadata, False, **request) == Reply(E.invalid_txn_state)
    # the new id goes on from epoch 0
    assert isinstance(
        end(
            metadata, False, producer_id=PID + 1, producer_epoch=0, client_transaction_version=TV_2
        ),
        Write,
    )


# -- after the Prepare* write ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"producer_id": PID + 1}, E.invalid_producer_id_mapping),
        ({"producer_epoch": EPOCH + 1}, E.producer_fenced),
        ({"pending_state": S.COMPLETE_COMMIT}, E.concurrent_transactions),
        ({"state": S.PREPARE_ABORT}, E.invalid_txn_state),
        ({"state": S.COMPLETE_COMMIT}, E.invalid_txn_state),
    ],
)
def test_after_the_prepare_write_nothing_may_have_moved(change: dict[str, Any], error: E) -> None:
    metadata = meta(**{"state": S.PREPARE_COMMIT, **change})
    check = EndTxnCheck(PID, EPOCH, True, TV_0)
    assert txn_end.after_end_txn_written(metadata, check, NOW) == (Reply(error), None)


def test_tv2_after_the_prepare_write_allows_the_bumped_epoch() -> None:
    metadata = meta(state=S.PREPARE_COMMIT, producer_epoch=EPOCH + 2)
    check = EndTxnCheck(PID, EPOCH, True, TV_2)
    assert txn_end.after_end_txn_written(metadata, check, NOW) == (Reply(E.producer_fenced), None)
    metadata.producer_epoch = EPOCH + 1
    reply, markers = txn_end.after_end_txn_written(metadata, check, NOW)
    assert reply == Reply(E.none, PID, EPOCH + 1)
    assert markers is not None


@pytest.mark.parametrize("state", PREPARED)
def test_markers_of_a_loaded_prepared_transaction(state: S) -> None:
    metadata = meta(state=state, has_failed_epoch_fence=True)
    markers = txn_end.complete_after_markers(metadata, NOW)
    assert markers.commit is (state is S.PREPARE_COMMIT)
    assert (markers.transactional_id, markers.partitions) == (TXN_ID, PARTITIONS)
    assert metadata.pending_state is markers.complete.state
    assert not metadata.has_failed_epoch_fence
    metadata.complete(markers.complete)


@pytest.mark.parametrize("state", [*IDLE, S.ONGOING])
def test_no_markers_outside_a_prepared_transaction(state: S) -> None:
    with pytest.raises(IllegalTransitionError):
        txn_end.complete_after_markers(meta(state=state), NOW)


# -- failed writes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("append_error", "error"),
    [
        (E.unknown_topic_or_partition, E.coordinator_not_available),
        (E.not_enough_replicas, E.coordinator_not_available),
        (E.not_enough_replicas_after_append, E.coordinator_not_available),
        (E.request_timed_out, E.coordinator_not_available),
        (E.not_leader_or_follower, E.not_coordinator),
        (E.kafka_storage_error, E.not_coordinator),
        (E.message_too_large, E.unknown_server_error),
        (E.record_list_too_large, E.unknown_server_error),
        (E.invalid_record, E.invalid_record),
    ],
)
def test_coordinator_error(append_error: E, error: E) -> None:
    assert txn_decisions.coordinator_error(append_error) is error


def test_a_failed_write_drops_the_pending_state() -> None:
    metadata = meta()
    outcome = add(metadata)
    assert isinstance(outcome, Write)
    assert txn_decisions.write_failed(outcome, E.not_leader_or_follower) == Reply(E.not_coordinator)
    assert (metadata.state, metadata.pending_state, metadata.has_failed_epoch_fence) == (
        S.EMPTY,
        None,
        False,
    )


def test_a_failed_completion_write() -> None:
    metadata = meta(state=S.PREPARE_COMMIT)
    txn_end.complete_after_markers(metadata, NOW)
    # the log is unavailable: retry, keeping the pending state
    assert txn_decisions.completion_write_failed(metadata, E.not_enough_replicas)
    assert metadata.pending_state is S.COMPLETE_COMMIT
    # leadership moved: the next coordinator finishes the transaction
    assert not txn_decisions.completion_write_failed(metadata, E.not_leader_or_follower)
    assert metadata.pending_state is None


# -- timeouts --------------------------------------------------------------------------------


def test_only_ongoing_transactions_time_out() -> None:
    # shouldOnlyConsiderTransactionsInTheOngoingStateToAbort, plus the pending and the
    # KIP-939 exemptions and the strict comparison
    started = {"start_ms": 0, "timeout_ms": 1000}
    cache = {
        "ongoing": meta(state=S.ONGOING, producer_id=0, **started),
        "not-expiring": meta(state=S.ONGOING, producer_id=1, start_ms=0, timeout_ms=10000),
        "prepare-commit": meta(state=S.PREPARE_COMMIT, producer_id=2, **started),
        "prepare-abort": meta(state=S.PREPARE_ABORT, producer_id=3, **started),
        "complete-commit": meta(state=S.COMPLETE_COMMIT, producer_id=4, **started),
        "complete-abort": meta(state=S.COMPLETE_ABORT, producer_id=5, **started),
        "pending": meta(state=S.ONGOING, pending_state=S.PREPARE_COMMIT, **started),
        "two-phase": meta(state=S.ONGOING, start_ms=0, timeout_ms=NO_TIMEOUT_MS),
        "just-now": meta(state=S.ONGOING, start_ms=1000, timeout_ms=1000),
    }
    assert txn_expiry.timed_out(cache, 2000) == [txn_expiry.TimedOut("ongoing", 0, EPOCH)]


def abort(metadata: TransactionMetadata, **changes: Any) -> object:
    request: dict[str, Any] = {"server_transaction_version": TV_0, "now_ms": NOW}
    request.update(changes)
    found = txn_expiry.TimedOut(TXN_ID, metadata.producer_id, metadata.producer_epoch)
    return txn_expiry.abort_timed_out(metadata, found, **request)


def test_abort_expired_transaction_and_bump_epoch() -> None:
    metadata = meta(state=S.ONGOING)
    outcome = abort(metadata)
    assert isinstance(outcome, Write)
    assert outcome.transit == TxnTransit(
        producer_id=PID,
        previous_producer_id=PID,
        next_producer_id=-1,
        producer_epoch=EPOCH + 1,
        last_producer_epoch=-1,
        timeout_ms=TIMEOUT,
        state=S.PREPARE_ABORT,
        partitions=PARTITIONS,
        start_ms=NOW - 10,
        last_update_ms=NOW,
        client_transaction_version=TV_0,
    )
    reply, markers = written(outcome)
    assert reply == Reply(E.none)
    markers_written(metadata, markers)
    # the producer's next request is fenced
    assert end(metadata, True) == Reply(E.producer_fenced)
    assert add(metadata) == Reply(E.producer_fenced)


def test_no_abort_if_the_transaction_moved_since_it_was_found() -> None:
    metadata = meta(state=S.ONGOING)
    found = txn_expiry.TimedOut(TXN_ID, PID + 1, EPOCH)
    assert (
        txn_expiry.abort_timed_out(metadata, found, server_transaction_version=TV_0, now_ms=NOW)
        is None
    )
    metadata.pending_state = S.PREPARE_COMMIT
    assert abort(metadata) is None


def test_no_second_bump_after_a_failed_timeout_abort() -> None:
    metadata = meta(state=S.ONGOING)
    outcome = abort(metadata)
    assert isinstance(outcome, Write)
    txn_decisions.write_failed(outcome, E.request_timed_out)
    assert metadata.has_failed_epoch_fence
    again = abort(metadata)
    assert isinstance(again, Write)
    assert again.transit.producer_epoch == EPOCH + 1


def test_timeout_at_the_overflow_boundary_tv2() -> None:
    # shouldHandleTimeoutAtEpochOverflowBoundaryCorrectly(AndLateClientAbortRequest)TV2
    metadata = meta(state=S.ONGOING, producer_epoch=EXHAUSTED, client_transaction_version=TV_2)
    assert abort(metadata, server_transaction_version=TV_2) == NeedProducerId()
    outcome = abort(metadata, server_transaction_version=TV_2, new_producer_id=PID + 1)
    assert isinstance(outcome, Write)
    assert (outcome.transit.producer_epoch, outcome.transit.next_producer_id) == (
        MAX_PRODUCER_EPOCH,
        PID + 1,
    )
    reply, markers = written(outcome)
    assert reply == Reply(E.none, PID + 1, 0)
    # the id is not rotated until the markers are written
    assert (metadata.state, metadata.producer_id, metadata.producer_epoch) == (
        S.PREPARE_ABORT,
        PID,
        MAX_PRODUCER_EPOCH,
    )
    markers_written(metadata, markers)
    assert (metadata.producer_id, metadata.producer_epoch) == (PID + 1, 0)
    late = end(metadata, False, producer_epoch=EXHAUSTED, client_transaction_version=TV_2)
    assert late == Reply(E.none, PID + 1, 0)


# -- expiry ------------------------------------------------------------------------------------


def test_idle_ids_expire() -> None:
    expiration = 7 * 24 * 3600 * 1000
    old = NOW - expiration
    cache = {
        f"{state.kafka_name}-{age}": meta(state=state, last_update_ms=updated)
        for state in [*IDLE, S.ONGOING, *PREPARED]
        for age, updated in (("old", old), ("recent", old + 1))
    }
    cache["pending"] = meta(state=S.EMPTY, last_update_ms=old, pending_state=S.ONGOING)
    expired = txn_expiry.expire(cache, NOW, expiration)
    assert {metadata.state for metadata, _ in expired} == set(IDLE)
    assert all(metadata.last_update_ms == old for metadata, _ in expired)
    for metadata, transit in expired:
        assert metadata.pending_state is S.DEAD
        assert transit.to_log_value() is None


# -- DescribeTransactions and ListTransactions ---------------------------------------------


def test_describe() -> None:
    metadata = meta(state=S.ONGOING, partitions={("b", 1), ("a", 2), ("a", 0)})
    assert txn_queries.describe(metadata, TXN_ID) == txn_queries.TransactionDescription(
        TXN_ID,
        E.none,
        state="Ongoing",
        producer_id=PID,
        producer_epoch=EPOCH,
        timeout_ms=TIMEOUT,
        start_ms=NOW - 10,
        topics=(("a", (0, 2)), ("b", (1,))),
    )


@pytest.mark.parametrize(
    ("metadata", "transactional_id", "error"),
    [
        (meta(), "", E.invalid_request),
        (None, TXN_ID, E.transactional_id_not_found),
        # being expired: as good as gone
        (meta(state=S.DEAD), TXN_ID, E.transactional_id_not_found),
    ],
)
def test_describe_errors(
    metadata: TransactionMetadata | None, transactional_id: str, error: E
) -> None:
    assert txn_queries.describe(metadata, transactional_id) == txn_queries.TransactionDescription(
        transactional_id, error
    )


def listed(**filters: Any) -> set[str]:
    # testListTransactionsFiltering: three generations of transactions, 1 s apart
    entries = [
        ("t0", 0, S.ONGOING, 0),
        ("t1", 1, S.ONGOING, 0),
        ("my-special-0", 0, S.ONGOING, 0),
        ("t2", 2, S.PREPARE_COMMIT, 1000),
        ("t3", 3, S.PREPARE_ABORT, 1000),
        ("your-special-1", 0, S.PREPARE_ABORT, 1000),
        ("t4", 4, S.COMPLETE_COMMIT, 2000),
        ("t5", 5, S.COMPLETE_ABORT, 2000),
        ("t6", 6, S.COMPLETE_ABORT, 2000),
        ("t7", 7, S.PREPARE_EPOCH_FENCE, 2000),
        ("their-special-2", 7, S.COMPLETE_ABORT, 2000),
        # Dead is transient (being expired or unloaded) and never listed
        ("t8", 8, S.DEAD, 3000),
    ]
    cache = [
        meta(transactional_id=name, producer_id=producer_id, state=state, start_ms=start)
        for name, producer_id, state, start in entries
    ]
    result = txn_queries.list_transactions(cache, now_ms=3000, **filters)
    assert result.error is E.none
    unknown = {name for name in filters.get("state_filters", ()) if name not in KAFKA_NAMES}
    assert set(result.unknown_state_filters) == unknown
    return {entry.transactional_id for entry in result.transactions}


KAFKA_NAMES = {state.kafka_name for state in S}
EVERYONE = {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"} | {
    "my-special-0",
    "your-special-1",
    "their-special-2",
}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, EVERYONE),
        ({"duration_filter_ms": 0}, EVERYONE),
        (
            {"duration_filter_ms": 1000},
            {"t0", "t1", "t2", "t3", "my-special-0", "your-special-1"},
        ),
        ({"duration_filter_ms": 2000}, {"t0", "t1", "my-special-0"}),
        ({"duration_filter_ms": 3000}, set()),
        ({"state_filters": ["Ongoing"]}, {"t0", "t1", "my-special-0"}),
        ({"state_filters": ["Ongoing", "UnknownState"]}, {"t0", "t1", "my-special-0"}),
        ({"state_filters": ["PrepareCommit", "CompleteCommit"]}, {"t2", "t4"}),
        ({"state_filters": ["UnknownState"]}, set()),
        ({"state_filters": ["ongoing"]}, set()),
        ({"producer_id_filters": [5]}, {"t5"}),
        ({"producer_id_filters": [5, 6, 8, 9]}, {"t5", "t6"}),
        ({"producer_id_filters": [4, 5], "state_filters": ["CompleteCommit"]}, {"t4"}),
        (
            {"producer_id_filters": [4, 5], "state_filters": ["CompleteCommit", "CompleteAbort"]},
            {"t4", "t5"},
        ),
        ({"producer_id_filters": [3, 6], "state_filters": ["UnknownState"]}, set()),
        ({"producer_id_filters": [10], "state_filters": ["CompleteCommit"]}, set()),
        ({"state_filters": ["Dead"]}, set()),
        (
            {"transactional_id_pattern": ".*special-.*"},
            {"my-special-0", "your-special-1", "their-special-2"},
        ),
        ({"transactional_id_pattern": "nothing"}, set()),
        # the whole id must match (RE2J's matches())
        ({"transactional_id_pattern": "special"}, set()),
        ({"transactional_id_pattern": ""}, EVERYONE),
        (
            {"duration_filter_ms": 1000, "transactional_id_pattern": ".*special-.*"},
            {"my-special-0", "your-special-1"},
        ),
        (
            {
                "producer_id_filters": [7],
                "state_filters": ["CompleteCommit", "CompleteAbort"],
                "transactional_id_pattern": ".*special-.*",
            },
            {"their-special-2"},
        ),
    ],
)
def test_list_filters(filters: dict[str, Any], expected: set[str]) -> None:
    assert listed(**filters) == expected


def test_list_with_an_invalid_pattern() -> None:
    result = txn_queries.list_transactions([meta()], transactional_id_pattern="(ab(cd", now_ms=NOW)
    assert result == txn_queries.TransactionList(E.invalid_regular_expression)


def test_listed_fields() -> None:
    result = txn_queries.list_transactions([meta(state=S.ONGOING)], now_ms=NOW)
    assert result.transactions == (txn_queries.ListedTransaction(TXN_ID, PID, "Ongoing"),)
