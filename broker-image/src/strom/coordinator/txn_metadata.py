"""One transactional id's state at its coordinator, and its two-step transitions.

Kafka's TransactionMetadata (transaction-coordinator/.../TransactionMetadata.java in 4.3;
core's TransactionMetadata.scala before 4.1). Every change is prepared first: a
`prepare_*` method returns the frozen `TxnTransit` to write to `__transaction_state` and
sets `pending_state`, so any other request meanwhile gets CONCURRENT_TRANSACTIONS. Only
once the record is written does `complete(transit)` change the fields. Pure: no I/O,
no clock (callers pass `now_ms`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from strom.coordinator.txn_records import TransactionLogValue
from strom.coordinator.txn_states import VALID_PREVIOUS, TransactionState, TransactionVersion

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MaxValue
# KIP-939: a two-phase-commit transaction has this timeout, and never times out
NO_TIMEOUT_MS = 2**31 - 1

_IDLE = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)
_PREPARED = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})
_COMPLETED = frozenset({TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT})


class IllegalTransitionError(Exception):
    """A transition Kafka's coordinator treats as a bug (IllegalStateException): never a
    client's fault, so it is raised rather than answered."""


def is_epoch_exhausted(producer_epoch: int) -> bool:
    # the last epoch is kept back so that the coordinator can always fence a producer
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The state a transaction moves to, written to the log before it is applied
    (Kafka's TxnTransitMetadata)."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[tuple[str, int]]
    start_ms: int
    last_update_ms: int
    client_transaction_version: TransactionVersion

    def to_log_value(self) -> TransactionLogValue | None:
        """The record value to write: None (a tombstone) for Dead."""
        if self.state is TransactionState.DEAD:
            return None
        if self.state is TransactionState.PREPARE_EPOCH_FENCE:
            raise IllegalTransitionError("PrepareEpochFence is never written to the log")
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            state=self.state,
            partitions=self.partitions,
            last_update_ms=self.last_update_ms,
            start_ms=self.start_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    # the producer id before the last rotation (KIP-360 retries, TV2 overflow retries)
    previous_producer_id: int = NO_PRODUCER_ID
    # TV2: the id the producer moves to when this transaction's epoch bump overflows
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    # the epoch before the last bump, so that a retried InitProducerId / EndTxn is known
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    client_transaction_version: TransactionVersion = TransactionVersion.TV_0
    pending_state: TransactionState | None = None
    # a fence whose write failed already bumped the epoch in memory: do not bump twice
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_log(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        """The metadata a loaded record describes (TransactionLog.readTxnRecordValue): the
        last epoch is not in the record, so a retry across a coordinator move fails."""
        return cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            previous_producer_id=value.previous_producer_id,
            next_producer_id=value.next_producer_id,
            producer_epoch=value.producer_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            timeout_ms=value.timeout_ms,
            state=value.state,
            partitions=set(value.partitions),
            start_ms=value.start_ms,
            last_update_ms=value.last_update_ms,
            client_transaction_version=TransactionVersion(value.client_transaction_version),
        )

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def is_distributed_two_phase_commit(self) -> bool:
        return self.timeout_ms == NO_TIMEOUT_MS

    def remove_partition(self, partition: tuple[str, int]) -> None:
        """A marker was written to this partition."""
        if self.state not in _PREPARED:
            raise IllegalTransitionError(
                f"{self.transactional_id}: removing {partition} whose marker was sent, in "
                f"state {self.state.kafka_name} (pending {self.pending_state})"
            )
        self.partitions.discard(partition)

    def prepare_no_transit(self) -> TxnTransit:
        """The current state as a transit, with no pending state set."""
        return self._base(self.state)

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        # no bump after a failed fence: that epoch never reached a client. None at
        # Short.MaxValue either, which only a bug can reach (Kafka logs and goes on)
        bump = not self.has_failed_epoch_fence and self.producer_epoch != MAX_PRODUCER_EPOCH
        epoch = self.producer_epoch + 1 if bump else self.producer_epoch
        return self._prepare(
            replace(self._base(TransactionState.PREPARE_EPOCH_FENCE), producer_epoch=epoch)
        )

    def prepare_increment_producer_epoch(
        self, new_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | ErrorCode:
        """InitProducerId in an idle state: the next epoch, or PRODUCER_FENCED when the
        caller's epoch (KIP-360) is neither the current nor the last one."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(
                f"{self.transactional_id}: no epochs left for producer id {self.producer_id}"
            )
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            # a new producer (or one not telling its epoch): no retry to recognise later
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            # the producer recovers from an error and nobody else initialised since
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # a retry of a bump whose answer was lost: answer the same epoch again
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.producer_fenced
        return self._prepare(
            replace(
                self._base(TransactionState.EMPTY),
                producer_epoch=epoch,
                last_producer_epoch=last_epoch,
                timeout_ms=new_timeout_ms,
                partitions=frozenset(),
                start_ms=-1,
                last_update_ms=now_ms,
            )
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        """InitProducerId when the epoch is exhausted: a new producer id at epoch 0."""
        if self.state in (TransactionState.ONGOING, *_PREPARED):
            raise IllegalTransitionError(
                f"{self.transactional_id}: cannot rotate producer ids in a transaction"
            )
        return self._prepare(
            replace(
                self._base(TransactionState.EMPTY),
                producer_id=new_producer_id,
                producer_epoch=0,
                last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                timeout_ms=new_timeout_ms,
                partitions=frozenset(),
                start_ms=-1,
                last_update_ms=now_ms,
            )
        )

    def prepare_add_partitions(
        self,
        added: Iterable[tuple[str, int]],
        now_ms: int,
        client_transaction_version: TransactionVersion,
    ) -> TxnTransit:
        # the first add starts the transaction (and its timeout)
        start_ms = now_ms if self.state in _IDLE else self.start_ms
        return self._prepare(
            replace(
                self._base(TransactionState.ONGOING),
                partitions=frozenset(self.partitions) | frozenset(added),
                start_ms=start_ms,
                last_update_ms=now_ms,
                client_transaction_version=client_transaction_version,
            )
        )

    def prepare_abort_or_commit(
        self,
        new_state: TransactionState,
        client_transaction_version: TransactionVersion,
        next_producer_id: int,
        now_ms: int,
        no_partition_added: bool,
    ) -> TxnTransit:
        """EndTxn: PrepareCommit or PrepareAbort. Under TV2 the epoch goes up by one (the
        caller checked it cannot overflow, and supplies a next producer id if it is the
        last one)."""
        epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        if client_transaction_version.supports_epoch_bump:
            # at Short.MaxValue only a bug got us here; the abort goes through unbumped
            stuck = (
                self.producer_epoch == MAX_PRODUCER_EPOCH
                and new_state is TransactionState.PREPARE_ABORT
            )
            epoch = self.producer_epoch if stuck else self.producer_epoch + 1
            last_epoch = self.producer_epoch
        return self._prepare(
            replace(
                self._base(new_state),
                producer_epoch=epoch,
                last_producer_epoch=last_epoch,
                # TV2 may abort with no partition added: the start time is then the abort's
                start_ms=now_ms if no_partition_added else self.start_ms,
                next_producer_id=next_producer_id,
                last_update_ms=now_ms,
                client_transaction_version=client_transaction_version,
            )
        )

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Every marker was written: CompleteCommit or CompleteAbort."""
        # the Prepare* record is in the log, so a failed fence is behind us
        self.has_failed_epoch_fence = False
        completed = (
            TransactionState.COMPLETE_COMMIT
            if self.state is TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT
        )
        producer_id, epoch = self.producer_id, self.producer_epoch
        if (
            self.client_transaction_version.supports_epoch_bump
            and self.next_producer_id != NO_PRODUCER_ID
        ):
            # TV2 overflow: the new producer id takes over now the markers are written; the
            # last epoch stays Short.MaxValue - 1, the last one the client saw
            producer_id, epoch = self.next_producer_id, 0
        return self._prepare(
            replace(
                self._base(completed),
                producer_id=producer_id,
                producer_epoch=epoch,
                next_producer_id=NO_PRODUCER_ID,
                partitions=frozenset(),
                last_update_ms=now_ms,
            )
        )

    def prepare_dead(self) -> TxnTransit:
        """Expiry: the tombstone to write; on success the id leaves the cache."""
        return self._prepare(replace(self._base(TransactionState.DEAD), partitions=frozenset()))

    def complete(self, transit: TxnTransit) -> None:
        """Apply a transit whose record was written (completeTransitionTo)."""
        target = self.pending_state
        if target is None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: completing {transit} with no pending state"
            )
        if target is not transit.state:
            self._refuse(transit)
        if target is TransactionState.EMPTY:  # from InitProducerId
            if (
                (self.producer_epoch != transit.producer_epoch and not self._valid_bump(transit))
                or transit.partitions
                or transit.start_ms != -1
            ):
                self._refuse(transit)
        elif target is TransactionState.ONGOING:  # from AddPartitionsToTxn
            if (
                not self._valid_epoch(transit)
                or not transit.partitions >= self.partitions
                or self.timeout_ms != transit.timeout_ms
            ):
                self._refuse(transit)
        elif target in _PREPARED:  # from EndTxn
            # TV2 aborts from idle states, whose start time is the abort's
            idle_abort = (
                target is TransactionState.PREPARE_ABORT
                and transit.client_transaction_version.supports_epoch_bump
                and self.state in _IDLE
            )
            if (
                not self._valid_epoch(transit)
                or self.partitions != transit.partitions
                or self.timeout_ms != transit.timeout_ms
                or not (self.start_ms == transit.start_ms or idle_abort)
            ):
                self._refuse(transit)
        elif target in _COMPLETED:  # every marker written
            if (
                not self._valid_epoch(transit)
                or self.timeout_ms != transit.timeout_ms
                or transit.start_ms == -1
            ):
                self._refuse(transit)
        elif target is TransactionState.DEAD:
            # an expired id leaves the cache once its tombstone is written
            raise IllegalTransitionError(
                f"{self.transactional_id}: Dead is never completed, the id is removed"
            )
        else:  # PrepareEpochFence is always followed by PrepareAbort, never completed
            self._refuse(transit)
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.last_update_ms
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = target

    def _base(self, state: TransactionState) -> TxnTransit:
        # Kafka's TransitionData: every field a prepare method leaves alone keeps its
        # value, and the previous producer id is the current one
        return TxnTransit(
            producer_id=self.producer_id,
            previous_producer_id=self.producer_id,
            next_producer_id=self.next_producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=self.last_producer_epoch,
            timeout_ms=self.timeout_ms,
            state=state,
            partitions=frozenset(self.partitions),
            start_ms=self.start_ms,
            last_update_ms=self.last_update_ms,
            client_transaction_version=self.client_transaction_version,
        )

    def _prepare(self, transit: TxnTransit) -> TxnTransit:
        state = transit.state
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: preparing {state.kafka_name} while "
                f"{self.pending_state.kafka_name} is pending"
            )
        if transit.producer_id < 0:
            raise IllegalTransitionError(f"illegal new producer id {transit.producer_id}")
        # a new id's epoch is -1 until its first InitProducerId, and may expire so
        if state is not TransactionState.DEAD and transit.producer_epoch < 0:
            raise IllegalTransitionError(f"illegal new producer epoch {transit.producer_epoch}")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(
                f"{self.transactional_id}: no transition from {self.state.kafka_name} "
                f"to {state.kafka_name}"
            )
        self.pending_state = state
        return transit

    def _valid_epoch(self, transit: TxnTransit) -> bool:
        # TransactionMetadata.validProducerEpoch
        tv2 = transit.client_transaction_version.supports_epoch_bump
        if tv2 and transit.state in _COMPLETED and transit.producer_epoch == 0:
            # overflow: the new id at epoch 0, the last epoch unchanged
            return (
                transit.last_producer_epoch == self.last_producer_epoch
                and transit.previous_producer_id == self.producer_id
            )
        if tv2 and transit.state in _PREPARED:
            # the Prepare* of TV2 bumped the epoch: its last epoch is the current one
            return (
                transit.last_producer_epoch == self.producer_epoch
                and transit.producer_id == self.producer_id
            )
        return (
            transit.producer_epoch == self.producer_epoch
            and transit.producer_id == self.producer_id
        )

    def _valid_bump(self, transit: TxnTransit) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )

    def _refuse(self, transit: TxnTransit) -> None:
        raise IllegalTransitionError(
            f"{self.transactional_id}: unexpected transition from {self} to {transit}"
        )
