"""A Kafka user's server.properties loads: every Kafka 4.x broker key is accepted, the
ZooKeeper-era keys Kafka 4 removed are ignored with one warning, broker.id and log.dir
are node.id's and log.dirs' older names; anything else is still a typo and an error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from strom.config import definitions, kafka_broker_configs, loading

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "config" / "server.properties"
DOCS = ROOT / "docs" / "kafka-broker-configs.md"

# The single-broker file of the seeds' walk-through (Kafka 2.x, ZooKeeper era), as printed.
SEED_SERVER_PROPERTIES = (
    Path(__file__).parent / "kafka_configs" / "seed-zookeeper-era-server.properties"
).read_text()


def _load(tmp_path: Path, text: str, *overrides: str) -> loading.broker_module.BrokerConfig:
    path = tmp_path / "server.properties"
    path.write_text(text)
    return loading.load_broker_config(path, overrides, {})


def test_the_seeds_zookeeper_era_file_loads_with_one_warning(tmp_path: Path) -> None:
    config = _load(tmp_path, SEED_SERVER_PROPERTIES)
    assert config.node_id == 0
    assert config.log_dirs == [Path("/tmp/kafka-logs")]
    assert config.group_initial_rebalance_delay_ms == 0
    [warning] = config.warnings()
    assert "zookeeper.connect, zookeeper.connection.timeout.ms -> " in warning
    assert "ZooKeeper" in warning
    assert "zookeeper.connect" not in config.explicit()


def test_removed_keys_are_named_once_with_what_replaced_them(tmp_path: Path) -> None:
    text = "port=9093\nhost.name=localhost\nadvertised.host.name=h\nzookeeper.connect=z:2181\n"
    config = _load(tmp_path, text, "log.message.format.version=2.1")
    [warning] = config.warnings()
    assert "host.name, port -> listeners" in warning
    assert "advertised.host.name -> advertised.listeners" in warning
    assert "log.message.format.version -> nothing" in warning
    assert config.removed_keys == [
        "advertised.host.name",
        "host.name",
        "log.message.format.version",
        "port",
        "zookeeper.connect",
    ]
    assert all(entry.name != "port" for entry in config.entries())


def test_a_file_without_removed_keys_has_no_warning(tmp_path: Path) -> None:
    assert _load(tmp_path, "num.partitions=3\n").warnings() == []


def test_every_kafka_broker_key_is_known() -> None:
    names = {row[0] for row in kafka_broker_configs.KAFKA_BROKER_CONFIGS}
    assert len(names) > 300
    assert names <= set(definitions.BROKER_CONFIGS)


def test_a_kafka_key_strom_does_not_use_is_accepted_typed_and_described(tmp_path: Path) -> None:
    config = _load(tmp_path, "offsets.commit.timeout.ms=7000\n")
    definition = definitions.BROKER_CONFIGS["offsets.commit.timeout.ms"]
    assert definition.ignored
    assert config.value("offsets.commit.timeout.ms") == 7000
    [entry] = config.entries(["offsets.commit.timeout.ms"])
    assert entry.value == "7000"
    assert entry.source is definitions.ConfigSource.STATIC_BROKER_CONFIG
    assert entry.type is definitions.ConfigType.INT
    [default] = config.entries(["remote.log.storage.system.enable"])
    assert (default.value, default.source) == ("false", definitions.ConfigSource.DEFAULT_CONFIG)
    with pytest.raises(definitions.ConfigError, match=r"offsets\.commit\.timeout\.ms: expected"):
        _load(tmp_path, "offsets.commit.timeout.ms=soon\n")


def test_a_key_that_is_not_kafkas_is_still_an_error_with_the_closest_name(
    tmp_path: Path,
) -> None:
    with pytest.raises(definitions.ConfigError) as info:
        _load(tmp_path, "offsets.commit.timout.ms=5000\n")
    assert "unknown configuration key 'offsets.commit.timout.ms'" in str(info.value)
    assert "did you mean 'offsets.commit.timeout.ms'?" in str(info.value)


@pytest.mark.parametrize(
    ("settings", "node_id"),
    [("broker.id=4\n", 4), ("node.id=4\n", 4), ("broker.id=4\nnode.id=4\n", 4)],
)
def test_broker_id_is_node_ids_older_name(tmp_path: Path, settings: str, node_id: int) -> None:
    config = _load(tmp_path, settings)
    assert (config.node_id, config.get_int("broker.id")) == (node_id, node_id)


def test_broker_id_and_node_id_that_differ_are_refused(tmp_path: Path) -> None:
    with pytest.raises(definitions.ConfigError, match=r"must be the same as broker\.id"):
        _load(tmp_path, "broker.id=1\nnode.id=2\n")


def test_log_dir_is_the_fallback_of_log_dirs(tmp_path: Path) -> None:
    assert _load(tmp_path, "log.dir=/tmp/a\n").log_dirs == [Path("/tmp/a")]
    both = _load(tmp_path, "log.dir=/tmp/a\nlog.dirs=/tmp/b,/tmp/c\n")
    assert both.log_dirs == [Path("/tmp/b"), Path("/tmp/c")]


def test_the_shipped_server_properties_is_a_broker_and_the_quorum(tmp_path: Path) -> None:
    config = _load(tmp_path, SHIPPED.read_text())
    assert config.warnings() == []
    assert config.node_id == 0
    assert config.process_roles == ["broker", "controller"]
    assert config.group_initial_rebalance_delay_ms == 0
    assert definitions.BROKER_CONFIGS["group.initial.rebalance.delay.ms"].default == "3000"
    assert [str(listener) for listener in config.listeners] == [
        "PLAINTEXT://localhost:9092",
        "CONTROLLER://localhost:19093",
    ]


@pytest.mark.parametrize(
    "edits",
    [
        # Kafka's quickstart of the ZooKeeper era, and a tutorial that also sets port
        "broker.id=1\nlisteners=PLAINTEXT://:9093\nlog.dirs=/tmp/kafka-logs-1\n",
        "listeners=PLAINTEXT://:9093\nbroker.id=1\nport=9093\nlog.dir=/tmp/kafka-logs-1\n",
    ],
)
def test_a_copy_with_another_id_and_listener_joins_as_a_broker(tmp_path: Path, edits: str) -> None:
    config = _load(tmp_path, SHIPPED.read_text() + edits)
    assert config.node_id == 1
    assert config.log_dirs == [Path("/tmp/kafka-logs-1")]
    assert config.process_roles == ["broker"]
    assert not config.quorum.is_controller
    assert [(v.node_id, v.host, v.port) for v in config.quorum.voters] == [(0, "localhost", 19093)]
    joining = [line for line in config.warnings() if "running as a broker only" in line]
    assert len(joining) == 1
    assert "node.id=1 is not one of the controller.quorum.voters (0@localhost:19093)" in joining[0]


def test_a_copy_that_keeps_the_controller_listener_is_refused_as_kafka_does(
    tmp_path: Path,
) -> None:
    edits = "broker.id=1\nlisteners=PLAINTEXT://:9093,CONTROLLER://:19094\n"
    with pytest.raises(definitions.ConfigError, match="a controller must be in the set of voters"):
        _load(tmp_path, SHIPPED.read_text() + edits)


def test_the_docs_list_every_ignored_kafka_key() -> None:
    """Every key Strom ignores is in docs/kafka-broker-configs.md. (A key Strom starts to use
    may stay listed until the docs are regenerated: `kafka_broker_configs.py --docs`.)"""
    documented = set(re.findall(r"^\| `([a-z0-9.]+)` \|", DOCS.read_text(), re.MULTILINE))
    ignored = {name for name, d in definitions.BROKER_CONFIGS.items() if d.ignored}
    assert ignored <= documented, (
        f"not in {DOCS.name}: {sorted(ignored - documented)}; run"
        " PYTHONPATH=broker-image/src python broker-image/tools/kafka_broker_configs.py --docs"
    )
