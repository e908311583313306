"""What the partition's doors answer: typed errors and outcomes of appends and reads,
which the request handlers map to Kafka's error codes, and ListOffsets' special
timestamps."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from strom.protocol import regions


class AppendError(enum.Enum):
    NOT_LEADER = "not_leader"
    NOT_ENOUGH_REPLICAS = "not_enough_replicas"
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = "not_enough_replicas_after_append"
    TIMED_OUT = "timed_out"
    MESSAGE_TOO_LARGE = "message_too_large"
    INVALID_RECORD = "invalid_record"
    CORRUPT_MESSAGE = "corrupt_message"
    TRANSACTIONAL_ID_REQUIRED = "transactional_id_required"
    OUT_OF_ORDER_SEQUENCE = "out_of_order_sequence"
    INVALID_PRODUCER_EPOCH = "invalid_producer_epoch"
    STORAGE_ERROR = "storage_error"
    INVALID_TXN_STATE = "invalid_txn_state"
    TRANSACTION_COORDINATOR_FENCED = "transaction_coordinator_fenced"


class ReadError(enum.Enum):
    NOT_LEADER = "not_leader"
    FENCED_LEADER_EPOCH = "fenced_leader_epoch"
    UNKNOWN_LEADER_EPOCH = "unknown_leader_epoch"
    OFFSET_OUT_OF_RANGE = "offset_out_of_range"
    # a new leader whose high watermark has not reached its epoch's start yet
    OFFSET_NOT_AVAILABLE = "offset_not_available"


class Isolation(enum.IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


# ListOffsets' special timestamps.
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    error: AppendError | None = None
    message: str | None = None
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    duplicate: bool = False
    last_offset: int = -1
    size: int = 0  # bytes appended
    records: int = 0  # records appended


@dataclass(frozen=True, slots=True)
class ReadOutcome:
    error: ReadError | None = None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: regions.RecordRegions | None = None
    # (epoch, end offset) where a follower's log stops agreeing with the leader's
    diverging_epoch: tuple[int, int] | None = None
    # read_committed: (producer id, first offset) of the aborted transactions the records
    # overlap, for the consumer to skip; None for read_uncommitted
    aborted_transactions: tuple[tuple[int, int], ...] | None = None

    @property
    def size(self) -> int:
        return 0 if self.records is None else self.records.size


@dataclass(frozen=True, slots=True)
class FollowerFetch:
    """Who fetches, for a follower's fetch: its id and the epoch of its last batch."""

    replica_id: int
    last_fetched_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ListedOffset:
    error: ReadError | None = None
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1
