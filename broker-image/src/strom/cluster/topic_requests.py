"""What a CreateTopics asks of the controller and what it answers, per topic."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from strom.config import broker as broker_config


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    partitions: int = -1  # -1: num.partitions
    replication_factor: int = -1  # -1: default.replication.factor
    assignments: tuple[tuple[int, ...], ...] = ()  # explicit replicas per partition
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicOutcome:
    name: str
    error: Exception | None = None  # topics.MetadataError or config_definitions.ConfigError
    topic_id: uuid.UUID | None = None
    partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


def requested_count(topic: NewTopic, config: broker_config.BrokerConfig) -> int:
    if topic.assignments:
        return len(topic.assignments)
    return config.num_partitions if topic.partitions == -1 else max(topic.partitions, 0)


def without_id(outcome: TopicOutcome) -> TopicOutcome:
    """validate_only: what would be created, with no topic id (Kafka answers a zero id)."""
    return TopicOutcome(
        outcome.name, None, None, outcome.partitions, outcome.replication_factor, outcome.configs
    )
