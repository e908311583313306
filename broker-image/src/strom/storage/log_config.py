"""Per-partition log settings with Kafka's topic-config semantics and defaults.

The server maps Kafka property names (``segment.bytes``, ``retention.ms``, ...) onto these
fields; this module does no property parsing.
"""

from __future__ import annotations

import dataclasses

NEVER = 2**63 - 1  # Kafka's Long.MAX_VALUE: "never" for flush.messages and flush.ms


@dataclasses.dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824  # segment.bytes
    segment_ms: int = 604800000  # segment.ms
    retention_ms: int = 604800000  # retention.ms; -1 keeps segments regardless of age
    retention_bytes: int = -1  # retention.bytes; -1 keeps segments regardless of size
    index_interval_bytes: int = 4096  # index.interval.bytes
    segment_index_bytes: int = 10485760  # segment.index.bytes: caps each index file
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms
    max_message_bytes: int = 1048588  # max.message.bytes: largest batch accepted
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type: or "LogAppendTime"
    cleanup_policy: tuple[str, ...] = ("delete",)  # cleanup.policy: "delete" and/or "compact"
    flush_messages: int = NEVER  # flush.messages: fsync after this many unflushed records
    flush_ms: int = NEVER  # flush.ms: fsync when the last flush is this old
    producer_id_expiration_ms: int = 86400000  # producer.id.expiration.ms (broker-wide)
    delete_retention_ms: int = 86400000  # delete.retention.ms: how long tombstones stay
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = NEVER  # max.compaction.lag.ms

    def __post_init__(self) -> None:
        if self.segment_bytes < 1:
            raise ValueError(f"segment_bytes must be positive, got {self.segment_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"segment_ms must be positive, got {self.segment_ms}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes must be >= 0, got {self.index_interval_bytes}")
        if self.segment_index_bytes < 4:  # Kafka's minimum; below one entry every batch rolls
            raise ValueError(f"segment_index_bytes must be >= 4, got {self.segment_index_bytes}")
        if self.max_message_bytes < 0:
            raise ValueError(f"max_message_bytes must be >= 0, got {self.max_message_bytes}")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"unknown message_timestamp_type {self.message_timestamp_type!r}")
        # empty: neither (Kafka 4's "infinite retention", segments kept for good)
        if not set(self.cleanup_policy) <= {"delete", "compact"}:
            raise ValueError(f"unknown cleanup_policy {self.cleanup_policy!r}")

    @property
    def deletes_old_segments(self) -> bool:
        """Whether time and size retention apply (cleanup.policy includes "delete")."""
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        """Whether the log cleaner keeps only the latest record per key."""
        return "compact" in self.cleanup_policy

    @property
    def uses_log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"
