import socket
from pathlib import Path

import pytest
from strom.config import broker, definitions

ConfigSource = definitions.ConfigSource


def test_default_listener_and_advertised() -> None:
    config = broker.BrokerConfig()
    assert config.listeners == [broker.Listener("PLAINTEXT", "localhost", 9092)]
    assert config.advertised_listeners == config.listeners
    assert config.inter_broker_listener_name == "PLAINTEXT"
    assert config.log_dirs == [Path("./.strom-data")]
    assert config.metrics_listener == ("0.0.0.0", 9404)
    assert config.cluster_id is None
    assert config.offsets_topic_replication_factor == 1


def test_listener_parsing_wildcards_ipv6_and_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "getfqdn", lambda: "node-a.example")
    config = broker.BrokerConfig(
        {
            "listeners": "plaintext://:9092, INTERNAL://0.0.0.0:9094,EXTERNAL://[::1]:9095",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,"
            "EXTERNAL:PLAINTEXT",
        }
    )
    assert config.listeners == [
        broker.Listener("PLAINTEXT", "", 9092),
        broker.Listener("INTERNAL", "0.0.0.0", 9094),
        broker.Listener("EXTERNAL", "::1", 9095),
    ]
    assert config.listeners[0].bind_host is None  # all interfaces
    assert str(config.listeners[2]) == "EXTERNAL://[::1]:9095"
    assert [str(x) for x in config.advertised_listeners] == [
        "PLAINTEXT://node-a.example:9092",
        "INTERNAL://node-a.example:9094",
        "EXTERNAL://[::1]:9095",
    ]


def test_explicit_advertised_listeners() -> None:
    config = broker.BrokerConfig(
        {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://broker-0.svc:9092"}
    )
    assert config.advertised_listeners == [broker.Listener("PLAINTEXT", "broker-0.svc", 9092)]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"listeners": "localhost:9092"}, "listeners: expected NAME://host:port"),
        ({"listeners": "PLAINTEXT://:99999"}, "listeners: expected NAME://host:port"),
        ({"listeners": "SSL://:9093"}, "listeners: listener 'SSL' uses security protocol SSL"),
        (
            {"listeners": "SASL_PLAINTEXT://:9093"},
            "not support yet; only PLAINTEXT listeners are supported",
        ),
        ({"listeners": "FOO://:9093"}, "listener 'FOO' has no security protocol"),
        ({"listeners": "PLAINTEXT://:1,PLAINTEXT://:2"}, "'PLAINTEXT' appears more than once"),
        (
            {
                "listeners": "PLAINTEXT://:1,B://:1",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,B:PLAINTEXT",
            },
            "listeners: port 1 is used by more than one listener",
        ),
        ({"advertised.listeners": "OTHER://h:1"}, "advertised.listeners: listener 'OTHER'"),
        (
            {"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
            "advertised.listeners: 0.0.0.0 is not a routable address",
        ),
        ({"listener.security.protocol.map": "A:TLS"}, "unknown security protocol 'TLS'"),
        ({"inter.broker.listener.name": "INTERNAL"}, "inter.broker.listener.name: listener"),
        ({"controller.listener.names": "CONTROLLER"}, "controller.listener.names: listener"),
        ({"log.dirs": ""}, "log.dirs: must list at least one directory"),
        ({"process.roles": ""}, "process.roles: must"),
        ({"process.roles": "broker,broker"}, "process.roles: lists a role twice"),
        (
            {"controller.quorum.voters": "2@a:9093,3@b:9093"},
            "controller.quorum.voters: this node (node.id=1) has the controller role",
        ),
    ],
)
def test_invalid_combinations(settings: dict[str, str], expected: str) -> None:
    with pytest.raises(definitions.ConfigError) as info:
        broker.BrokerConfig(settings)
    assert expected in str(info.value)
    assert info.value.key is not None and str(info.value).startswith(info.value.key)


def test_controller_listener_is_not_advertised_and_defaults_to_plaintext() -> None:
    config = broker.BrokerConfig(
        {
            "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": "1@localhost:9093",
        }
    )
    assert [x.name for x in config.listeners] == ["PLAINTEXT", "CONTROLLER"]
    assert [x.name for x in config.client_listeners] == ["PLAINTEXT"]
    assert config.controller_quorum_voters == [broker.QuorumVoter(1, "localhost", 9093)]


def test_log_dirs_wins_over_log_dir() -> None:
    assert broker.BrokerConfig({"log.dir": "/one"}).log_dirs == [Path("/one")]
    config = broker.BrokerConfig({"log.dir": "/one", "log.dirs": "/two, /three"})
    assert config.log_dirs == [Path("/two"), Path("/three")]


def test_metrics_listener_can_be_disabled() -> None:
    assert broker.BrokerConfig({"metrics.listener": ""}).metrics_listener is None
    config = broker.BrokerConfig({"metrics.listener": "http://127.0.0.1:9999"})
    assert config.metrics_listener == ("127.0.0.1", 9999)


@pytest.mark.parametrize(
    ("settings", "expected_ms"),
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "24"}, 24 * 3_600_000),
        ({"log.retention.minutes": "30", "log.retention.hours": "24"}, 30 * 60_000),
        ({"log.retention.ms": "1000", "log.retention.minutes": "30"}, 1000),
        ({"log.retention.ms": "-5"}, -1),
        ({"log.retention.hours": "-1"}, -1),
    ],
)
def test_retention_precedence(settings: dict[str, str], expected_ms: int) -> None:
    assert broker.BrokerConfig(settings).log_retention_ms == expected_ms


def test_log_roll_ms() -> None:
    assert broker.BrokerConfig().log_roll_ms == 168 * 3_600_000
    assert broker.BrokerConfig({"log.roll.hours": "1"}).log_roll_ms == 3_600_000
    assert broker.BrokerConfig({"log.roll.ms": "5", "log.roll.hours": "1"}).log_roll_ms == 5


def test_entries_cover_every_config_with_kafka_codes() -> None:
    config = broker.BrokerConfig({"num.partitions": "3"})
    entries = {entry.name: entry for entry in config.entries()}
    assert entries.keys() == definitions.BROKER_CONFIGS.keys()
    partitions = entries["num.partitions"]
    assert partitions.value == "3"
    assert partitions.source == ConfigSource.STATIC_BROKER_CONFIG
    assert (int(partitions.source), int(partitions.type)) == (4, 3)  # Kafka's wire codes
    assert partitions.read_only is True
    assert partitions.documentation
    assert [(s.name, s.value, s.source) for s in partitions.synonyms] == [
        ("num.partitions", "3", ConfigSource.STATIC_BROKER_CONFIG),
        ("num.partitions", "1", ConfigSource.DEFAULT_CONFIG),
    ]
    assert entries["log.segment.bytes"].read_only is False  # dynamic in Kafka
    unset = entries["advertised.listeners"]
    assert (unset.value, unset.source, unset.synonyms) == (None, ConfigSource.DEFAULT_CONFIG, ())


def test_entry_synonyms_follow_kafka_order() -> None:
    config = broker.BrokerConfig({"log.retention.minutes": "30"})
    [minutes] = config.entries(["log.retention.minutes"])
    assert minutes.source == ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in minutes.synonyms] == [
        ("log.retention.minutes", "30", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    [hours] = config.entries(["log.retention.hours", "no.such.key"])
    assert [(s.name, s.source) for s in hours.synonyms] == [
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG)
    ]


def test_ignored_compatibility_keys_are_marked() -> None:
    ignored = {d.name for d in definitions.BROKER_CONFIGS.values() if d.ignored}
    assert {"num.network.threads", "num.io.threads"} <= ignored
    assert "ignores it" in definitions.BROKER_CONFIGS["num.io.threads"].doc
