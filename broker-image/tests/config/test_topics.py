import pytest
from strom.config import broker, definitions, topics

ConfigSource = definitions.ConfigSource


def test_validate_returns_canonical_strings() -> None:
    assert topics.validate_topic_configs(
        {"cleanup.policy": "compact, delete", "retention.ms": " 1000 ", "preallocate": "TRUE"}
    ) == {"cleanup.policy": "compact,delete", "retention.ms": "1000", "preallocate": "true"}


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        ({"retention.msx": "1"}, "unknown topic configuration 'retention.msx' (did you mean"),
        ({"log.retention.ms": "1"}, "it is a broker config; the topic config is 'retention.ms'"),
        ({"retention.ms": None}, "retention.ms: null value not supported"),
        ({"retention.ms": "-2"}, "retention.ms: must be at least -1, got -2"),
        ({"segment.bytes": "13"}, "segment.bytes: must be at least 14, got 13"),
        ({"compression.type": "brotli"}, "compression.type: must be one of"),
        ({"cleanup.policy": "forever"}, "cleanup.policy: must be one of compact, delete"),
        ({"min.cleanable.dirty.ratio": "2"}, "min.cleanable.dirty.ratio: must be between 0 and 1"),
        ({"message.timestamp.type": "Now"}, "message.timestamp.type: must be one of"),
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            "min.compaction.lag.ms: 10 is larger than max.compaction.lag.ms 5",
        ),
    ],
)
def test_validate_errors_name_the_key(configs: dict[str, str | None], expected: str) -> None:
    with pytest.raises(definitions.ConfigError) as info:
        topics.validate_topic_configs(configs)
    assert expected in str(info.value)


def test_kafka_defaults_without_broker_settings() -> None:
    config = topics.effective_topic_config(broker.BrokerConfig(), {})
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.index_interval_bytes == 4096
    assert config.segment_index_bytes == 10485760
    assert config.file_delete_delay_ms == 60000
    assert config.max_message_bytes == 1048588
    assert config.message_timestamp_type == "CreateTime"
    assert config.cleanup_policy == ["delete"]
    assert config.min_insync_replicas == 1
    assert config.flush_messages == 2**63 - 1
    assert config.flush_ms == 2**63 - 1
    for name in definitions.TOPIC_CONFIGS:
        assert config.source(name) == ConfigSource.DEFAULT_CONFIG, name


def test_sources_topic_then_static_broker_then_default() -> None:
    server = broker.BrokerConfig({"log.segment.bytes": "1000", "message.max.bytes": "2000"})
    config = topics.effective_topic_config(server, {"segment.bytes": "500"})
    assert config.segment_bytes == 500
    assert config.source("segment.bytes") == ConfigSource.TOPIC_CONFIG
    assert config.max_message_bytes == 2000
    assert config.source("max.message.bytes") == ConfigSource.STATIC_BROKER_CONFIG
    assert config.source("index.interval.bytes") == ConfigSource.DEFAULT_CONFIG
    [entry] = config.entries(["segment.bytes"])
    assert entry.value == "500"
    assert entry.read_only is False
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("segment.bytes", "500", ConfigSource.TOPIC_CONFIG),
        ("log.segment.bytes", "1000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    ]
    assert config.overrides == {"segment.bytes": "500"}


@pytest.mark.parametrize(
    ("settings", "expected_ms", "expected_source", "first_synonym"),
    [
        ({}, 604800000, ConfigSource.DEFAULT_CONFIG, "log.retention.hours"),
        (
            {"log.retention.hours": "24"},
            86400000,
            ConfigSource.STATIC_BROKER_CONFIG,
            "log.retention.hours",
        ),
        (
            {"log.retention.hours": "24", "log.retention.minutes": "10"},
            600000,
            ConfigSource.STATIC_BROKER_CONFIG,
            "log.retention.minutes",
        ),
        (
            {"log.retention.minutes": "10", "log.retention.ms": "1234"},
            1234,
            ConfigSource.STATIC_BROKER_CONFIG,
            "log.retention.ms",
        ),
        ({"log.retention.ms": "-1"}, -1, ConfigSource.STATIC_BROKER_CONFIG, "log.retention.ms"),
    ],
)
def test_retention_precedence_from_broker(
    settings: dict[str, str], expected_ms: int, expected_source: ConfigSource, first_synonym: str
) -> None:
    config = topics.effective_topic_config(broker.BrokerConfig(settings), {})
    assert config.retention_ms == expected_ms
    assert config.source("retention.ms") == expected_source
    [entry] = config.entries(["retention.ms"])
    assert entry.value == str(expected_ms)
    assert entry.synonyms[0].name == first_synonym


def test_topic_override_beats_broker_retention() -> None:
    server = broker.BrokerConfig({"log.retention.ms": "1000"})
    config = topics.effective_topic_config(server, {"retention.ms": "-1"})
    assert config.retention_ms == -1
    assert config.source("retention.ms") == ConfigSource.TOPIC_CONFIG


def test_segment_ms_from_roll_hours_and_cleanup_policy_from_broker() -> None:
    server = broker.BrokerConfig({"log.roll.hours": "2", "log.cleanup.policy": "compact"})
    config = topics.effective_topic_config(server, {})
    assert config.segment_ms == 7_200_000
    assert config.source("segment.ms") == ConfigSource.STATIC_BROKER_CONFIG
    assert config.cleanup_policy == ["compact"]


def test_flush_ms_falls_back_to_scheduler_interval() -> None:
    server = broker.BrokerConfig({"log.flush.scheduler.interval.ms": "500"})
    assert topics.effective_topic_config(server, {}).flush_ms == 500
    server = broker.BrokerConfig(
        {"log.flush.scheduler.interval.ms": "500", "log.flush.interval.ms": "100"}
    )
    assert topics.effective_topic_config(server, {}).flush_ms == 100


def test_invalid_override_is_rejected() -> None:
    with pytest.raises(definitions.ConfigError, match=r"^flush\.messages: must be at least 1"):
        topics.effective_topic_config(broker.BrokerConfig(), {"flush.messages": "0"})


def test_every_topic_synonym_is_a_broker_config() -> None:
    for definition in definitions.TOPIC_CONFIGS.values():
        for synonym in definition.synonyms:
            assert synonym.name in definitions.BROKER_CONFIGS, synonym
