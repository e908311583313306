"""The metadata log: where committed metadata records live, behind one interface.

The broker's is the Raft quorum's (`metadata_quorum.MetadataQuorum`): `append` returns
once the records are committed and applied to the image. `LocalMetadataLog` is the
partition log ``__cluster_metadata-0`` without a quorum (one fsynced batch per controller
operation, read back with `read_committed`), on which the controller's unit tests run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from strom.cluster import records
from strom.records import batches
from strom.storage import log_config, log_manager, partition_log

log = logging.getLogger(__name__)

METADATA_TOPIC = log_manager.METADATA_TOPIC
METADATA_DIR = f"{METADATA_TOPIC}-0"
# One controller operation is one batch: CreateTopics of 10,000 partitions (the most one
# request may create) with configs is about 600 KB of records.
MAX_BATCH_BYTES = 16 * 1024 * 1024
# The settings of the metadata partition, for this log and the Raft one (replicated_log).
LOG_CONFIG = log_config.LogConfig(
    segment_bytes=64 * 1024 * 1024,
    segment_ms=log_config.NEVER,
    retention_ms=-1,
    retention_bytes=-1,
    max_message_bytes=MAX_BATCH_BYTES,
)


class MetadataLogError(Exception):
    """The records could not be made durable (a disk error): nothing was applied."""


class CorruptMetadataLogError(Exception):
    """The metadata log holds bytes that are not metadata records: refuse to start."""


class MetadataLog(Protocol):
    async def append(self, entries: Sequence[records.MetadataRecord]) -> int:
        """Make `entries` durable and committed, in order; the offset of the last."""
        ...

    def close(self) -> None: ...


class LocalMetadataLog:
    """The metadata log of a quorum of one."""

    def __init__(self, log_dir: Path, now_ms: Callable[[], int]) -> None:
        self.directory = log_dir / METADATA_DIR
        self._now_ms = now_ms
        self._log = partition_log.PartitionLog.open(self.directory, LOG_CONFIG, now_ms)
        # Appends run in worker threads; one at a time, whoever awaits them.
        self._writing = threading.Lock()
        self._log.update_high_watermark(self._log.log_end_offset)

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    async def append(self, entries: Sequence[records.MetadataRecord]) -> int:
        if not entries:
            return self._log.log_end_offset - 1
        now = self._now_ms()
        data = bytearray(
            batches.build_batch([(None, records.encode(entry), [], now) for entry in entries])
        )
        # The fsync runs in a worker thread; the controller serializes appends.
        return await asyncio.to_thread(self._append_durably, data, now)

    def _append_durably(self, data: bytearray, now: int) -> int:
        with self._writing:
            return self._append_locked(data, now)

    def _append_locked(self, data: bytearray, now: int) -> int:
        try:
            headers = batches.validate_produce_batches(memoryview(data), MAX_BATCH_BYTES)
            result = self._log.append(data, headers, leader_epoch=0, now_ms=now)
            self._log.flush()
        except (OSError, batches.RecordsError) as error:
            raise MetadataLogError(
                f"cannot write the metadata log {self.directory}: {error}"
            ) from (error)
        self._log.update_high_watermark(self._log.log_end_offset)
        return result.last_offset

    def read_committed(self) -> Iterator[tuple[int, records.MetadataRecord]]:
        for data in self._log.committed_chunks():
            for header in batches.iter_batches(data):
                batch = memoryview(data)[header.position : header.position + header.size]
                for record in batches.iter_records(batch):
                    if record.value is None:
                        raise CorruptMetadataLogError(
                            f"{self.directory}: a record without a value at offset {record.offset}"
                        )
                    try:
                        decoded = records.decode(record.value)
                    except records.RecordDecodeError as error:
                        raise CorruptMetadataLogError(
                            f"{self.directory}: offset {record.offset}: {error}"
                        ) from None
                    yield record.offset, decoded

    def close(self) -> None:
        self._log.close()
