"""The transaction coordinator's state model: Kafka's state table, and the two-step
transitions of TransactionMetadata (most cases ported from Kafka 4.3's
TransactionMetadataTest.java)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from strom.coordinator.txn_metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransitionError,
    TransactionMetadata,
    TxnTransit,
)
from strom.coordinator.txn_records import TransactionLogValue, encode_value, parse_value
from strom.coordinator.txn_states import VALID_PREVIOUS, TransactionState, TransactionVersion

S = TransactionState
TV_0 = TransactionVersion.TV_0
TV_2 = TransactionVersion.TV_2
PRODUCER_ID = 23423
NOW = 1_000_000
TOPIC1_0 = ("topic1", 0)
TOPIC2_0 = ("topic2", 0)

# Kafka 4.3's TransactionState.validPreviousStates, written out pair by pair
# (previous, next) rather than read back from ours
KAFKA_TRANSITIONS = {
    *((previous, S.EMPTY) for previous in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)),
    *(
        (previous, S.ONGOING)
        for previous in (S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
    ),
    (S.ONGOING, S.PREPARE_COMMIT),
    *(
        (previous, S.PREPARE_ABORT)
        for previous in (
            S.ONGOING,
            S.PREPARE_EPOCH_FENCE,
            S.EMPTY,
            S.COMPLETE_COMMIT,
            S.COMPLETE_ABORT,
        )
    ),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    *((previous, S.DEAD) for previous in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}


def meta(**changes: Any) -> TransactionMetadata:
    fields: dict[str, Any] = {
        "transactional_id": "txnlId",
        "producer_id": PRODUCER_ID,
        "producer_epoch": 735,
        "timeout_ms": 30000,
        "state": S.EMPTY,
        "start_ms": -1,
        "last_update_ms": NOW,
    }
    fields.update(changes)
    return TransactionMetadata(**fields)


# -- states -----------------------------------------------------------------------------


def test_state_ids_are_kafkas() -> None:
    assert [(state.name, int(state)) for state in S] == [
        ("EMPTY", 0),
        ("ONGOING", 1),
        ("PREPARE_COMMIT", 2),
        ("PREPARE_ABORT", 3),
        ("COMPLETE_COMMIT", 4),
        ("COMPLETE_ABORT", 5),
        ("DEAD", 6),
        ("PREPARE_EPOCH_FENCE", 7),
    ]


def test_state_names_are_kafkas_and_map_back() -> None:
    assert [state.kafka_name for state in S] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
    for state in S:
        assert S.from_kafka_name(state.kafka_name) is state


@pytest.mark.parametrize("name", ["ongoing", "ONGOING", "Unknown", ""])
def test_state_names_are_looked_up_exactly(name: str) -> None:
    # Kafka's fromName is a map lookup, case included
    with pytest.raises(ValueError):
        S.from_kafka_name(name)


@pytest.mark.parametrize(("previous", "target"), itertools.product(S, S))
def test_valid_previous_is_kafkas_table(previous: S, target: S) -> None:
    assert (previous in VALID_PREVIOUS[target]) == ((previous, target) in KAFKA_TRANSITIONS)


def test_only_idle_states_expire() -> None:
    assert {state for state in S if state.is_expiration_allowed} == {
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    }


def test_transaction_versions() -> None:
    assert [tv.supports_epoch_bump for tv in TransactionVersion] == [False, False, True]
    assert [tv.log_value_version for tv in TransactionVersion] == [0, 1, 1]


# -- InitProducerId: epoch bumps and producer id rotation --------------------------------


def test_initialize_epoch() -> None:
    metadata = meta(producer_epoch=NO_PRODUCER_EPOCH)
    transit = metadata.prepare_increment_producer_epoch(30000, None, NOW)
    assert isinstance(transit, TxnTransit)
    metadata.complete(transit)
    assert (metadata.producer_id, metadata.producer_epoch) == (PRODUCER_ID, 0)
    assert metadata.last_producer_epoch == NO_PRODUCER_EPOCH


def test_normal_epoch_bump() -> None:
    metadata = meta()
    transit = metadata.prepare_increment_producer_epoch(30000, None, NOW)
    assert isinstance(transit, TxnTransit)
    metadata.complete(transit)
    assert (metadata.producer_id, metadata.producer_epoch) == (PRODUCER_ID, 736)
    assert metadata.last_producer_epoch == NO_PRODUCER_EPOCH


def test_bump_epoch_not_allowed_if_epochs_exhausted() -> None:
    metadata = meta(producer_epoch=MAX_PRODUCER_EPOCH - 1)
    assert metadata.is_producer_epoch_exhausted
    with pytest.raises(IllegalTransitionError):
        metadata.prepare_increment_producer_epoch(30000, None, NOW)


def test_tolerate_update_time_shift_during_epoch_bump() -> None:
    metadata = meta(producer_epoch=1, start_ms=1)
    transit = metadata.prepare_increment_producer_epoch(30000, 1, NOW - 1)
    assert isinstance(transit, TxnTransit)
    metadata.complete(transit)
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (2, 1)
    assert (metadata.start_ms, metadata.last_update_ms) == (-1, NOW - 1)


def test_tolerate_update_time_reset_during_producer_id_rotation() -> None:
    metadata = meta(producer_epoch=1, start_ms=1)
    metadata.complete(metadata.prepare_producer_id_rotation(PRODUCER_ID + 1, 30000, NOW - 1, True))
    assert (metadata.producer_id, metadata.producer_epoch) == (PRODUCER_ID + 1, 0)
    assert metadata.last_producer_epoch == 1
    assert (metadata.start_ms, metadata.last_update_ms) == (-1, NOW - 1)


def test_rotate_producer_id() -> None:
    metadata = meta(producer_epoch=MAX_PRODUCER_EPOCH - 1)
    metadata.complete(metadata.prepare_producer_id_rotation(9893, 30000, NOW, True))
    assert (metadata.producer_id, metadata.previous_producer_id) == (9893, PRODUCER_ID)
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (0, MAX_PRODUCER_EPOCH - 1)


def test_rotation_without_the_last_epoch() -> None:
    metadata = meta(producer_epoch=MAX_PRODUCER_EPOCH - 1)
    transit = metadata.prepare_producer_id_rotation(9893, 30000, NOW, record_last_epoch=False)
    assert transit.last_producer_epoch == NO_PRODUCER_EPOCH


@pytest.mark.parametrize(
    ("state", "tv"),
    [
        (S.ONGOING, TV_0),
        (S.PREPARE_ABORT, TV_0),
        (S.PREPARE_ABORT, TV_2),
        (S.PREPARE_COMMIT, TV_0),
        (S.PREPARE_COMMIT, TV_2),
    ],
)
def test_no_producer_id_rotation_inside_a_transaction(state: S, tv: TransactionVersion) -> None:
    metadata = meta(state=state, client_transaction_version=tv, partitions={TOPIC1_0}, start_ms=1)
    with pytest.raises(IllegalTransitionError):
        metadata.prepare_producer_id_rotation(PRODUCER_ID + 1, 30000, NOW, True)


def test_attempted_epoch_bump_with_newly_created_metadata() -> None:
    metadata = meta(producer_epoch=NO_PRODUCER_EPOCH)
    transit = metadata.prepare_increment_producer_epoch(30000, 735, NOW)
    assert isinstance(transit, TxnTransit)
    metadata.complete(transit)
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (0, NO_PRODUCER_EPOCH)


def test_epoch_bump_with_current_epoch_provided() -> None:
    metadata = meta()
    transit = metadata.prepare_increment_producer_epoch(30000, 735, NOW)
    assert isinstance(transit, TxnTransit)
    metadata.complete(transit)
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (736, 735)


def test_attempted_epoch_bump_with_last_epoch() -> None:
    # a retry of a bump whose answer was lost: the same epoch again, no bump
    metadata = meta(last_producer_epoch=734)
    transit = metadata.prepare_increment_producer_epoch(30000, 734, NOW)
    assert isinstance(transit, TxnTransit)
    metadata.complete(transit)
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (735, 734)


def test_attempted_epoch_bump_with_fenced_epoch() -> None:
    metadata = meta(previous_producer_id=PRODUCER_ID, last_producer_epoch=734)
    assert metadata.prepare_increment_producer_epoch(30000, 733, NOW) is ErrorCode.producer_fenced
    assert metadata.pending_state is None


# -- AddPartitionsToTxn ------------------------------------------------------------------


def test_tolerate_time_shift_during_add_partitions() -> None:
    metadata = meta(producer_epoch=1, start_ms=NOW)
    # from Empty the start time becomes the update time, even an earlier one
    metadata.complete(metadata.prepare_add_partitions({TOPIC1_0}, NOW - 1, TV_0))
    assert metadata.partitions == {TOPIC1_0}
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (1, NO_PRODUCER_EPOCH)
    assert (metadata.start_ms, metadata.last_update_ms) == (NOW - 1, NOW - 1)
    # in Ongoing the start time stays
    metadata.complete(metadata.prepare_add_partitions({TOPIC2_0}, NOW - 2, TV_0))
    assert metadata.partitions == {TOPIC1_0, TOPIC2_0}
    assert (metadata.start_ms, metadata.last_update_ms) == (NOW - 1, NOW - 2)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_the_first_add_starts_the_transaction(state: S) -> None:
    metadata = meta(state=state, start_ms=5)
    transit = metadata.prepare_add_partitions({TOPIC1_0}, NOW, TV_2)
    assert (transit.state, transit.start_ms) == (S.ONGOING, NOW)
    assert transit.client_transaction_version is TV_2


# -- EndTxn --------------------------------------------------------------------------------


@pytest.mark.parametrize("target", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_tolerate_time_shift_during_prepare(target: S) -> None:
    metadata = meta(producer_epoch=1, state=S.ONGOING, start_ms=1)
    metadata.complete(
        metadata.prepare_abort_or_commit(target, TV_0, NO_PRODUCER_ID, NOW - 1, False)
    )
    assert metadata.state is target
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (1, NO_PRODUCER_EPOCH)
    assert (metadata.start_ms, metadata.last_update_ms) == (1, NOW - 1)


@pytest.mark.parametrize("tv", [TV_0, TV_2])
@pytest.mark.parametrize(
    ("prepared", "completed"),
    [(S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT)],
)
def test_tolerate_time_shift_during_complete(
    prepared: S, completed: S, tv: TransactionVersion
) -> None:
    metadata = meta(
        producer_epoch=1,
        last_producer_epoch=0,
        state=prepared,
        start_ms=1,
        client_transaction_version=tv,
    )
    metadata.complete(metadata.prepare_complete(NOW - 1))
    assert metadata.state is completed
    assert (metadata.producer_id, metadata.producer_epoch) == (PRODUCER_ID, 1)
    assert metadata.last_producer_epoch == 0
    assert (metadata.start_ms, metadata.last_update_ms) == (1, NOW - 1)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT])
def test_transit_from_idle_to_prepare_abort_in_v2(state: S) -> None:
    metadata = meta(state=state, start_ms=NOW - 1, client_transaction_version=TV_2)
    metadata.complete(metadata.prepare_abort_or_commit(S.PREPARE_ABORT, TV_2, -1, NOW + 1, True))
    assert (metadata.producer_id, metadata.producer_epoch) == (PRODUCER_ID, 736)
    assert metadata.start_ms == NOW + 1


def test_idle_to_prepare_abort_needs_tv2() -> None:
    metadata = meta(state=S.COMPLETE_ABORT, start_ms=NOW - 1)
    transit = metadata.prepare_abort_or_commit(S.PREPARE_ABORT, TV_0, -1, NOW + 1, True)
    # the table allows it, the completion's start time check does not under TV0
    with pytest.raises(IllegalTransitionError):
        metadata.complete(transit)


def test_epoch_bump_on_end_txn() -> None:
    metadata = meta(
        producer_epoch=10, state=S.ONGOING, start_ms=NOW, client_transaction_version=TV_2
    )
    metadata.complete(metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, -1, NOW - 1, False))
    assert (metadata.producer_id, metadata.producer_epoch) == (PRODUCER_ID, 11)
    assert metadata.client_transaction_version is TV_2
    metadata.complete(metadata.prepare_complete(NOW))
    assert (metadata.producer_id, metadata.producer_epoch) == (PRODUCER_ID, 11)
    assert metadata.state is S.COMPLETE_COMMIT


def test_epoch_bump_on_end_txn_overflow() -> None:
    exhausted = MAX_PRODUCER_EPOCH - 1
    metadata = meta(
        producer_epoch=exhausted, state=S.ONGOING, start_ms=NOW, client_transaction_version=TV_2
    )
    assert metadata.is_producer_epoch_exhausted
    metadata.complete(
        metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, 9893, NOW - 1, False)
    )
    assert (metadata.producer_id, metadata.producer_epoch) == (PRODUCER_ID, MAX_PRODUCER_EPOCH)
    assert (metadata.last_producer_epoch, metadata.next_producer_id) == (exhausted, 9893)
    metadata.complete(metadata.prepare_complete(NOW))
    # the new producer id takes over once the markers are written
    assert (metadata.producer_id, metadata.producer_epoch) == (9893, 0)
    assert (metadata.previous_producer_id, metadata.next_producer_id) == (PRODUCER_ID, -1)
    assert metadata.last_producer_epoch == exhausted


def test_tv2_abort_at_short_max_value_does_not_overflow() -> None:
    metadata = meta(
        producer_epoch=MAX_PRODUCER_EPOCH,
        state=S.ONGOING,
        start_ms=1,
        client_transaction_version=TV_2,
    )
    transit = metadata.prepare_abort_or_commit(S.PREPARE_ABORT, TV_2, -1, NOW, False)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (MAX_PRODUCER_EPOCH,) * 2
    metadata.complete(transit)


# -- fencing -------------------------------------------------------------------------------


def test_fence_producer_after_epochs_exhausted() -> None:
    metadata = meta(producer_epoch=MAX_PRODUCER_EPOCH - 1, state=S.ONGOING)
    fence = metadata.prepare_fence_producer_epoch()
    assert (fence.producer_epoch, fence.last_producer_epoch) == (MAX_PRODUCER_EPOCH, -1)
    assert metadata.pending_state is S.PREPARE_EPOCH_FENCE
    # endTransaction clears the pending state to make way for the abort
    metadata.pending_state = None
    transit = metadata.prepare_abort_or_commit(S.PREPARE_ABORT, TV_0, -1, NOW, False)
    metadata.complete(transit)
    assert transit.producer_id == PRODUCER_ID


@pytest.mark.parametrize("state", [S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.EMPTY])
def test_fence_only_from_ongoing(state: S) -> None:
    with pytest.raises(IllegalTransitionError):
        meta(producer_epoch=MAX_PRODUCER_EPOCH - 1, state=state).prepare_fence_producer_epoch()


def test_fence_does_not_overflow() -> None:
    # only a bug reaches Short.MaxValue: Kafka logs it and fences at the same epoch
    metadata = meta(producer_epoch=MAX_PRODUCER_EPOCH, state=S.ONGOING)
    fence = metadata.prepare_fence_producer_epoch()
    assert (fence.state, fence.producer_epoch) == (S.PREPARE_EPOCH_FENCE, MAX_PRODUCER_EPOCH)


def test_a_failed_fence_is_not_bumped_twice() -> None:
    metadata = meta(producer_epoch=7, state=S.ONGOING, has_failed_epoch_fence=True)
    assert metadata.prepare_fence_producer_epoch().producer_epoch == 7


def test_prepare_complete_forgets_a_failed_fence() -> None:
    metadata = meta(state=S.PREPARE_ABORT, start_ms=1, has_failed_epoch_fence=True)
    metadata.prepare_complete(NOW)
    assert not metadata.has_failed_epoch_fence


def test_the_fence_is_never_completed() -> None:
    metadata = meta(state=S.ONGOING)
    fence = metadata.prepare_fence_producer_epoch()
    with pytest.raises(IllegalTransitionError):
        metadata.complete(fence)
    with pytest.raises(IllegalTransitionError):
        fence.to_log_value()


# -- the two steps ---------------------------------------------------------------------------


def test_prepare_sets_the_pending_state_and_changes_nothing_else() -> None:
    metadata = meta()
    before = meta()
    transit = metadata.prepare_add_partitions({TOPIC1_0}, NOW + 5, TV_0)
    assert metadata.pending_state is S.ONGOING
    metadata.pending_state = None
    assert metadata == before
    assert transit.previous_producer_id == PRODUCER_ID


def test_one_transition_at_a_time() -> None:
    metadata = meta()
    metadata.prepare_add_partitions({TOPIC1_0}, NOW, TV_0)
    with pytest.raises(IllegalTransitionError):
        metadata.prepare_dead()


def test_complete_needs_a_pending_transition() -> None:
    metadata = meta()
    transit = metadata.prepare_no_transit()
    assert metadata.pending_state is None
    with pytest.raises(IllegalTransitionError):
        metadata.complete(transit)


def test_complete_refuses_another_state_than_pending() -> None:
    metadata = meta()
    metadata.prepare_add_partitions({TOPIC1_0}, NOW, TV_0)
    with pytest.raises(IllegalTransitionError):
        metadata.complete(meta().prepare_dead())


def test_complete_refuses_losing_partitions() -> None:
    metadata = meta(state=S.ONGOING, partitions={TOPIC1_0, TOPIC2_0}, start_ms=1)
    transit = metadata.prepare_add_partitions(set(), NOW, TV_0)
    with pytest.raises(IllegalTransitionError):
        metadata.complete(TxnTransit(**{**_fields(transit), "partitions": frozenset({TOPIC1_0})}))


def test_complete_refuses_another_epoch() -> None:
    metadata = meta(state=S.ONGOING, start_ms=1)
    transit = metadata.prepare_add_partitions({TOPIC1_0}, NOW, TV_0)
    with pytest.raises(IllegalTransitionError):
        metadata.complete(TxnTransit(**{**_fields(transit), "producer_epoch": 736}))


def test_complete_refuses_an_epoch_jump_on_init() -> None:
    metadata = meta()
    transit = metadata.prepare_increment_producer_epoch(30000, None, NOW)
    assert isinstance(transit, TxnTransit)
    with pytest.raises(IllegalTransitionError):
        metadata.complete(TxnTransit(**{**_fields(transit), "producer_epoch": 738}))


def test_dead_is_never_completed() -> None:
    metadata = meta(state=S.COMPLETE_COMMIT, start_ms=1)
    dead = metadata.prepare_dead()
    assert dead.to_log_value() is None  # a tombstone
    with pytest.raises(IllegalTransitionError):
        metadata.complete(dead)


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_only_idle_ids_may_die(state: S) -> None:
    with pytest.raises(IllegalTransitionError):
        meta(state=state, start_ms=1).prepare_dead()


def test_a_negative_epoch_is_only_for_dead() -> None:
    metadata = meta(producer_epoch=NO_PRODUCER_EPOCH)
    assert metadata.prepare_dead().producer_epoch == NO_PRODUCER_EPOCH
    metadata.pending_state = None
    with pytest.raises(IllegalTransitionError):
        metadata.prepare_add_partitions({TOPIC1_0}, NOW, TV_0)


def test_remove_partition_only_while_prepared() -> None:
    metadata = meta(state=S.PREPARE_COMMIT, partitions={TOPIC1_0, TOPIC2_0}, start_ms=1)
    metadata.remove_partition(TOPIC1_0)
    assert metadata.partitions == {TOPIC2_0}
    with pytest.raises(IllegalTransitionError):
        meta(state=S.ONGOING, partitions={TOPIC1_0}).remove_partition(TOPIC1_0)


# -- the log ---------------------------------------------------------------------------------


def test_transit_to_log_value() -> None:
    metadata = meta(state=S.ONGOING, start_ms=1, partitions={TOPIC1_0})
    transit = metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, 77, NOW, False)
    assert transit.to_log_value() == TransactionLogValue(
        producer_id=PRODUCER_ID,
        producer_epoch=736,
        timeout_ms=30000,
        state=S.PREPARE_COMMIT,
        partitions=frozenset({TOPIC1_0}),
        last_update_ms=NOW,
        start_ms=1,
        previous_producer_id=PRODUCER_ID,
        next_producer_id=77,
        client_transaction_version=2,
    )


def test_from_log_forgets_the_last_epoch() -> None:
    metadata = meta(state=S.ONGOING, start_ms=1, partitions={TOPIC1_0}, last_producer_epoch=734)
    transit = metadata.prepare_add_partitions({TOPIC2_0}, NOW, TV_2)
    written = transit.to_log_value()
    assert written is not None
    loaded_value = parse_value(encode_value(written, TV_2.log_value_version))
    assert loaded_value is not None
    loaded = TransactionMetadata.from_log("txnlId", loaded_value)
    metadata.complete(transit)
    assert loaded.last_producer_epoch == NO_PRODUCER_EPOCH
    assert loaded.pending_state is None
    loaded.last_producer_epoch = metadata.last_producer_epoch
    assert loaded == metadata


def _fields(transit: TxnTransit) -> dict[str, Any]:
    return {name: getattr(transit, name) for name in TxnTransit.__slots__}
