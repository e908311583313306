"""The configs in force on this broker: the broker config under its dynamic layers, and
each topic's and each group's effective config, kept current by metadata deltas.

A publisher: a delta that changes a dynamic broker layer rebuilds the broker config;
one that changes a topic's overrides, or any broker layer (topics fall back to broker
settings), drops the cached topic configs, which are resolved again on next use (about
60 µs each, which the produce path would otherwise pay per partition).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.config import altering, definitions
from strom.config import broker as broker_config
from strom.config import groups as group_config
from strom.config import topics as topic_config
from strom.storage import log_config, validator

log = logging.getLogger(__name__)


class ConfigCache:
    name = "config cache"

    def __init__(
        self,
        static: broker_config.BrokerConfig,
        image: Callable[[], images.MetadataImage],
    ) -> None:
        self._static = static
        self._image = image
        self.broker = static
        self._topics: dict[str, topic_config.TopicConfig] = {}
        self._rules: dict[str, validator.Rules] = {}
        self._groups: dict[str, group_config.GroupConfig] = {}
        self._broker_group: group_config.GroupConfig | None = None  # a group without configs
        self._load_layers(image())

    def _load_layers(self, image: images.MetadataImage) -> None:
        loaded, warnings = altering.load_dynamic_layers(
            self._static,
            cluster_defaults=image.dynamic_broker_configs(""),
            per_broker=image.dynamic_broker_configs(str(self._static.node_id)),
        )
        for warning in warnings:
            log.warning("%s", warning)
        self.broker = loaded

    def reload(self, image: images.MetadataImage) -> None:
        """Everything again from `image` (at start-up, once the metadata log is replayed)."""
        self._load_layers(image)
        self._topics.clear()
        self._rules.clear()
        self._groups.clear()
        self._broker_group = None

    def publish(self, delta: deltas.MetadataDelta, image: images.MetadataImage) -> None:
        if delta.changed_broker_configs:
            self.reload(image)
            return
        names = [removed.name for removed in delta.removed_topics.values()]
        for topic_id in delta.changed_topic_configs:
            topic = image.topic_by_id(topic_id)
            if topic is not None:
                names.append(topic.name)
        for name in names:
            self._topics.pop(name, None)
            self._rules.pop(name, None)
        for group_id in delta.changed_group_configs:
            self._groups.pop(group_id, None)

    def group(self, group_id: str) -> group_config.GroupConfig:
        """The effective config of a group (GROUP resource): its own configs over the
        broker's group.* settings, e.g. `consumer_session_timeout_ms`. This is what the
        group coordinator reads; a group with no configs of its own gets the broker's."""
        cached = self._groups.get(group_id)
        if cached is not None:
            return cached
        overrides = self._image().group_overrides(group_id)
        if overrides:
            try:
                cached = group_config.effective_group_config(self.broker, overrides)
                self._groups[group_id] = cached
                return cached
            except definitions.ConfigError as error:
                # Stored under other bounds (the broker's have changed since): the broker's
                # settings then, rather than a group the coordinator cannot run.
                log.warning("group %s: ignoring its stored configs: %s", group_id, error)
        if self._broker_group is None:
            self._broker_group = group_config.effective_group_config(self.broker, {})
        return self._broker_group

    def topic(self, name: str) -> topic_config.TopicConfig:
        """The effective config of a topic (the broker's settings for an unknown one)."""
        cached = self._topics.get(name)
        if cached is None:
            stored = self._image().topics.get(name)
            overrides = stored.configs if stored else {}
            cached = topic_config.effective_topic_config(self.broker, overrides)
            if stored is not None:
                self._topics[name] = cached
        return cached

    def topic_entries(self, overrides: Mapping[str, str | None]) -> list[Any]:
        """The configs a topic with these overrides has (CreateTopics reports them)."""
        valid = topic_config.validate_topic_configs(overrides)
        return list(topic_config.effective_topic_config(self.broker, valid).entries())

    def produce_rules(self, name: str) -> validator.Rules:
        """What a produced batch of this topic must satisfy (the log validator's rules)."""
        rules = self._rules.get(name)
        if rules is None:
            topic = self.topic(name)
            rules = validator.Rules(
                max_message_bytes=topic.max_message_bytes,
                compacted="compact" in topic.cleanup_policy,
                compression_type=topic.compression_type,
            )
            if name in self._image().topics:
                self._rules[name] = rules
        return rules

    def log_config(self, name: str) -> log_config.LogConfig:
        return to_log_config(self.topic(name), self.broker.producer_id_expiration_ms)


def to_log_config(
    topic: topic_config.TopicConfig, producer_id_expiration_ms: int
) -> log_config.LogConfig:
    return log_config.LogConfig(
        segment_bytes=topic.segment_bytes,
        segment_ms=topic.segment_ms,
        retention_ms=topic.retention_ms,
        retention_bytes=topic.retention_bytes,
        index_interval_bytes=topic.index_interval_bytes,
        segment_index_bytes=topic.segment_index_bytes,
        file_delete_delay_ms=topic.file_delete_delay_ms,
        max_message_bytes=topic.max_message_bytes,
        message_timestamp_type=topic.message_timestamp_type,
        cleanup_policy=tuple(topic.cleanup_policy),
        delete_retention_ms=topic.delete_retention_ms,
        min_cleanable_dirty_ratio=topic.min_cleanable_dirty_ratio,
        min_compaction_lag_ms=topic.min_compaction_lag_ms,
        max_compaction_lag_ms=topic.max_compaction_lag_ms,
        flush_messages=topic.flush_messages,
        flush_ms=topic.flush_ms,
        producer_id_expiration_ms=producer_id_expiration_ms,
    )
