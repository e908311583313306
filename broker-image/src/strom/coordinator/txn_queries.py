"""DescribeTransactions and ListTransactions: what the coordinator's loaded ids look like
to an admin client (Kafka 4.3's handleDescribeTransactions and TransactionStateManager.
listTransactionStates). Nothing is written."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strom.coordinator.txn_metadata import TransactionMetadata
from strom.coordinator.txn_states import TransactionState


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
