"""The dynamic broker layers in BrokerConfig: precedence, sources and synonyms as Kafka's
DescribeConfigs reports them, for broker configs and the topic configs falling back to them."""

import pytest
from strom.config import broker, definitions, topics

ConfigSource = definitions.ConfigSource


def layered() -> broker.BrokerConfig:
    return broker.BrokerConfig(
        {"log.segment.bytes": "1000", "log.retention.hours": "48", "message.max.bytes": "3000"}
    ).with_dynamic(
        cluster_defaults={"log.segment.bytes": "2000", "log.retention.ms": "60000"},
        per_broker={"log.segment.bytes": "4000"},
    )


def test_per_broker_beats_cluster_default_beats_static_beats_default() -> None:
    config = layered()
    assert config.log_segment_bytes == 4000
    assert config.source("log.segment.bytes") == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert config.log_retention_ms == 60000
    assert config.source("log.retention.ms") == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert config.message_max_bytes == 3000
    assert config.source("message.max.bytes") == ConfigSource.STATIC_BROKER_CONFIG
    assert config.source("num.partitions") == ConfigSource.DEFAULT_CONFIG
    # The static settings are what they were; only the dynamic layers changed.
    assert config.explicit() == {
        "log.segment.bytes": "1000",
        "log.retention.hours": "48",
        "message.max.bytes": "3000",
    }


def test_with_dynamic_keeps_the_other_layer() -> None:
    config = layered().with_dynamic(per_broker={})
    assert config.log_segment_bytes == 2000
    assert config.dynamic_cluster_defaults() == {
        "log.segment.bytes": "2000",
        "log.retention.ms": "60000",
    }
    assert config.dynamic_per_broker() == {}


def test_broker_entry_synonyms_list_every_layer_in_order() -> None:
    (entry,) = layered().entries(["log.segment.bytes"])
    assert entry.value == "4000"
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert [(s.value, s.source) for s in entry.synonyms] == [
        ("4000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("1000", ConfigSource.STATIC_BROKER_CONFIG),
        ("1073741824", ConfigSource.DEFAULT_CONFIG),
    ]


def test_cluster_default_entries_are_only_the_dynamic_defaults() -> None:
    entries = {e.name: e for e in layered().cluster_default_entries()}
    assert set(entries) == {"log.segment.bytes", "log.retention.ms"}
    segment = entries["log.segment.bytes"]
    # The cluster-wide view lists only the cluster-wide defaults, as Kafka's does: not what
    # this broker alone overrides, nor its static or built-in values.
    assert segment.value == "2000"
    assert segment.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert [s.source for s in segment.synonyms] == [ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    assert [e.name for e in layered().cluster_default_entries(["log.retention.ms", "x"])] == [
        "log.retention.ms"
    ]


def test_topic_configs_fall_back_to_the_dynamic_layers() -> None:
    config = topics.effective_topic_config(layered(), {"max.message.bytes": "500"})
    assert config.segment_bytes == 4000
    assert config.source("segment.bytes") == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert config.retention_ms == 60000
    assert config.source("retention.ms") == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    (retention,) = config.entries(["retention.ms"])
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "60000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "48", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert config.max_message_bytes == 500
    assert config.source("max.message.bytes") == ConfigSource.TOPIC_CONFIG


@pytest.mark.parametrize(
    ("layer", "expected"),
    [
        ({"node.id": "2"}, "Cannot update these configs dynamically: node.id"),
        (
            {"log.segment.bytes": "1"},
            "must be at least 14, got 1 (set in the dynamic config of this broker)",
        ),
        ({"no.such.key": "1"}, "unknown configuration key 'no.such.key'"),
    ],
)
def test_dynamic_layers_are_validated(layer: dict[str, str], expected: str) -> None:
    with pytest.raises(definitions.ConfigError) as info:
        broker.BrokerConfig().with_dynamic(per_broker=layer)
    assert expected in str(info.value)
