"""What AlterConfigs and IncrementalAlterConfigs make of a topic's overrides and of the
dynamic broker layers, and how they refuse — pure functions, no broker."""

import re

import pytest
from strom.config import altering, broker, definitions, topics

ConfigSource = definitions.ConfigSource
Op = altering.AlterOp


def change(op: Op, name: str, value: str | None = None) -> altering.ConfigChange:
    return altering.ConfigChange(name, op, value)


def alter_topic(
    stored: dict[str, str],
    *changes: altering.ConfigChange,
    server: broker.BrokerConfig | None = None,
) -> dict[str, str]:
    effective = topics.effective_topic_config(server or broker.BrokerConfig(), stored)
    return altering.altered_topic_configs(stored, changes, effective)


# --- parsing the request


def test_parse_changes_reads_operation_codes() -> None:
    parsed = altering.parse_changes(
        [("retention.ms", 0, "1"), ("segment.ms", 1, None), ("cleanup.policy", 2, "compact")]
    )
    assert [(c.name, c.op, c.value) for c in parsed] == [
        ("retention.ms", Op.SET, "1"),
        ("segment.ms", Op.DELETE, None),
        ("cleanup.policy", Op.APPEND, "compact"),
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([("a", 0, "1"), ("a", 1, None)], "Error due to duplicate config keys: a"),
        ([("retention.ms", 0, None)], "Null value not supported for : retention.ms"),
        ([("retention.ms", 7, "1")], "Unknown operation type 7 for retention.ms"),
    ],
)
def test_malformed_requests_are_invalid_requests(
    raw: list[tuple[str, int, str | None]], expected: str
) -> None:
    with pytest.raises(altering.InvalidConfigRequest, match=expected):
        altering.parse_changes(raw)


# --- topics


def test_set_and_delete_keep_the_other_overrides() -> None:
    stored = {"retention.ms": "1000", "segment.bytes": "4096"}
    assert alter_topic(stored, change(Op.SET, "retention.ms", " 2000 ")) == {
        "retention.ms": "2000",
        "segment.bytes": "4096",
    }
    assert alter_topic(stored, change(Op.DELETE, "retention.ms")) == {"segment.bytes": "4096"}
    # Deleting what is not set is no change, as in Kafka.
    assert alter_topic(stored, change(Op.DELETE, "segment.ms")) == stored


def test_append_starts_from_the_inherited_value_and_skips_duplicates() -> None:
    assert alter_topic({}, change(Op.APPEND, "cleanup.policy", "compact")) == {
        "cleanup.policy": "delete,compact"
    }
    server = broker.BrokerConfig({"log.cleanup.policy": "compact"})
    assert alter_topic({}, change(Op.APPEND, "cleanup.policy", "delete"), server=server) == {
        "cleanup.policy": "compact,delete"
    }
    assert alter_topic(
        {"cleanup.policy": "compact"}, change(Op.APPEND, "cleanup.policy", "compact,delete")
    ) == {"cleanup.policy": "compact,delete"}


def test_subtract_removes_items_down_to_an_empty_policy() -> None:
    stored = {"cleanup.policy": "compact,delete"}
    assert alter_topic(stored, change(Op.SUBTRACT, "cleanup.policy", "delete")) == {
        "cleanup.policy": "compact"
    }
    # Kafka 4: an empty cleanup.policy is allowed and means infinite retention
    assert alter_topic(stored, change(Op.SUBTRACT, "cleanup.policy", "compact,delete")) == {
        "cleanup.policy": ""
    }
    assert alter_topic(stored, change(Op.SET, "cleanup.policy", "")) == {"cleanup.policy": ""}


def test_append_to_a_non_list_config_is_an_invalid_config() -> None:
    with pytest.raises(definitions.ConfigError) as info:
        alter_topic({}, change(Op.APPEND, "retention.ms", "5"))
    assert str(info.value) == "Can't APPEND to key retention.ms because its type is not LIST."
    assert not isinstance(info.value, altering.InvalidConfigRequest)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ([change(Op.SET, "retention.msx", "1")], "unknown topic configuration 'retention.msx'"),
        ([change(Op.DELETE, "log.retention.ms")], "it is a broker config"),
        ([change(Op.SET, "retention.ms", "soon")], "retention.ms: expected an integer (LONG)"),
        (
            [
                change(Op.SET, "min.compaction.lag.ms", "10"),
                change(Op.SET, "max.compaction.lag.ms", "5"),
            ],
            "larger than max.compaction.lag.ms",
        ),
    ],
)
def test_topic_refusals_are_invalid_configs(
    changes: list[altering.ConfigChange], expected: str
) -> None:
    with pytest.raises(definitions.ConfigError, match=re.escape(expected)):
        alter_topic({}, *changes)


def test_legacy_alter_replaces_every_override() -> None:
    assert altering.replaced_topic_configs(
        [("retention.ms", "5"), ("cleanup.policy", "compact")]
    ) == {
        "retention.ms": "5",
        "cleanup.policy": "compact",
    }
    assert altering.replaced_topic_configs([]) == {}
    with pytest.raises(definitions.ConfigError, match="null value not supported"):
        altering.replaced_topic_configs([("retention.ms", None)])
    with pytest.raises(altering.InvalidConfigRequest, match="duplicate config keys"):
        altering.replaced_topic_configs([("retention.ms", "1"), ("retention.ms", "2")])


# --- the dynamic broker layers


def test_broker_layer_changes_are_canonical() -> None:
    server = broker.BrokerConfig()
    layer = altering.altered_broker_layer(
        {"log.retention.ms": "5"},
        [
            change(Op.SET, "log.segment.bytes", " 2048"),
            change(Op.APPEND, "log.cleanup.policy", "compact"),
        ],
        server,
    )
    assert layer == {
        "log.retention.ms": "5",
        "log.segment.bytes": "2048",
        "log.cleanup.policy": "delete,compact",
    }


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ([change(Op.SET, "node.id", "3")], "Cannot update these configs dynamically: node.id"),
        ([change(Op.DELETE, "log.dirs")], "Cannot update these configs dynamically: log.dirs"),
        (
            [change(Op.SET, "listeners", "PLAINTEXT://:1")],
            "Cannot update these configs dynamically",
        ),
        ([change(Op.SET, "log.retention.hours", "1")], "Cannot update these configs dynamically"),
        (
            [change(Op.SET, "retention.ms", "1")],
            "it is a topic config; the broker default is 'log.retention.ms'",
        ),
        (
            [change(Op.SET, "log.segment.bytes", "1")],
            "log.segment.bytes: must be at least 14, got 1",
        ),
        ([change(Op.APPEND, "message.max.bytes", "1")], "because its type is not LIST"),
    ],
)
def test_broker_refusals_are_invalid_requests(
    changes: list[altering.ConfigChange], expected: str
) -> None:
    with pytest.raises(altering.InvalidConfigRequest) as info:
        altering.altered_broker_layer({}, changes, broker.BrokerConfig())
    assert expected in str(info.value)


def test_legacy_broker_alter_replaces_the_layer() -> None:
    assert altering.replaced_broker_layer([("message.max.bytes", "2000")]) == {
        "message.max.bytes": "2000"
    }
    with pytest.raises(altering.InvalidConfigRequest, match="Null value not supported"):
        altering.replaced_broker_layer([("message.max.bytes", None)])
    with pytest.raises(altering.InvalidConfigRequest, match="Cannot update these configs"):
        altering.replaced_broker_layer([("num.partitions", "3")])


def test_stored_layers_that_no_longer_validate_are_dropped_with_a_warning() -> None:
    static = broker.BrokerConfig({"num.partitions": "2"})
    loaded, warnings = altering.load_dynamic_layers(
        static,
        cluster_defaults={"log.retention.ms": "5", "node.id": "7"},
        per_broker={"log.segment.bytes": "1", "message.max.bytes": "100"},
    )
    assert loaded.dynamic_cluster_defaults() == {"log.retention.ms": "5"}
    assert loaded.dynamic_per_broker() == {"message.max.bytes": "100"}
    assert loaded.num_partitions == 2
    assert len(warnings) == 2
    assert any("log.segment.bytes" in w and "this broker's" in w for w in warnings)
    assert any("node.id" in w and "cluster-wide default" in w for w in warnings)
