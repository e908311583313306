"""Topic configs: validation for CreateTopics/AlterConfigs, effective values per topic.

A topic's value for a config is its own override if it has one (TOPIC_CONFIG), else
the broker's value of the config's broker synonyms in Kafka's precedence order
(DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG or STATIC_BROKER_CONFIG when one
was set, else DEFAULT_CONFIG): for example
retention.ms <- log.retention.ms, log.retention.minutes x 60000, log.retention.hours
x 3600000.

One deliberate difference from Kafka's DescribeConfigs: Kafka lists a topic config's
broker synonyms only from its most precise name on, so a broker that sets just
log.retention.hours=24 reports retention.ms=86400000 with source DEFAULT_CONFIG.
Strom reports STATIC_BROKER_CONFIG with the log.retention.hours synonym, which is
where the value really comes from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from strom.config import broker as broker_module
from strom.config import definitions

_TOPIC_NAME_OF_BROKER_CONFIG = {
    d.synonyms[0].name: name for name, d in definitions.TOPIC_CONFIGS.items() if d.synonyms
}


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic config overrides; return them as canonical strings.

    Raises ConfigError naming the key for an unknown name, a null value (Kafka rejects
    those too) or an invalid value."""
    result: dict[str, str] = {}
    parsed: dict[str, definitions.ConfigValue] = {}
    for name, raw in configs.items():
        definition = definitions.TOPIC_CONFIGS.get(name)
        if definition is None:
            raise unknown_topic_key_error(name)
        if raw is None:
            raise definitions.ConfigError(
                f"{name}: null value not supported for topic configs", name
            )
        parsed[name] = definition.parse(raw)
        rendered = definitions.render(definition, parsed[name])
        assert rendered is not None
        result[name] = rendered
    low, high = parsed.get("min.compaction.lag.ms"), parsed.get("max.compaction.lag.ms")
    if isinstance(low, int) and isinstance(high, int) and low > high:
        raise definitions.ConfigError(
            f"min.compaction.lag.ms: {low} is larger than max.compaction.lag.ms {high}",
            "min.compaction.lag.ms",
        )
    return result


def effective_topic_config(
    broker: broker_module.BrokerConfig, topic_overrides: Mapping[str, str]
) -> TopicConfig:
    """Every topic config's value and source for a topic with these overrides."""
    overrides = validate_topic_configs(topic_overrides)
    values: dict[str, definitions.ConfigValue] = {}
    sources: dict[str, definitions.ConfigSource] = {}
    synonyms: dict[str, tuple[definitions.ConfigSynonymEntry, ...]] = {}
    for name, definition in definitions.TOPIC_CONFIGS.items():
        from_broker = _broker_synonyms(broker, definition.synonyms)
        if name in overrides:
            values[name] = definition.parse(overrides[name])
            override = definitions.ConfigSynonymEntry(
                name, overrides[name], definitions.ConfigSource.TOPIC_CONFIG
            )
            from_broker = [override, *from_broker]
        else:
            value, _ = broker.resolve(definition.synonyms)
            values[name] = definition.default_value() if value is None else value
        sources[name] = (
            from_broker[0].source if from_broker else definitions.ConfigSource.DEFAULT_CONFIG
        )
        synonyms[name] = tuple(from_broker)
    return TopicConfig(values, sources, synonyms, overrides)


def _broker_synonyms(
    broker: broker_module.BrokerConfig, synonyms: Iterable[definitions.Synonym]
) -> list[definitions.ConfigSynonymEntry]:
    """The broker synonyms' values layer by layer (dynamic per-broker, dynamic cluster
    default, static), each layer in precedence order, then their defaults."""
    return broker.layered_synonyms(synonym.name for synonym in synonyms)


class TopicConfig:
    """A topic's effective configuration, as the storage layer and DescribeConfigs need it."""

    def __init__(
        self,
        values: Mapping[str, definitions.ConfigValue],
        sources: Mapping[str, definitions.ConfigSource],
        synonyms: Mapping[str, tuple[definitions.ConfigSynonymEntry, ...]],
        overrides: Mapping[str, str],
    ) -> None:
        self._values = dict(values)
        self._sources = dict(sources)
        self._synonyms = dict(synonyms)
        self._overrides = dict(overrides)

    def value(self, name: str) -> definitions.ConfigValue:
        return self._values[name]

    def source(self, name: str) -> definitions.ConfigSource:
        return self._sources[name]

    @property
    def overrides(self) -> dict[str, str]:
        """The topic's own settings (canonical strings), as stored in the metadata."""
        return dict(self._overrides)

    def entries(self, names: Iterable[str] | None = None) -> list[definitions.ConfigEntry]:
        """DescribeConfigs rows for `names` (all when None); unknown names are skipped."""
        wanted = definitions.TOPIC_CONFIGS.keys() if names is None else names
        return [self._entry(name) for name in wanted if name in definitions.TOPIC_CONFIGS]

    def _entry(self, name: str) -> definitions.ConfigEntry:
        definition = definitions.TOPIC_CONFIGS[name]
        return definitions.ConfigEntry(
            name=name,
            value=definitions.render(definition, self._values[name]),
            source=self._sources[name],
            read_only=definition.read_only,
            is_sensitive=definition.is_sensitive,
            type=definition.type,
            documentation=definition.doc,
            synonyms=self._synonyms[name],
        )

    def _int(self, name: str) -> int:
        value = self._values[name]
        assert isinstance(value, int) and not isinstance(value, bool), name
        return value

    # --- typed accessors for the storage layer

    @property
    def segment_bytes(self) -> int:
        return self._int("segment.bytes")

    @property
    def segment_ms(self) -> int:
        return self._int("segment.ms")

    @property
    def segment_jitter_ms(self) -> int:
        return self._int("segment.jitter.ms")

    @property
    def segment_index_bytes(self) -> int:
        return self._int("segment.index.bytes")

    @property
    def index_interval_bytes(self) -> int:
        return self._int("index.interval.bytes")

    @property
    def retention_ms(self) -> int:
        """-1 means unlimited (Kafka treats any negative value so)."""
        return max(self._int("retention.ms"), -1)

    @property
    def retention_bytes(self) -> int:
        """-1 means unlimited (Kafka treats any negative value so)."""
        return max(self._int("retention.bytes"), -1)

    @property
    def file_delete_delay_ms(self) -> int:
        return self._int("file.delete.delay.ms")

    @property
    def max_message_bytes(self) -> int:
        return self._int("max.message.bytes")

    @property
    def message_timestamp_type(self) -> str:
        value = self._values["message.timestamp.type"]
        assert isinstance(value, str)
        return value

    @property
    def cleanup_policy(self) -> list[str]:
        value = self._values["cleanup.policy"]
        assert isinstance(value, tuple)
        return list(value)

    @property
    def compression_type(self) -> str:
        value = self._values["compression.type"]
        assert isinstance(value, str)
        return value

    @property
    def min_insync_replicas(self) -> int:
        return self._int("min.insync.replicas")

    @property
    def flush_messages(self) -> int:
        return self._int("flush.messages")

    @property
    def flush_ms(self) -> int:
        return self._int("flush.ms")

    @property
    def delete_retention_ms(self) -> int:
        return self._int("delete.retention.ms")

    @property
    def min_compaction_lag_ms(self) -> int:
        return self._int("min.compaction.lag.ms")

    @property
    def max_compaction_lag_ms(self) -> int:
        return self._int("max.compaction.lag.ms")

    @property
    def min_cleanable_dirty_ratio(self) -> float:
        value = self._values["min.cleanable.dirty.ratio"]
        assert isinstance(value, float)
        return value


def unknown_topic_key_error(name: str) -> definitions.ConfigError:
    if name in _TOPIC_NAME_OF_BROKER_CONFIG and name not in definitions.TOPIC_CONFIGS:
        return definitions.ConfigError(
            f"unknown topic configuration {name!r}: it is a broker config; the topic config"
            f" is {_TOPIC_NAME_OF_BROKER_CONFIG[name]!r}",
            name,
        )
    return definitions.unknown_key_error(name, definitions.TOPIC_CONFIGS, "topic configuration")
