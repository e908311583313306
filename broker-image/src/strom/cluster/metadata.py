"""The cluster metadata a single node keeps: identity, topics, partition counts, topic
configs, and the dynamic broker configs (Kafka keeps those in the metadata log too).

Persisted as one JSON document replaced atomically (write, fsync, rename), so a crash
leaves either the old or the new image. The Raft metadata log will replace this store;
the image it exposes (`MetadataImage`) is what handlers read either way.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

_LEGAL_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
METADATA_FILE = "strom-metadata.json"
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTIONS_TOPIC = "__transaction_state"
# Written only by the broker's own coordinators; clients may not produce to or delete them.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTIONS_TOPIC})
META_PROPERTIES = "meta.properties"


class MetadataError(Exception):
    """Base for refusals of a metadata change; the message is shown to the client."""


class InvalidTopicError(MetadataError):
    pass


class TopicExistsError(MetadataError):
    pass


class UnknownTopicError(MetadataError):
    pass


class InvalidPartitionsError(MetadataError):
    pass


class InvalidReplicationFactorError(MetadataError):
    pass


class InconsistentClusterIdError(MetadataError):
    pass


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
        )
    if not _LEGAL_TOPIC_CHARS.match(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def _collision_key(name: str) -> str:
    # Kafka refuses topics that differ only by '.' versus '_': metric names collide.
    return name.replace(".", "_")


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class MetadataImage:
    cluster_id: str
    node_id: int
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    next_producer_id: int = 0
    # Dynamic broker configs by broker resource name, as Kafka's ConfigRecords name
    # them: "" for the cluster-wide defaults, "<node.id>" for one broker's own.
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)

    def dynamic_broker_configs(self, resource_name: str) -> dict[str, str]:
        return dict(self.broker_configs.get(resource_name, {}))

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None


def new_cluster_id() -> str:
    """Kafka's format: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class MetadataStore:
    """Reads and writes the metadata image in the first log directory."""

    def __init__(self, directory: Path, node_id: int, cluster_id: str | None) -> None:
        self._directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.image = self._load(node_id, cluster_id)
        self._ids_by_topic_id = {t.topic_id: t for t in self.image.topics.values()}

    # Loading and saving --------------------------------------------------------------

    def _load(self, node_id: int, cluster_id: str | None) -> MetadataImage:
        properties = _read_properties(self._directory / META_PROPERTIES)
        stored_cluster = properties.get("cluster.id")
        stored_node = properties.get("node.id")
        if stored_node is not None and int(stored_node) != node_id:
            raise InconsistentClusterIdError(
                f"log directory {self._directory} belongs to node.id {stored_node}, not {node_id}"
            )
        if cluster_id and stored_cluster and cluster_id != stored_cluster:
            raise InconsistentClusterIdError(
                f"cluster.id {cluster_id} does not match {stored_cluster} stored in "
                f"{self._directory / META_PROPERTIES}"
            )
        effective_cluster = stored_cluster or cluster_id or new_cluster_id()
        if not stored_cluster:
            _write_atomically(
                self._directory / META_PROPERTIES,
                f"version=1\ncluster.id={effective_cluster}\nnode.id={node_id}\n".encode(),
            )
        image = MetadataImage(cluster_id=effective_cluster, node_id=node_id)
        path = self._directory / METADATA_FILE
        if path.exists():
            document = json.loads(path.read_text())
            image.next_producer_id = int(document.get("next_producer_id", 0))
            image.broker_configs = {
                str(name): {str(k): str(v) for k, v in configs.items()}
                for name, configs in document.get("broker_configs", {}).items()
            }
            for entry in document.get("topics", []):
                topic = TopicMetadata(
                    name=entry["name"],
                    topic_id=uuid.UUID(entry["topic_id"]),
                    partitions=int(entry["partitions"]),
                    replication_factor=int(entry["replication_factor"]),
                    configs=dict(entry.get("configs", {})),
                )
                image.topics[topic.name] = topic
        return image

    def _save(self) -> None:
        document = {
            "next_producer_id": self.image.next_producer_id,
            "broker_configs": self.image.broker_configs,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "partitions": t.partitions,
                    "replication_factor": t.replication_factor,
                    "configs": t.configs,
                }
                for t in self.image.topics.values()
            ],
        }
        _write_atomically(self._directory / METADATA_FILE, json.dumps(document, indent=1).encode())

    # Changes -------------------------------------------------------------------------

    def check_new_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        validate_topic_name(name)
        if name in self.image.topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        key = _collision_key(name)
        for existing in self.image.topics:
            if _collision_key(existing) == key:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {existing}")
        if partitions < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        if replication_factor < 1:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        if replication_factor > 1:
            # One live broker: more replicas than brokers, as Kafka words it.
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): "
                "The target replication factor of "
                f"{replication_factor} cannot be reached because only 1 broker(s) "
                "are registered."
            )

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
    ) -> TopicMetadata:
        self.check_new_topic(name, partitions, replication_factor)
        topic = TopicMetadata(name, uuid.uuid4(), partitions, replication_factor, dict(configs))
        self.image.topics[name] = topic
        self._ids_by_topic_id[topic.topic_id] = topic
        self._save()
        return topic

    def delete_topic(self, name: str) -> TopicMetadata:
        topic = self.image.topics.pop(name, None)
        if topic is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        self._ids_by_topic_id.pop(topic.topic_id, None)
        self._save()
        return topic

    def check_partition_increase(self, name: str, new_total: int) -> TopicMetadata:
        topic = self.image.topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        if new_total < topic.partitions:
            raise InvalidPartitionsError(
                f"Topic currently has {topic.partitions} partitions, which is higher than "
                f"the requested {new_total}."
            )
        if new_total == topic.partitions:
            raise InvalidPartitionsError(f"Topic already has {topic.partitions} partitions.")
        return topic

    def increase_partitions(self, name: str, new_total: int) -> TopicMetadata:
        topic = self.check_partition_increase(name, new_total)
        topic.partitions = new_total
        self._save()
        return topic

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        """Replace a topic's config overrides (already validated)."""
        topic = self.image.topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"The topic '{name}' does not exist.")
        topic.configs = dict(configs)
        self._save()
        return topic

    def set_broker_configs(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of a broker resource ("" = cluster-wide defaults)."""
        if configs:
            self.image.broker_configs[resource_name] = dict(configs)
        else:
            self.image.broker_configs.pop(resource_name, None)
        self._save()

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._ids_by_topic_id.get(topic_id)

    def allocate_producer_id(self) -> int:
        producer_id = self.image.next_producer_id
        self.image.next_producer_id += 1
        self._save()
        return producer_id


def _read_properties(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    result = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            result[key.strip()] = value.strip()
    return result


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
