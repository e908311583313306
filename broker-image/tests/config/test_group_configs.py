"""Group configs against the broker's bounds (Kafka's GroupConfig.validateValues)."""

from __future__ import annotations

import pytest
from strom.config import broker, definitions, groups


def test_a_session_must_outlast_the_heartbeat() -> None:
    loose = broker.BrokerConfig({"group.consumer.min.session.timeout.ms": "1000"})
    with pytest.raises(
        definitions.ConfigError,
        match=r"consumer\.session\.timeout\.ms must be greater than consumer\.heartbeat",
    ):
        groups.effective_group_config(loose, {"consumer.session.timeout.ms": "5000"})
    ok = groups.effective_group_config(loose, {"consumer.session.timeout.ms": "5001"})
    assert ok.consumer_session_timeout_ms == 5001


def test_a_group_without_configs_gets_the_brokers_settings() -> None:
    config = broker.BrokerConfig(
        {
            "group.consumer.session.timeout.ms": "50000",
            "group.consumer.heartbeat.interval.ms": "7000",
        }
    )
    group = groups.effective_group_config(config, {})
    assert (group.consumer_session_timeout_ms, group.consumer_heartbeat_interval_ms) == (
        50000,
        7000,
    )
    (entry,) = group.entries(["consumer.session.timeout.ms"])
    assert entry.source == definitions.ConfigSource.DEFAULT_CONFIG
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        (
            "group.consumer.session.timeout.ms",
            "50000",
            definitions.ConfigSource.STATIC_BROKER_CONFIG,
        )
    ]


def test_values_are_stored_canonical() -> None:
    group = groups.effective_group_config(
        broker.BrokerConfig(), {"share.renew.acknowledge.enable": " TRUE "}
    )
    assert group.overrides == {"share.renew.acknowledge.enable": "true"}
