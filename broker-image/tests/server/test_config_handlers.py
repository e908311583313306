"""AlterConfigs, IncrementalAlterConfigs and DescribeConfigs through the real dispatcher,
every version as bytes on the wire: what is refused with which code, what validate_only
leaves alone, what the open logs see at once, and what a restarted broker still has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from broker_calls import call, create_topic, new_broker
from kio.schema.errors import ErrorCode
from strom.config import definitions
from strom.protocol import apis
from strom.server import broker as broker_module

ConfigSource = definitions.ConfigSource
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CONFIGS = 33, 44, 32


async def incremental(
    broker: broker_module.Broker,
    resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
    *,
    version: int = 1,
    validate_only: bool = False,
) -> list[tuple[ErrorCode, str | None]]:
    body = {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [
                    {"name": key, "config_operation": op, "value": value}
                    for key, op, value in configs
                ],
            }
            for kind, name, configs in resources
        ],
        "validate_only": validate_only,
    }
    response = await call(broker, INCREMENTAL_ALTER_CONFIGS, version, body)
    return [(r.error_code, r.error_message) for r in response.responses]


async def legacy(
    broker: broker_module.Broker,
    resources: list[tuple[int, str, dict[str, str | None]]],
    *,
    version: int = 2,
    validate_only: bool = False,
) -> list[tuple[ErrorCode, str | None]]:
    body = {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [{"name": key, "value": value} for key, value in configs.items()],
            }
            for kind, name, configs in resources
        ],
        "validate_only": validate_only,
    }
    response = await call(broker, ALTER_CONFIGS, version, body)
    return [(r.error_code, r.error_message) for r in response.responses]


async def describe(broker: broker_module.Broker, kind: int, name: str) -> dict[str, Any]:
    body = {
        "resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    response = await call(broker, DESCRIBE_CONFIGS, 4, body)
    (result,) = response.results
    assert result.error_code == ErrorCode.none, result.error_message
    return {config.name: config for config in result.configs}


OK = (ErrorCode.none, None)


@pytest.mark.parametrize("version", [0, 1])
async def test_incremental_set_applies_to_the_open_logs_at_once(
    broker: broker_module.Broker, version: int
) -> None:
    answer = await incremental(
        broker,
        [
            (
                TOPIC,
                "orders",
                [
                    ("retention.ms", SET, "1000"),
                    ("segment.bytes", SET, "4096"),
                    ("cleanup.policy", APPEND, "compact"),
                    ("message.timestamp.type", SET, "LogAppendTime"),
                ],
            )
        ],
        version=version,
    )
    assert answer == [OK]
    for index in (0, 1):
        log_config = broker.replicas.partition("orders", index).log.config
        assert log_config.retention_ms == 1000
        assert log_config.segment_bytes == 4096
        assert log_config.cleanup_policy == ("delete", "compact")
        assert log_config.message_timestamp_type == "LogAppendTime"
    described = await describe(broker, TOPIC, "orders")
    assert described["retention.ms"].value == "1000"
    assert described["retention.ms"].config_source == ConfigSource.TOPIC_CONFIG
    assert described["cleanup.policy"].value == "delete,compact"

    assert await incremental(broker, [(TOPIC, "orders", [("retention.ms", DELETE, None)])]) == [OK]
    assert broker.replicas.partition("orders", 0).log.config.retention_ms == 604800000
    assert broker.configs.topic("orders").source("retention.ms") == ConfigSource.DEFAULT_CONFIG
    assert broker.metadata.image.topics["orders"].configs == {
        "segment.bytes": "4096",
        "cleanup.policy": "delete,compact",
        "message.timestamp.type": "LogAppendTime",
    }


async def test_produce_limits_follow_a_topic_change(broker: broker_module.Broker) -> None:
    """max.message.bytes and min.insync.replicas are read per produce from the cached
    topic config, which an alter must drop."""
    assert broker.configs.topic("orders").max_message_bytes == 1048588
    await incremental(
        broker,
        [(TOPIC, "orders", [("max.message.bytes", SET, "100"), ("min.insync.replicas", SET, "2")])],
    )
    assert broker.configs.topic("orders").max_message_bytes == 100
    assert broker.configs.topic("orders").min_insync_replicas == 2


async def test_validate_only_changes_nothing(broker: broker_module.Broker) -> None:
    answer = await incremental(
        broker, [(TOPIC, "orders", [("retention.ms", SET, "1000")])], validate_only=True
    )
    assert answer == [OK]
    assert broker.metadata.image.topics["orders"].configs == {}
    assert broker.replicas.partition("orders", 0).log.config.retention_ms == 604800000
    # ... but it still refuses what it would refuse.
    refused = await incremental(
        broker, [(TOPIC, "orders", [("retention.ms", SET, "soon")])], validate_only=True
    )
    assert refused[0][0] == ErrorCode.invalid_config
    answer = await incremental(
        broker, [(BROKER, "", [("log.retention.ms", SET, "5")])], validate_only=True
    )
    assert answer == [OK]
    assert broker.config.dynamic_cluster_defaults() == {}


async def test_refusals_carry_kafkas_error_codes(broker: broker_module.Broker) -> None:
    requests: list[tuple[int, str, list[tuple[str, int, str | None]]]] = [
        (TOPIC, "missing", [("retention.ms", SET, "1")]),
        (TOPIC, "orders", [("retention.ms", SET, "soon")]),
        (TOPIC, "orders", [("retention.ms", APPEND, "1")]),
        (BROKER, "1", [("node.id", SET, "2")]),
        (BROKER, "2", [("log.retention.ms", SET, "1")]),
        (BROKER, "one", [("log.retention.ms", SET, "1")]),
        (BROKER_LOGGER, "1", [("root", SET, "DEBUG")]),
    ]
    answers = [(await incremental(broker, [resource]))[0] for resource in requests]
    codes = [code for code, _ in answers]
    assert codes == [
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_config,
        ErrorCode.invalid_config,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
    ]
    messages = [message or "" for _, message in answers]
    assert messages[0] == "The topic 'missing' does not exist."
    assert "retention.ms: expected an integer" in messages[1]
    assert "Cannot update these configs dynamically: node.id" in messages[3]
    assert messages[4] == "Unexpected broker id, expected 1, but received 2"
    assert messages[5] == "Node id must be an integer, but it is: one"


async def test_a_resource_named_twice_is_refused_and_others_still_apply(
    broker: broker_module.Broker,
) -> None:
    await create_topic(broker, "audit", 1, {})
    answers = await incremental(
        broker,
        [
            (TOPIC, "orders", [("retention.ms", SET, "1")]),
            (TOPIC, "audit", [("retention.ms", SET, "2")]),
            (TOPIC, "orders", [("retention.ms", SET, "3")]),
        ],
    )
    assert (
        answers[0]
        == answers[2]
        == (
            ErrorCode.invalid_request,
            "Each resource must appear at most once.",
        )
    )
    assert answers[1] == OK
    assert broker.configs.topic("audit").retention_ms == 2
    assert broker.configs.topic("orders").retention_ms == 604800000


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_legacy_alter_replaces_all_overrides(
    broker: broker_module.Broker, version: int
) -> None:
    await incremental(broker, [(TOPIC, "orders", [("segment.bytes", SET, "4096")])])
    answer = await legacy(broker, [(TOPIC, "orders", {"retention.ms": "1000"})], version=version)
    assert answer == [OK]
    assert broker.metadata.image.topics["orders"].configs == {"retention.ms": "1000"}
    assert broker.replicas.partition("orders", 1).log.config.segment_bytes == 1073741824
    assert broker.replicas.partition("orders", 1).log.config.retention_ms == 1000
    refused = await legacy(broker, [(TOPIC, "orders", {"retention.ms": None})], version=version)
    assert refused[0][0] == ErrorCode.invalid_config
    refused = await legacy(broker, [(BROKER, "1", {"log.dirs": "/x"})], version=version)
    assert refused[0][0] == ErrorCode.invalid_request


async def test_cluster_default_applies_to_every_topic_without_an_override(
    broker: broker_module.Broker,
) -> None:
    await create_topic(broker, "pinned", 1, {"segment.bytes": "9000"})
    answer = await incremental(
        broker,
        [(BROKER, "", [("log.segment.bytes", SET, "5000"), ("message.max.bytes", SET, "700")])],
    )
    assert answer == [OK]
    assert broker.replicas.partition("orders", 0).log.config.segment_bytes == 5000
    assert broker.replicas.partition("pinned", 0).log.config.segment_bytes == 9000
    assert broker.configs.topic("orders").max_message_bytes == 700
    described = await describe(broker, TOPIC, "orders")
    assert described["segment.bytes"].config_source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG

    defaults = await describe(broker, BROKER, "")
    assert set(defaults) == {"log.segment.bytes", "message.max.bytes"}
    assert defaults["log.segment.bytes"].value == "5000"

    # This broker's own setting wins over the cluster-wide one.
    assert await incremental(broker, [(BROKER, "1", [("log.segment.bytes", SET, "6000")])]) == [OK]
    assert broker.replicas.partition("orders", 1).log.config.segment_bytes == 6000
    own = await describe(broker, BROKER, "1")
    assert own["log.segment.bytes"].value == "6000"
    assert own["log.segment.bytes"].config_source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert [s.source for s in own["log.segment.bytes"].synonyms] == [
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]
    assert own["node.id"].read_only and not own["log.segment.bytes"].read_only

    assert await incremental(broker, [(BROKER, "", [("log.segment.bytes", DELETE, None)])]) == [OK]
    assert broker.config.dynamic_cluster_defaults() == {"message.max.bytes": "700"}


async def test_a_restarted_broker_keeps_what_was_altered(tmp_path: Path) -> None:
    first = new_broker(tmp_path, **{"num.partitions": "2"})
    await first.load()
    await create_topic(first, "orders", 1, {})
    await incremental(first, [(TOPIC, "orders", [("retention.ms", SET, "1234")])])
    await incremental(first, [(BROKER, "", [("log.retention.bytes", SET, "99999")])])
    await incremental(first, [(BROKER, "1", [("message.max.bytes", SET, "5555")])])
    first.close()

    second = new_broker(tmp_path, **{"num.partitions": "2"})
    try:
        await second.load()
        assert second.config.dynamic_cluster_defaults() == {"log.retention.bytes": "99999"}
        assert second.config.dynamic_per_broker() == {"message.max.bytes": "5555"}
        topic = second.configs.topic("orders")
        assert topic.retention_ms == 1234
        assert topic.source("retention.ms") == ConfigSource.TOPIC_CONFIG
        assert topic.retention_bytes == 99999
        assert topic.max_message_bytes == 5555
    finally:
        second.close()


def test_the_new_apis_are_advertised() -> None:
    assert apis.SUPPORTED_VERSIONS[apis.ApiKey.ALTER_CONFIGS] == (0, 2)
    assert apis.SUPPORTED_VERSIONS[apis.ApiKey.INCREMENTAL_ALTER_CONFIGS] == (0, 1)
