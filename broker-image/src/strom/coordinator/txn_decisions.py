"""What a transaction coordinator rule answers, and what a failed write of it means.

The rules (Kafka's TransactionCoordinator.scala, 4.3) are pure functions, one module per
request: `txn_init` (InitProducerId), `txn_partitions` (AddPartitionsToTxn,
AddOffsetsToTxn and their verification), `txn_end` (EndTxn and the markers that end a
transaction), `txn_expiry` (timed-out transactions, expired ids) and `txn_queries`
(DescribeTransactions, ListTransactions). Each looks at a `TransactionMetadata` (or None
for an unknown id) and returns one of:

- `Reply`: nothing to write, answer this;
- `Write`: write `transit.to_log_value()` under the id's key; once it is in the log
  (with the coordinator epoch unchanged, else NOT_COORDINATOR) call
  `metadata.complete(transit)`, then answer `then` if it is a Reply, or call
  `txn_end.after_end_txn_written(metadata, then, now_ms)` if it is an `EndTxnCheck`. When
  the write fails, call `write_failed(write, append_error)` and answer what it returns;
- `NeedProducerId`: call again with `new_producer_id=` a fresh id (the allocation is
  asynchronous, so it cannot happen in here). Nothing was changed.

A Write may have set `pending_state` (and, for an epoch fence, the epoch) on the
metadata already: that is Kafka's order too, and why the caller must answer every
Write with either `complete` or `write_failed`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strom.coordinator.txn_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TxnTransit,
)
from strom.coordinator.txn_states import TransactionVersion


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
    """A CompleteX record (`txn_end.Markers.complete`) could not be written: True to retry
    it later with the pending state kept (the log was unavailable), False to give up
    because another coordinator, or this one's next load, will finish the transaction
    (TransactionMarkerChannelManager.tryAppendToLog)."""
    if coordinator_error(append_error) is ErrorCode.coordinator_not_available:
        return True
    metadata.pending_state = None
    return False
