"""The metadata quorum settings: Kafka's own KRaft files, the single-node default, and
every refusal, whose message names the key and where it was set."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from strom.config import broker, definitions, loading
from strom.config.quorum import Voter

KAFKA_CONFIGS = Path(__file__).parent / "kafka_configs"
_CONTROLLER = (
    "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n"
)


def _load(tmp_path: Path, text: str, overrides: tuple[str, ...] = ()) -> broker.BrokerConfig:
    path = tmp_path / "quorum.properties"
    path.write_text(text)
    return loading.load_broker_config(path, list(overrides), {})


# --- loads


def test_no_quorum_settings_is_a_quorum_of_one_as_today() -> None:
    config = broker.BrokerConfig()
    quorum = config.quorum
    assert quorum.is_single_node and quorum.is_voter and quorum.majority == 1
    assert quorum.voters == (Voter(1, "localhost", 9092),)
    assert quorum.static_voters is False
    assert quorum.bootstrap_servers == ()
    assert quorum.controller_listener_name is None
    assert quorum.is_broker and quorum.is_controller
    assert config.controller_listeners == []
    assert [str(x) for x in config.client_listeners] == ["PLAINTEXT://localhost:9092"]
    assert quorum.metadata_log_dir == Path("./.strom-data")


def test_kafka_defaults_of_the_quorum_keys() -> None:
    quorum = broker.BrokerConfig().quorum
    assert (
        quorum.election_timeout_ms,
        quorum.fetch_timeout_ms,
        quorum.election_backoff_max_ms,
        quorum.request_timeout_ms,
        quorum.retry_backoff_ms,
        quorum.append_linger_ms,
    ) == (1000, 2000, 1000, 2000, 20, 25)
    assert (quorum.broker_session_timeout_ms, quorum.broker_heartbeat_interval_ms) == (9000, 2000)
    assert quorum.metadata_log_segment_bytes == 1073741824
    assert quorum.metadata_max_retention_bytes == 104857600
    assert quorum.metadata_log_max_snapshot_interval_ms == 3600000
    assert quorum.metadata_log_max_record_bytes_between_snapshots == 20971520


def test_quorum_keys_are_read(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "controller.quorum.election.timeout.ms=1500\ncontroller.quorum.fetch.timeout.ms=3000\n"
        "controller.quorum.election.backoff.max.ms=700\ncontroller.quorum.request.timeout.ms=900\n"
        "controller.quorum.retry.backoff.ms=50\ncontroller.quorum.append.linger.ms=5\n"
        "broker.session.timeout.ms=6000\nbroker.heartbeat.interval.ms=500\n"
        "log.dirs=/data/a,/data/b\nmetadata.log.segment.bytes=8388608\n",
    )
    quorum = config.quorum
    assert (quorum.election_timeout_ms, quorum.fetch_timeout_ms) == (1500, 3000)
    assert (quorum.election_backoff_max_ms, quorum.request_timeout_ms) == (700, 900)
    assert (quorum.retry_backoff_ms, quorum.append_linger_ms) == (50, 5)
    assert (quorum.broker_session_timeout_ms, quorum.broker_heartbeat_interval_ms) == (6000, 500)
    assert quorum.metadata_log_dir == Path("/data/a")  # the first log dir
    assert quorum.metadata_log_segment_bytes == 8388608
    assert _load(tmp_path, "metadata.log.dir=/meta\n").quorum.metadata_log_dir == Path("/meta")


def test_kafka_4_combined_server_properties_loads_as_a_quorum_of_one() -> None:
    # Kafka 4.0's config/server.properties: a dynamic quorum (KIP-853) that
    # `kafka-storage format --standalone` makes a quorum of this one node.
    path = KAFKA_CONFIGS / "kraft-reconfig-server.properties"
    config = loading.load_broker_config(path, [], {})
    quorum = config.quorum
    assert quorum.node_id == 1 and quorum.is_broker and quorum.is_controller
    assert quorum.voters == (Voter(1, "localhost", 9093),)
    assert quorum.is_single_node and not quorum.static_voters
    assert quorum.bootstrap_servers == (("localhost", 9093),)
    assert quorum.controller_listener_name == "CONTROLLER"
    assert [str(x) for x in config.controller_listeners] == ["CONTROLLER://:9093"]
    assert [x.name for x in config.client_listeners] == ["PLAINTEXT"]
    # The controller listener is advertised in the file (for KIP-853) but not to clients.
    assert [str(x) for x in config.advertised_listeners] == ["PLAINTEXT://localhost:9092"]
    assert quorum.metadata_log_dir == Path("/tmp/kraft-combined-logs")


def test_kafka_static_quorum_server_properties_loads() -> None:
    config = loading.load_broker_config(KAFKA_CONFIGS / "kraft-server.properties", [], {})
    quorum = config.quorum
    assert quorum.voters == (Voter(1, "localhost", 9093),)
    assert quorum.static_voters and quorum.is_single_node
    assert quorum.bootstrap_servers == (("localhost", 9093),)  # the voters' endpoints


def test_kafka_broker_only_properties_loads_without_known_voters() -> None:
    config = loading.load_broker_config(KAFKA_CONFIGS / "kraft-broker.properties", [], {})
    quorum = config.quorum
    assert quorum.node_id == 2 and quorum.is_broker and not quorum.is_controller
    assert quorum.voters == () and not quorum.is_voter and not quorum.is_single_node
    assert quorum.bootstrap_servers == (("localhost", 9093),)
    assert quorum.controller_listener_name == "CONTROLLER"
    assert config.controller_listeners == []  # a broker does not listen for the quorum


def test_kafka_controller_only_properties_loads() -> None:
    config = loading.load_broker_config(KAFKA_CONFIGS / "kraft-controller.properties", [], {})
    assert config.client_listeners == []
    assert config.quorum.voters == (Voter(1, "localhost", 9093),)
    assert not config.quorum.is_broker


def test_a_three_voter_combined_node(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "node.id=2\ncontroller.quorum.voters=1@h1:9093, 2@h2:9093 ,3@[::1]:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n",
    )
    quorum = config.quorum
    assert quorum.voters == (Voter(1, "h1", 9093), Voter(2, "h2", 9093), Voter(3, "::1", 9093))
    assert str(quorum.voters[2]) == "3@[::1]:9093"
    assert quorum.static_voters and quorum.is_voter and not quorum.is_single_node
    assert quorum.majority == 2
    assert quorum.bootstrap_servers == (("h1", 9093), ("h2", 9093), ("::1", 9093))


def test_voters_and_bootstrap_servers_together_kafkas_rule(tmp_path: Path) -> None:
    # The voters define the quorum; the bootstrap servers are only where to look first
    # (they may be a DNS name in front of the controllers).
    config = _load(
        tmp_path,
        "node.id=1\ncontroller.quorum.voters=1@h1:9093,2@h2:9093,3@h3:9093\n"
        "controller.quorum.bootstrap.servers=controllers.example:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n",
    )
    assert config.quorum.voter_ids == (1, 2, 3) and config.quorum.static_voters
    assert config.quorum.bootstrap_servers == (("controllers.example", 9093),)


def test_broker_id_is_node_ids_old_name(tmp_path: Path) -> None:
    assert _load(tmp_path, "broker.id=3\n").node_id == 3
    assert _load(tmp_path, "broker.id=3\n").quorum.voters[0].node_id == 3
    config = _load(tmp_path, "broker.id=3\nnode.id=3\n")
    assert config.node_id == 3 and config.get_optional_int("broker.id") == 3
    assert broker.BrokerConfig({"node.id": "4"}).get_optional_int("broker.id") == 4


def test_building_a_config_does_no_dns_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    # AlterConfigs rebuilds the config on the event loop: the own endpoint's host name
    # (a wildcard listener) is looked up only when the quorum is first asked for.
    def no_dns() -> str:
        raise AssertionError("getfqdn called")

    monkeypatch.setattr(socket, "getfqdn", no_dns)
    config = broker.BrokerConfig({"listeners": "PLAINTEXT://:9092"})
    config.with_dynamic(cluster_defaults={"log.retention.ms": "1000"})
    monkeypatch.setattr(socket, "getfqdn", lambda: "node-a.example")
    assert config.quorum.voters == (Voter(1, "node-a.example", 9092),)


def test_bootstrap_server_naming_this_machine_is_standalone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "node-a")
    monkeypatch.setattr(socket, "getfqdn", lambda: "node-a.example")
    for host in ("node-a", "NODE-A.example", "127.0.0.1"):
        config = _load(tmp_path, _CONTROLLER + f"controller.quorum.bootstrap.servers={host}:9093\n")
        assert config.quorum.voters == (Voter(1, "node-a.example", 9093),)
    with pytest.raises(definitions.ConfigError, match="own controller endpoint"):
        _load(tmp_path, _CONTROLLER + "controller.quorum.bootstrap.servers=node-a:9094\n")


# --- refusals


_BROKER_ONLY = (
    "process.roles=broker\nnode.id=4\nlisteners=PLAINTEXT://:9092\n"
    "controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@c1:9093\n"
)


@pytest.mark.parametrize(
    ("text", "key", "expected", "related"),
    [
        ("process.roles=broker,broker\n", "process.roles", "lists a role twice", ()),
        ("process.roles=broker,zookeeper\n", "process.roles", "must be one of broker", ()),
        ("process.roles=\n", "process.roles", "must not be empty; valid values: broker", ()),
        (
            "node.id=1\nbroker.id=2\n",
            "node.id",
            "must be the same as broker.id, its old name; got 1 and 2",
            ("broker.id=2 set in",),
        ),
        (
            _CONTROLLER + "controller.quorum.voters=1@a:9093,1@b:9093\n",
            "controller.quorum.voters",
            "lists node id 1 more than once",
            (),
        ),
        (
            _CONTROLLER + "node.id=4\ncontroller.quorum.voters=1@a:9093,2@b:9093,3@c:9093\n",
            "controller.quorum.voters",
            "this node (node.id=4) has the controller role but is not a voter;"
            " a controller must be in the set of voters {1,2,3}",
            ("node.id=4 set in", "process.roles=broker,controller by default"),
        ),
        (
            _CONTROLLER + "controller.quorum.voters=1@0.0.0.0:9093\n",
            "controller.quorum.voters",
            "1@0.0.0.0:9093: 0.0.0.0 is not a routable address",
            (),
        ),
        (
            _CONTROLLER + "controller.quorum.voters=1@:9093\n",
            "controller.quorum.voters",
            "expected id@host:port entries (e.g. 1@localhost:9093), got '1@:9093'",
            (),
        ),
        (
            _CONTROLLER + "controller.quorum.voters=one@a:9093\n",
            "controller.quorum.voters",
            "expected id@host:port entries",
            (),
        ),
        (
            _CONTROLLER + "controller.quorum.bootstrap.servers=0.0.0.0:9093\n",
            "controller.quorum.bootstrap.servers",
            "0.0.0.0:9093: 0.0.0.0 is not a routable address",
            (),
        ),
        (
            _CONTROLLER + "controller.quorum.bootstrap.servers=localhost\n",
            "controller.quorum.bootstrap.servers",
            "expected host:port entries",
            (),
        ),
        (
            _CONTROLLER
            + "controller.quorum.bootstrap.servers=localhost:9093,localhost:9095,localhost:9097\n",
            "controller.quorum.bootstrap.servers",
            "without controller.quorum.voters a controller starts as a quorum of one",
            ("listeners=", "controller.listener.names=CONTROLLER set in"),
        ),
        (
            _CONTROLLER + "controller.quorum.bootstrap.servers=controller-0.example:9093\n",
            "controller.quorum.bootstrap.servers",
            "so this must be only this node's own controller endpoint",
            (),
        ),
        (
            "controller.quorum.voters=1@localhost:9093\n",
            "controller.listener.names",
            "must name one of the listeners when a node with the controller role is in a quorum",
            ("controller.quorum.voters=1@localhost:9093 set in",),
        ),
        (
            "controller.listener.names=CONTROLLER\n",
            "controller.listener.names",
            "listener 'CONTROLLER' is not one of the listeners (PLAINTEXT)",
            ("listeners=PLAINTEXT://localhost:9092 by default",),
        ),
        (
            _CONTROLLER + "inter.broker.listener.name=CONTROLLER\n",
            "inter.broker.listener.name",
            "'CONTROLLER' is a controller listener (named in controller.listener.names)",
            ("controller.listener.names=CONTROLLER set in",),
        ),
        (
            "listeners=PLAINTEXT://:9092,INTERNAL://:9094\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT\n"
            "inter.broker.listener.name=INTERNAL\n"
            "advertised.listeners=PLAINTEXT://h:9092\n",
            "inter.broker.listener.name",
            "listener 'INTERNAL' must be one of the advertised.listeners (PLAINTEXT)",
            ("advertised.listeners=PLAINTEXT://h:9092 set in",),
        ),
        (
            "listeners=PLAINTEXT://:9092,FOO://:9094\n",
            "listeners",
            "listener 'FOO' has no security protocol in listener.security.protocol.map",
            ("listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL",),
        ),
        (
            _CONTROLLER + "listener.security.protocol.map=PLAINTEXT:PLAINTEXT\n",
            "listeners",
            "listener 'CONTROLLER' has no security protocol",
            ("listener.security.protocol.map=PLAINTEXT:PLAINTEXT set in",),
        ),
        (
            "listeners=CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n",
            "listeners",
            "there must be at least one broker listener",
            ("controller.listener.names=CONTROLLER set in",),
        ),
        (
            _BROKER_ONLY.replace("PLAINTEXT://:9092", "PLAINTEXT://:9092,CONTROLLER://:9093"),
            "controller.listener.names",
            "listener 'CONTROLLER' must not be in listeners on a broker-only node",
            ("process.roles=broker set in",),
        ),
        (
            _BROKER_ONLY + "advertised.listeners=PLAINTEXT://h:9092,CONTROLLER://h:9093\n",
            "advertised.listeners",
            "must not contain the controller listener 'CONTROLLER'",
            ("controller.listener.names=CONTROLLER set in", "process.roles=broker set in"),
        ),
        (
            _BROKER_ONLY.replace("controller.quorum.voters=1@c1:9093\n", ""),
            "controller.quorum.voters",
            "a broker-only node (process.roles=broker) needs the controller quorum",
            ("controller.quorum.bootstrap.servers (empty) by default",),
        ),
        (
            _BROKER_ONLY.replace("1@c1:9093", "1@c1:9093,4@c4:9093"),
            "controller.quorum.voters",
            "this node (node.id=4) has just the broker role, so it must not be in the set of"
            " voters {1,4}",
            ("node.id=4 set in",),
        ),
        (
            _BROKER_ONLY.replace("controller.listener.names=CONTROLLER\n", ""),
            "controller.listener.names",
            "must name the controllers' listener when process.roles=broker",
            (),
        ),
        (
            _BROKER_ONLY + "listener.security.protocol.map=PLAINTEXT:PLAINTEXT\n",
            "controller.listener.names",
            "controller listener 'CONTROLLER' has no security protocol",
            ("listener.security.protocol.map=PLAINTEXT:PLAINTEXT set in",),
        ),
        (
            _BROKER_ONLY + "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL\n",
            "controller.listener.names",
            "controller listener 'CONTROLLER' uses security protocol SSL",
            (),
        ),
        (
            "process.roles=controller\n" + _CONTROLLER,
            "listeners",
            "must only contain controller listeners (controller.listener.names) when"
            " process.roles=controller; 'PLAINTEXT' is not one",
            (),
        ),
        (
            "controller.quorum.election.timeout.ms=-1\n",
            "controller.quorum.election.timeout.ms",
            "must be at least 0, got -1",
            (),
        ),
        ("broker.heartbeat.interval.ms=0\n", "broker.heartbeat.interval.ms", "at least 1", ()),
        (
            "metadata.log.segment.bytes=1048576\n",
            "metadata.log.segment.bytes",
            "must be at least 8388608",
            (),
        ),
    ],
)
def test_refusals_name_the_key_and_where_it_and_the_others_were_set(
    tmp_path: Path, text: str, key: str, expected: str, related: tuple[str, ...]
) -> None:
    with pytest.raises(definitions.ConfigError) as info:
        _load(tmp_path, text)
    message = str(info.value)
    assert info.value.key == key
    assert message.startswith(f"{key}: "), message
    assert expected in message, message
    assert "\n" not in message
    if f"\n{key}=" in f"\n{text}":  # set in the file: the message says so
        assert f"set in {tmp_path / 'quorum.properties'}" in message, message
    for note in related:
        assert note in message, message


def test_a_refusal_names_an_override_as_the_source(tmp_path: Path) -> None:
    with pytest.raises(definitions.ConfigError) as info:
        _load(
            tmp_path,
            _CONTROLLER + "controller.quorum.voters=1@a:9093,2@b:9093\n",
            ("node.id=3",),
        )
    message = str(info.value)
    assert message.startswith("controller.quorum.voters: this node (node.id=3)")
    assert f"(set in {tmp_path / 'quorum.properties'}; node.id=3 set in --override;" in message
