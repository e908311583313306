"""Control records: the commit and abort markers that end a transaction in a partition.

Kafka's EndTransactionMarker and ControlRecordType. A marker is a batch of its own, with
the transactional and control attribute bits, the producer's id and epoch, base sequence
-1 and one record whose key is (version int16 = 0, type int16) and whose value is
(version int16 = 0, coordinator epoch int32). Types 0 (ABORT) and 1 (COMMIT) end
transactions; 2-6 are Raft's (leader change, snapshot header and footer, KRaft voters).
"""

from __future__ import annotations

import dataclasses
import struct

from strom.records import batches

ABORT = 0
COMMIT = 1
LEADER_CHANGE = 2

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_CURRENT_VERSION = 0


@dataclasses.dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """What a commit or abort marker says."""

    commit: bool
    coordinator_epoch: int


def build_end_txn_marker(
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = batches.NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """One marker batch, as a partition leader writes it on WriteTxnMarkers."""
    key = _KEY.pack(_CURRENT_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(_CURRENT_VERSION, coordinator_epoch)
    return batches.build_batch(
        [(key, value, (), timestamp_ms)],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=batches.NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
    )


def control_type(key: bytes | None) -> int:
    """The type of a control record from its key; ``CorruptRecordError`` if unreadable."""
    if key is None or len(key) < _KEY.size:
        raise batches.CorruptRecordError(
            f"control record key of {0 if key is None else len(key)} bytes"
        )
    version, record_type = _KEY.unpack_from(key)
    if version < 0:
        raise batches.CorruptRecordError(f"control record key version {version}")
    return int(record_type)


def parse_end_txn_marker(batch: bytes | bytearray | memoryview) -> EndTxnMarker | None:
    """The marker in the control batch at the start of ``batch``, or None for a control
    batch of another type (Raft's). Raises ``CorruptRecordError`` for an unreadable one.

    Kafka reads only the first record of a control batch; so does this."""
    for record in batches.iter_raw_records(batch):
        record_type = control_type(record.key)
        if record_type not in (ABORT, COMMIT):
            return None
        value = record.value
        if value is None or len(value) < _VALUE.size:
            raise batches.CorruptRecordError("end transaction marker without its value")
        _version, coordinator_epoch = _VALUE.unpack_from(value)
        return EndTxnMarker(record_type == COMMIT, coordinator_epoch)
    raise batches.CorruptRecordError("control batch without a record")
