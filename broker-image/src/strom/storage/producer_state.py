"""Idempotent-producer state of one partition, after Kafka's ProducerStateManager.

For each producer id: its epoch and the metadata of its last 5 batches. A produce retry of
one of those 5 is answered with the original offsets instead of being written again.

Sequence rules on append (Kafka >= 2.5):

- a batch from an older epoch than the one known -> ``InvalidProducerEpochError``;
- a batch from a newer epoch must start at sequence 0 -> else ``OutOfOrderSequenceError``;
- within the epoch the base sequence must follow the last one (int32 max wraps to 0);
- an unknown producer id is accepted at any sequence. Its earlier batches may have been
  removed by retention, DeleteRecords or truncation, and rejecting it would wedge the
  producer (the UNKNOWN_PRODUCER_ID problem KIP-360 fixed).

Only batches with a producer id and a base sequence take part; control batches (sequence
-1) and plain producers are ignored. The state is rebuilt on open from the latest snapshot
``<offset>.snapshot`` (written on roll and close) plus a scan of the batch headers after it.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from strom.records import batches
from strom.storage import checkpoints

logger = logging.getLogger(__name__)

MAX_CACHED_BATCHES = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_KEPT = 2
_SNAPSHOT_VERSION = 1
_INT32_MAX = 2**31 - 1


class InvalidProducerEpochError(Exception):
    """A batch from an older epoch of a producer id (Kafka INVALID_PRODUCER_EPOCH)."""


class OutOfOrderSequenceError(Exception):
    """A batch whose sequence does not follow the producer's last (OUT_OF_ORDER_SEQUENCE_NUMBER)."""


@dataclasses.dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclasses.dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    last_timestamp: int
    batches: collections.deque[BatchMetadata] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=MAX_CACHED_BATCHES)
    )

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else batches.NO_SEQUENCE

    def find_duplicate(
        self, epoch: int, first_sequence: int, last_sequence: int
    ) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for cached in self.batches:
            if cached.first_sequence == first_sequence and cached.last_sequence == last_sequence:
                return cached
        return None


def tracks(header: batches.BatchHeader) -> bool:
    """Whether a batch takes part in idempotence (has a producer id and a sequence)."""
    return header.has_producer_id and header.base_sequence >= 0


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (
        next_sequence == 0 and last_sequence == _INT32_MAX
    )


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}

    def check_append(self, headers: Sequence[batches.BatchHeader]) -> BatchMetadata | None:
        """Validate the producer fields of batches about to be appended.

        Returns the cached metadata when a batch repeats one already written (the append
        must then write nothing); raises on epoch or sequence errors; else returns None.
        """
        # Several batches of one producer in one append must also follow each other.
        pending: dict[int, tuple[int, int]] = {}
        for header in headers:
            if not tracks(header):
                continue
            producer_id = header.producer_id
            entry = self.producers.get(producer_id)
            if entry is not None:
                duplicate = entry.find_duplicate(
                    header.producer_epoch, header.base_sequence, header.last_sequence
                )
                if duplicate is not None:
                    return duplicate
            if producer_id in pending:
                current_epoch, current_last_sequence = pending[producer_id]
            elif entry is not None:
                current_epoch, current_last_sequence = entry.epoch, entry.last_sequence
            else:
                pending[producer_id] = (header.producer_epoch, header.last_sequence)
                continue
            if header.producer_epoch < current_epoch:
                raise InvalidProducerEpochError(
                    f"producer {producer_id} epoch {header.producer_epoch} is older than "
                    f"the current epoch {current_epoch}"
                )
            if header.producer_epoch > current_epoch:
                if header.base_sequence != 0:
                    raise OutOfOrderSequenceError(
                        f"producer {producer_id} new epoch {header.producer_epoch} starts at "
                        f"sequence {header.base_sequence}, expected 0"
                    )
            elif not in_sequence(current_last_sequence, header.base_sequence):
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} epoch {header.producer_epoch}: sequence "
                    f"{header.base_sequence} does not follow {current_last_sequence}"
                )
            pending[producer_id] = (header.producer_epoch, header.last_sequence)
        return None

    def record(
        self,
        producer_id: int,
        epoch: int,
        metadata: BatchMetadata,
    ) -> None:
        """Remember a batch written to the log (a new epoch forgets the old one's batches)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, epoch, metadata.timestamp)
            self.producers[producer_id] = entry
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(metadata)
        entry.last_timestamp = metadata.timestamp

    def record_stored(self, header: batches.BatchHeader) -> None:
        """Replay a batch header read back from the log (offsets are the stored ones)."""
        if not tracks(header):
            return
        self.record(
            header.producer_id,
            header.producer_epoch,
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            ),
        )

    def replay(self, headers: Iterable[batches.BatchHeader]) -> None:
        for header in headers:
            self.record_stored(header)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers silent for producer.id.expiration.ms (by their batch timestamps)."""
        expired = [
            producer_id
            for producer_id, entry in self.producers.items()
            if now_ms - entry.last_timestamp >= expiration_ms
        ]
        for producer_id in expired:
            del self.producers[producer_id]
        return len(expired)

    # -- snapshots -------------------------------------------------------------------------

    def snapshot_offsets(self, names: Iterable[str] | None = None) -> list[int]:
        """Offsets of the snapshots in the directory (``names``: its listing, if known)."""
        offsets = []
        for name in os.listdir(self.directory) if names is None else names:
            stem = name.removesuffix(SNAPSHOT_SUFFIX)
            if stem != name and len(stem) == 20 and stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def write_snapshot(self, offset: int, *, durable: bool = True) -> None:
        """Persist the state covering every batch below ``offset``; keeps the newest few.

        ``durable=False`` skips the fsyncs: a snapshot lost or torn by a machine crash is
        ignored on load, which then starts from an older one."""
        document = {
            "version": _SNAPSHOT_VERSION,
            "offset": offset,
            "producers": [
                {
                    "producer_id": entry.producer_id,
                    "epoch": entry.epoch,
                    "last_timestamp": entry.last_timestamp,
                    "batches": [dataclasses.astuple(cached) for cached in entry.batches],
                }
                for entry in self.producers.values()
            ],
        }
        checkpoints.write_atomically(
            self.directory / snapshot_name(offset), json.dumps(document).encode(), durable=durable
        )
        for old in self.snapshot_offsets()[:-SNAPSHOTS_KEPT]:
            (self.directory / snapshot_name(old)).unlink(missing_ok=True)

    def load_latest_snapshot(self, max_offset: int, names: Iterable[str] | None = None) -> int:
        """Load the newest readable snapshot at or below ``max_offset``; snapshots above it
        are deleted. Returns the offset the state covers (0 with no snapshot: scan it all).
        ``names``: the directory's listing, if the caller has it."""
        self.producers.clear()
        offsets = self.snapshot_offsets(names)
        for offset in offsets:
            if offset > max_offset:
                (self.directory / snapshot_name(offset)).unlink(missing_ok=True)
        for offset in reversed([offset for offset in offsets if offset <= max_offset]):
            path = self.directory / snapshot_name(offset)
            try:
                self._load_snapshot(path)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                logger.warning("ignoring unreadable producer snapshot %s: %s", path, exc)
                self.producers.clear()
                path.unlink(missing_ok=True)
                continue
            return offset
        return 0

    def _load_snapshot(self, path: Path) -> None:
        document = json.loads(path.read_bytes())
        if document["version"] != _SNAPSHOT_VERSION:
            raise ValueError(f"unknown snapshot version {document['version']}")
        for producer in document["producers"]:
            entry = ProducerEntry(
                int(producer["producer_id"]),
                int(producer["epoch"]),
                int(producer["last_timestamp"]),
            )
            for fields in producer["batches"]:
                entry.batches.append(BatchMetadata(*(int(field) for field in fields)))
            self.producers[entry.producer_id] = entry

    def delete_snapshots_after(self, offset: int) -> None:
        for snapshot_offset in self.snapshot_offsets():
            if snapshot_offset > offset:
                (self.directory / snapshot_name(snapshot_offset)).unlink(missing_ok=True)
