"""Producer state of one partition, after Kafka's ProducerStateManager and ProducerAppendInfo.

For each producer id: its epoch, the metadata of its last 5 batches, the epoch of the
transaction coordinator that last wrote a marker for it and, while a transaction is open,
the offset of its first batch. A produce retry of one of the 5 batches is answered with the
original offsets instead of being written again.

Sequence rules on append (Kafka >= 2.5):

- a batch from an older epoch than the one known -> ``InvalidProducerEpochError``;
- a batch from a newer epoch must start at sequence 0 -> else ``OutOfOrderSequenceError``;
- within the epoch the base sequence must follow the last one (int32 max wraps to 0);
- an unknown producer id is accepted at any sequence. Its earlier batches may have been
  removed by retention, DeleteRecords or truncation, and rejecting it would wedge the
  producer (the UNKNOWN_PRODUCER_ID problem KIP-360 fixed).

Transactions: a producer's first transactional batch opens its transaction; a plain batch
while one is open is ``InvalidTxnStateError``; a commit or abort marker closes it and yields
a ``CompletedTxn``. A marker from an older epoch, or from a coordinator older than the last
one seen, is refused (``InvalidProducerEpochError``, ``CoordinatorFencedError``). The
open transactions and the completed ones whose marker is not yet below the high watermark
bound the last stable offset (the LSO), up to which read_committed consumers read.

KIP-890 part 1: a transactional batch that would open a transaction here (its producer
has none open) is taken only with the producer's current `VerificationGuard`, given out
before the coordinator was asked and dropped by any marker or by the transaction opening.

Batches with a producer id and a base sequence take part in idempotence; transactional
batches without one (the group coordinator's offset commits) only in transactions. The
state is rebuilt on open from the latest snapshot (``producer_snapshots``) plus a scan of
the batches after it.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from strom.records import batches, control
from strom.storage import producer_snapshots

logger = logging.getLogger(__name__)

MAX_CACHED_BATCHES = 5
NO_OFFSET = -1
NO_COORDINATOR_EPOCH = -1
_INT32_MAX = 2**31 - 1


class InvalidProducerEpochError(Exception):
    """A batch from an older epoch of a producer id (Kafka INVALID_PRODUCER_EPOCH)."""


class OutOfOrderSequenceError(Exception):
    """A batch whose sequence does not follow the producer's last (OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class InvalidTxnStateError(Exception):
    """A plain batch from a producer with an open transaction (INVALID_TXN_STATE)."""


class CoordinatorFencedError(Exception):
    """A marker from an older transaction coordinator (TRANSACTION_COORDINATOR_FENCED)."""


class VerificationGuard:
    """KIP-890: proof that the coordinator confirmed a producer's transaction includes
    this partition, taken before asking it. A marker written meanwhile drops it, so a
    batch that arrives after its transaction ended cannot open a new one here."""

    __slots__ = ()


@dataclasses.dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker: its first data offset and the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclasses.dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    last_timestamp: int
    batches: collections.deque[BatchMetadata] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=MAX_CACHED_BATCHES)
    )
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int = NO_OFFSET

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else batches.NO_SEQUENCE

    @property
    def in_transaction(self) -> bool:
        return self.current_txn_first_offset != NO_OFFSET

    def find_duplicate(
        self, epoch: int, first_sequence: int, last_sequence: int
    ) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for cached in self.batches:
            if cached.first_sequence == first_sequence and cached.last_sequence == last_sequence:
                return cached
        return None

    def set_epoch(self, epoch: int) -> None:
        """A new epoch forgets the batches of the old one (their sequences start over)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()


def tracks(header: batches.BatchHeader) -> bool:
    """Whether a batch takes part in idempotence (has a producer id and a sequence)."""
    return header.has_producer_id and header.base_sequence >= 0


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (
        next_sequence == 0 and last_sequence == _INT32_MAX
    )


def snapshot_name(offset: int) -> str:
    return producer_snapshots.file_name(offset)


class ProducerStateManager:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        # Open transactions by first offset -> producer id. Transactions open at increasing
        # offsets, so insertion order is offset order and the first key is the smallest.
        self._ongoing: dict[int, int] = {}
        # Transactions whose marker is written but not yet below the high watermark.
        self._unreplicated: dict[int, CompletedTxn] = {}
        self._verifications: dict[int, VerificationGuard] = {}

    # -- checks before an append -----------------------------------------------------------

    def check_append(
        self,
        headers: Sequence[batches.BatchHeader],
        verification: VerificationGuard | None = None,
        *,
        verify: bool = False,
    ) -> BatchMetadata | None:
        """Validate the producer fields of data batches about to be appended as leader.

        Returns the cached metadata when a batch repeats one already written (the append
        must then write nothing); raises on epoch, sequence or transaction state errors;
        else returns None. With `verify` (a client's produce), a transactional batch that
        would open a transaction needs the producer's current guard, `verification`.
        """
        # Several batches of one producer in one append must also follow each other.
        pending: dict[int, tuple[int, int]] = {}
        for header in headers:
            if not header.has_producer_id:
                continue
            producer_id = header.producer_id
            entry = self.producers.get(producer_id)
            if entry is not None and entry.in_transaction and not header.is_transactional:
                raise InvalidTxnStateError(
                    f"producer {producer_id} sent a non-transactional batch while its "
                    f"transaction from offset {entry.current_txn_first_offset} is open"
                )
            if (
                verify
                and header.is_transactional
                and (entry is None or not entry.in_transaction)
                and (
                    verification is None or self._verifications.get(producer_id) is not verification
                )
            ):
                raise InvalidTxnStateError(
                    f"producer {producer_id}'s transactional batch is not part of an ongoing "
                    "transaction verified with its coordinator"
                )
            if not tracks(header):
                # A transactional batch without sequences (an offset commit of the group
                # coordinator): only the epoch is checked, as Kafka does for that origin.
                if entry is not None and header.producer_epoch < entry.epoch:
                    raise InvalidProducerEpochError(
                        f"producer {producer_id} epoch {header.producer_epoch} is older than "
                        f"the current epoch {entry.epoch}"
                    )
                continue
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

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Refuse a marker from an older producer epoch or an older coordinator."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {producer_id} has epoch {epoch}, older than the "
                f"current epoch {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise CoordinatorFencedError(
                f"marker for producer {producer_id} comes from coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch}"
            )

    # -- state changes after an append ------------------------------------------------------

    def record(
        self,
        producer_id: int,
        epoch: int,
        metadata: BatchMetadata,
    ) -> None:
        """Remember an idempotent batch written to the log (a new epoch forgets the old
        one's batches)."""
        entry = self._entry(producer_id, epoch, metadata.timestamp)
        entry.batches.append(metadata)
        entry.last_timestamp = metadata.timestamp

    def record_data(
        self, header: batches.BatchHeader, first_offset: int, last_offset: int, timestamp: int
    ) -> None:
        """A data batch written at [first_offset, last_offset]: its sequences, and the
        start of a transaction if it is the producer's first transactional batch."""
        if not header.has_producer_id:
            return
        if tracks(header):
            self.record(
                header.producer_id,
                header.producer_epoch,
                BatchMetadata(
                    header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp
                ),
            )
        elif header.is_transactional:
            self._entry(
                header.producer_id, header.producer_epoch, timestamp
            ).last_timestamp = timestamp
        else:
            return
        if header.is_transactional:
            entry = self.producers[header.producer_id]
            if not entry.in_transaction:
                entry.current_txn_first_offset = first_offset
                self._ongoing[first_offset] = header.producer_id
                self._verifications.pop(header.producer_id, None)  # served its purpose

    def record_marker(
        self,
        producer_id: int,
        epoch: int,
        marker: control.EndTxnMarker,
        offset: int,
        timestamp: int,
    ) -> CompletedTxn | None:
        """A marker written at ``offset``: closes the producer's transaction, if one is
        open (a marker for none changes no offset: a retried marker is harmless). The
        caller indexes an aborted one, then calls ``complete_txn``."""
        entry = self._entry(producer_id, epoch, timestamp)
        self._verifications.pop(producer_id, None)  # a verification before it is stale
        completed = None
        if entry.in_transaction:
            completed = CompletedTxn(
                producer_id, entry.current_txn_first_offset, offset, not marker.commit
            )
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.current_txn_first_offset = NO_OFFSET
        entry.last_timestamp = timestamp
        return completed

    # -- verification (KIP-890 part 1) ------------------------------------------------------

    def needs_verification(self, producer_id: int) -> bool:
        """Whether a transactional batch of this producer would open a transaction here."""
        entry = self.producers.get(producer_id)
        return entry is None or not entry.in_transaction

    def start_verification(self, producer_id: int) -> VerificationGuard:
        """The producer's guard (a new one unless one is outstanding), to take before the
        coordinator is asked and give back with the append."""
        guard = self._verifications.get(producer_id)
        if guard is None:
            guard = self._verifications[producer_id] = VerificationGuard()
        return guard

    def _entry(self, producer_id: int, epoch: int, timestamp: int) -> ProducerEntry:
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, epoch, timestamp)
            self.producers[producer_id] = entry
        else:
            entry.set_epoch(epoch)
        return entry

    def replay_batch(
        self, header: batches.BatchHeader, marker: control.EndTxnMarker | None
    ) -> tuple[CompletedTxn, int] | None:
        """Apply a batch read back from the log (offsets are the stored ones), unchecked as
        a follower's are. For a marker that ends a transaction: the transaction and the
        last stable offset to index it with (the transaction is then complete)."""
        if not header.is_control:
            self.record_data(header, header.base_offset, header.last_offset, header.max_timestamp)
            return None
        if marker is None or not header.has_producer_id:
            return None
        completed = self.record_marker(
            header.producer_id,
            header.producer_epoch,
            marker,
            header.base_offset,
            header.max_timestamp,
        )
        if completed is None:
            return None
        last_stable = self.last_stable_offset_for(completed)
        self.complete_txn(completed)
        return completed, last_stable

    def replay(
        self, stored: Iterable[tuple[batches.BatchHeader, control.EndTxnMarker | None]]
    ) -> Iterator[tuple[CompletedTxn, int]]:
        """``replay_batch`` over batches in log order, yielding the completed transactions."""
        for header, marker in stored:
            done = self.replay_batch(header, marker)
            if done is not None:
                yield done

    # -- the last stable offset --------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction or of the earliest completed
        one whose marker is not yet replicated (None: nothing is unstable)."""
        candidates = []
        if self._ongoing:
            candidates.append(next(iter(self._ongoing)))
        if self._unreplicated:
            candidates.append(min(self._unreplicated))
        return min(candidates) if candidates else None

    def last_stable_offset_for(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` ends: the first offset of another producer's open
        transaction, else the offset after the marker (Kafka's lastStableOffset(txn))."""
        for first_offset, producer_id in self._ongoing.items():
            if producer_id != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        self._ongoing.pop(completed.first_offset, None)
        self._unreplicated[completed.first_offset] = completed

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is below the high watermark stop bounding
        the LSO."""
        if not self._unreplicated:
            return
        for first_offset, completed in list(self._unreplicated.items()):
            if completed.last_offset < high_watermark:
                del self._unreplicated[first_offset]

    @property
    def ongoing_transactions(self) -> dict[int, int]:
        """Open transactions: first offset -> producer id, in offset order."""
        return dict(self._ongoing)

    # -- expiry ------------------------------------------------------------------------------

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers silent for producer.id.expiration.ms (by their batch timestamps),
        except those with an open transaction, as Kafka keeps them."""
        expired = [
            producer_id
            for producer_id, entry in self.producers.items()
            if now_ms - entry.last_timestamp >= expiration_ms and not entry.in_transaction
        ]
        for producer_id in expired:
            del self.producers[producer_id]
        return len(expired)

    def clear(self) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self._verifications.clear()

    # -- snapshots -------------------------------------------------------------------------

    def snapshot_offsets(self, names: Iterable[str] | None = None) -> list[int]:
        """Offsets of the snapshots in the directory (``names``: its listing, if known)."""
        return producer_snapshots.offsets(self.directory, names)

    def write_snapshot(self, offset: int, *, durable: bool = True) -> None:
        """Persist the state covering every batch below ``offset``; keeps the newest few.

        ``durable=False`` skips the fsyncs: a snapshot lost or torn by a machine crash is
        ignored on load, which then starts from an older one."""
        producer_snapshots.write(self.directory, offset, self.producers.values(), durable=durable)

    def load_latest_snapshot(self, max_offset: int, names: Iterable[str] | None = None) -> int:
        """Load the newest readable snapshot at or below ``max_offset``; snapshots above it
        are deleted. Returns the offset the state covers (0 with no snapshot: scan it all).
        ``names``: the directory's listing, if the caller has it."""
        self.clear()
        offsets = self.snapshot_offsets(names)
        producer_snapshots.delete_after(
            self.directory, max_offset, (producer_snapshots.file_name(offset) for offset in offsets)
        )
        for offset in reversed([offset for offset in offsets if offset <= max_offset]):
            path = self.directory / snapshot_name(offset)
            try:
                self._load_snapshot(path)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                logger.warning("ignoring unreadable producer snapshot %s: %s", path, exc)
                self.clear()
                path.unlink(missing_ok=True)
                continue
            return offset
        return 0

    def _load_snapshot(self, path: Path) -> None:
        open_transactions = []
        for stored in producer_snapshots.read(path):
            entry = ProducerEntry(
                stored.producer_id,
                stored.epoch,
                stored.last_timestamp,
                coordinator_epoch=stored.coordinator_epoch,
                current_txn_first_offset=stored.current_txn_first_offset,
            )
            entry.batches.extend(BatchMetadata(*fields) for fields in stored.batches)
            self.producers[entry.producer_id] = entry
            if entry.in_transaction:
                open_transactions.append((entry.current_txn_first_offset, entry.producer_id))
        self._ongoing = dict(sorted(open_transactions))

    def delete_snapshots_after(self, offset: int) -> None:
        producer_snapshots.delete_after(self.directory, offset)
