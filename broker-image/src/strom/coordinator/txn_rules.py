"""The transaction coordinator's rules in one namespace, for the coordinator that runs them.

The rules are pure functions ported from Kafka 4.3, each in the module of its request:
`txn_init` (InitProducerId), `txn_partitions` (AddPartitionsToTxn, AddOffsetsToTxn,
verification), `txn_end` (EndTxn and its markers), `txn_expiry` (timeouts, expired
ids) and `txn_queries` (DescribeTransactions, ListTransactions); `txn_decisions` says
what they answer and what a failed write means. `transactions` uses them all, as
`txn_rules.<name>`; other code imports the module it needs.
"""

from __future__ import annotations

from strom.coordinator.txn_decisions import (
    EndTxnCheck,
    NeedProducerId,
    Reply,
    Write,
    completion_write_failed,
    coordinator_error,
    write_failed,
)
from strom.coordinator.txn_end import (
    Markers,
    after_end_txn_written,
    complete_after_markers,
    end_txn,
)
from strom.coordinator.txn_expiry import TimedOut, abort_timed_out, expire, timed_out
from strom.coordinator.txn_init import init_producer_id
from strom.coordinator.txn_partitions import (
    OFFSETS_TOPIC,
    add_offsets,
    add_partitions,
    verify_partitions,
)
from strom.coordinator.txn_queries import (
    ListedTransaction,
    TransactionDescription,
    TransactionList,
    describe,
    list_transactions,
)

__all__ = [
    "OFFSETS_TOPIC",
    "EndTxnCheck",
    "ListedTransaction",
    "Markers",
    "NeedProducerId",
    "Reply",
    "TimedOut",
    "TransactionDescription",
    "TransactionList",
    "Write",
    "abort_timed_out",
    "add_offsets",
    "add_partitions",
    "after_end_txn_written",
    "complete_after_markers",
    "completion_write_failed",
    "coordinator_error",
    "describe",
    "end_txn",
    "expire",
    "init_producer_id",
    "list_transactions",
    "timed_out",
    "verify_partitions",
    "write_failed",
]
