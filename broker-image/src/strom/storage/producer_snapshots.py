"""Producer state snapshots: ``<offset>.snapshot`` files in a partition's directory.

A snapshot holds every producer's state covering the batches below its offset; it is
written on segment roll and on close, and loading starts from the newest one at or below
the log end, then scans the batch headers after it. Strom's format is JSON, not Kafka's
binary ProducerSnapshot. Version 2 adds each producer's coordinator epoch and the first
offset of its ongoing transaction; a version 1 file is read as "no transactions", which is
what it was (brokers writing v1 refused transactional batches).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from strom.storage import checkpoints

if TYPE_CHECKING:
    from strom.storage.producer_state import ProducerEntry

SUFFIX = ".snapshot"
KEPT = 2
VERSION = 2
_READABLE_VERSIONS = (1, 2)


def file_name(offset: int) -> str:
    return f"{offset:020d}{SUFFIX}"


def offsets(directory: Path, names: Iterable[str] | None = None) -> list[int]:
    """Offsets of the snapshots in ``directory`` (``names``: its listing, if known)."""
    found = []
    for name in os.listdir(directory) if names is None else names:
        stem = name.removesuffix(SUFFIX)
        if stem != name and len(stem) == 20 and stem.isdigit():
            found.append(int(stem))
    return sorted(found)


def write(
    directory: Path, offset: int, producers: Iterable[ProducerEntry], *, durable: bool
) -> None:
    """Persist ``producers`` as the state below ``offset``; keeps the newest few files."""
    document = {
        "version": VERSION,
        "offset": offset,
        "producers": [
            {
                "producer_id": entry.producer_id,
                "epoch": entry.epoch,
                "last_timestamp": entry.last_timestamp,
                "coordinator_epoch": entry.coordinator_epoch,
                "current_txn_first_offset": entry.current_txn_first_offset,
                "batches": [dataclasses.astuple(cached) for cached in entry.batches],
            }
            for entry in producers
        ],
    }
    checkpoints.write_atomically(
        directory / file_name(offset), json.dumps(document).encode(), durable=durable
    )
    for old in offsets(directory)[:-KEPT]:
        (directory / file_name(old)).unlink(missing_ok=True)


@dataclasses.dataclass(frozen=True, slots=True)
class StoredProducer:
    """One producer as a snapshot holds it."""

    producer_id: int
    epoch: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int
    batches: tuple[tuple[int, int, int, int, int], ...]


def read(path: Path) -> list[StoredProducer]:
    """The producers of one snapshot file; raises ValueError, KeyError, TypeError or
    OSError for an unreadable one."""
    document = json.loads(path.read_bytes())
    if document["version"] not in _READABLE_VERSIONS:
        raise ValueError(f"unknown snapshot version {document['version']}")
    return [
        StoredProducer(
            int(producer["producer_id"]),
            int(producer["epoch"]),
            int(producer["last_timestamp"]),
            # Absent from version 1 files: no coordinator seen, no transaction open.
            int(producer.get("coordinator_epoch", -1)),
            int(producer.get("current_txn_first_offset", -1)),
            tuple(_batch_fields(fields) for fields in producer["batches"]),
        )
        for producer in document["producers"]
    ]


def _batch_fields(fields: list[int]) -> tuple[int, int, int, int, int]:
    first_sequence, last_sequence, first_offset, last_offset, timestamp = map(int, fields)
    return first_sequence, last_sequence, first_offset, last_offset, timestamp


def delete_after(directory: Path, offset: int, names: Iterable[str] | None = None) -> None:
    for snapshot_offset in offsets(directory, names):
        if snapshot_offset > offset:
            (directory / file_name(snapshot_offset)).unlink(missing_ok=True)
