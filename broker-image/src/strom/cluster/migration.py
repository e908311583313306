"""Data directories written by Strom 0.1, whose metadata was one JSON document.

On the first start of this release the document (``strom-metadata.json``) becomes
metadata records: a TopicRecord and PartitionRecords per topic (this node the only
replica and leader, leader epoch 0, as 0.1 served them), ConfigRecords for topic
overrides and dynamic broker configs, and a ProducerIdsRecord so that no producer id is
handed out twice. The records are written to the metadata log before the document is
renamed to ``strom-metadata.json.migrated``: a crash in between finds the log non-empty
and only finishes the rename. Partition logs and ``__consumer_offsets`` keep their
format, so committed offsets need nothing.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

from kio.static.primitive import i8, i32, i64

from strom.cluster import records

log = logging.getLogger(__name__)

LEGACY_FILE = "strom-metadata.json"
MIGRATED_SUFFIX = ".migrated"


class MigrationError(Exception):
    """The 0.1 metadata document is unreadable: refuse to start rather than lose topics."""


def legacy_document(log_dir: Path) -> Path | None:
    path = log_dir / LEGACY_FILE
    return path if path.exists() else None


def records_from_legacy(path: Path, node_id: int) -> list[records.MetadataRecord]:
    try:
        document = json.loads(path.read_text())
        return list(_records(document, node_id))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise MigrationError(f"cannot migrate {path}: {error}") from error


def _records(document: dict[str, object], node_id: int) -> list[records.MetadataRecord]:
    entries: list[records.MetadataRecord] = []
    for topic in document.get("topics", []):  # type: ignore[attr-defined]
        name = str(topic["name"])
        topic_id = uuid.UUID(str(topic["topic_id"]))
        entries.append(records.TopicRecord(name=name, topic_id=topic_id))
        for index in range(int(topic["partitions"])):
            entries.append(
                records.PartitionRecord(
                    partition_id=i32(index),
                    topic_id=topic_id,
                    replicas=(i32(node_id),),
                    isr=(i32(node_id),),
                    leader=i32(node_id),
                    leader_epoch=i32(0),
                    partition_epoch=i32(0),
                )
            )
        for key, value in sorted(dict(topic.get("configs", {})).items()):
            entries.append(_config(records.TOPIC_RESOURCE, name, key, str(value)))
    broker_configs = document.get("broker_configs", {})
    for resource_name, configs in sorted(dict(broker_configs).items()):  # type: ignore[call-overload]
        for key, value in sorted(dict(configs).items()):
            entries.append(_config(records.BROKER_RESOURCE, str(resource_name), key, str(value)))
    next_producer_id = int(document.get("next_producer_id", 0))  # type: ignore[call-overload]
    if next_producer_id:
        entries.append(
            records.ProducerIdsRecord(
                broker_id=i32(node_id), broker_epoch=i64(0), next_producer_id=i64(next_producer_id)
            )
        )
    return entries


def mark_migrated(path: Path) -> None:
    path.rename(path.with_name(path.name + MIGRATED_SUFFIX))
    log.info("migrated %s into the metadata log; kept as %s%s", path, path.name, MIGRATED_SUFFIX)


def _config(resource_type: int, resource_name: str, name: str, value: str) -> records.ConfigRecord:
    return records.ConfigRecord(
        resource_type=i8(resource_type), resource_name=resource_name, name=str(name), value=value
    )
