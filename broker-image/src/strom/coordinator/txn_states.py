"""A transaction's states at its coordinator, and which transitions between them are valid.

Kafka's `TransactionState` (transaction-coordinator/.../TransactionState.java in 4.x,
the sealed trait in core's TransactionMetadata.scala before): the ids are written to
`__transaction_state`, the names are what DescribeTransactions and ListTransactions
answer. Also Kafka's `TransactionVersion` feature levels, which decide the log value
version and whether EndTxn bumps the epoch (KIP-890 part 2).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    # expired: the tombstone is being written, the id leaves the cache after it
    DEAD = 6
    # in memory only, between InitProducerId (or a timeout) fencing the epoch and the
    # PrepareAbort that follows; never written
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _KAFKA_NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TransactionState:
        # Kafka's fromName is an exact lookup: "ongoing" is an unknown state filter
        for state, kafka_name in _KAFKA_NAMES.items():
            if kafka_name == name:
                return state
        raise ValueError(f"unknown transaction state {name!r}")

    @property
    def is_expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may be expired (tombstoned)."""
        return self in _EXPIRABLE


_KAFKA_NAMES: dict[TransactionState, str] = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_EXPIRABLE = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)

_IDLE = _EXPIRABLE

# state -> the states a transaction may be in to move to it (validPreviousStates)
VALID_PREVIOUS: Mapping[TransactionState, frozenset[TransactionState]] = {
    # InitProducerId: a new epoch or producer id, no partitions
    TransactionState.EMPTY: _IDLE,
    # AddPartitionsToTxn / AddOffsetsToTxn (the first add starts the transaction)
    TransactionState.ONGOING: _IDLE | {TransactionState.ONGOING},
    TransactionState.PREPARE_COMMIT: frozenset({TransactionState.ONGOING}),
    # Kafka 4.x: under TV2 a client unsure of the state may abort from an idle state
    # (EndTxn v5 in Empty or Complete*), so those are valid previous states too
    TransactionState.PREPARE_ABORT: _IDLE
    | {TransactionState.ONGOING, TransactionState.PREPARE_EPOCH_FENCE},
    # every marker was written
    TransactionState.COMPLETE_COMMIT: frozenset({TransactionState.PREPARE_COMMIT}),
    TransactionState.COMPLETE_ABORT: frozenset({TransactionState.PREPARE_ABORT}),
    TransactionState.DEAD: _IDLE,
    TransactionState.PREPARE_EPOCH_FENCE: frozenset({TransactionState.ONGOING}),
}


class TransactionVersion(enum.IntEnum):
    """The `transaction.version` feature level a transition was made under."""

    TV_0 = 0
    # flexible TransactionLogValue v1 with the producer id tagged fields
    TV_1 = 1
    # KIP-890 part 2: the epoch goes up at every commit or abort
    TV_2 = 2

    @property
    def supports_epoch_bump(self) -> bool:
        return self >= TransactionVersion.TV_2

    @property
    def log_value_version(self) -> int:
        """The TransactionLogValue version Kafka writes at this level."""
        return 1 if self >= TransactionVersion.TV_1 else 0
