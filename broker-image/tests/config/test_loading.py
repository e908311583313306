from pathlib import Path

import pytest
from strom.config import definitions, loading


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(text)
    return path


def test_defaults_without_any_source() -> None:
    config = loading.load_broker_config(None, [], {})
    assert config.node_id == 1
    assert config.num_partitions == 1
    assert config.source("num.partitions") is definitions.ConfigSource.DEFAULT_CONFIG
    assert config.explicit() == {}


def test_precedence_file_then_env_then_override(tmp_path: Path) -> None:
    path = _file(tmp_path, "num.partitions=2\ndefault.replication.factor=2\nnode.id=5\n")
    environ = {"STROM_NUM_PARTITIONS": "3", "STROM_DEFAULT_REPLICATION_FACTOR": "3"}
    config = loading.load_broker_config(path, ["num.partitions=4"], environ)
    assert config.num_partitions == 4
    assert config.origin("num.partitions") == "--override"
    assert config.default_replication_factor == 3
    assert config.origin("default.replication.factor") == (
        "environment variable STROM_DEFAULT_REPLICATION_FACTOR"
    )
    assert config.node_id == 5
    assert config.origin("node.id") == str(path)
    for key in ("num.partitions", "default.replication.factor", "node.id"):
        assert config.source(key) is definitions.ConfigSource.STATIC_BROKER_CONFIG


def test_env_var_mapping() -> None:
    assert loading.env_var_name("log.dirs") == "STROM_LOG_DIRS"
    config = loading.load_broker_config(
        None, [], {"STROM_LOG_DIRS": "/a,/b", "PATH": "/bin", "KAFKA_HEAP_OPTS": "x"}
    )
    assert config.log_dirs == [Path("/a"), Path("/b")]


def test_unknown_env_var_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(definitions.ConfigError) as info:
        loading.load_broker_config(None, [], {"STROM_LOG_DIR_S": "/a"})
    assert "STROM_LOG_DIR_S" in str(info.value)
    assert "did you mean STROM_LOG_DIRS" in str(info.value)


@pytest.mark.parametrize(
    "name",
    [
        "STROM_SERVICE_HOST",
        "STROM_PORT",
        "STROM_PORT_9092_TCP",
        "STROM_PORT_9092_TCP_ADDR",
        "STROM_BOOTSTRAP_SERVICE_PORT",
        "STROM_BOOTSTRAP_SERVICE_PORT_TCP_CLIENTS",
        "STROM_BROKERS_PORT_9404_TCP_PROTO",
    ],
)
def test_kubernetes_service_link_variables_are_ignored(name: str) -> None:
    config = loading.load_broker_config(None, [], {name: "tcp://10.0.0.1:9092"})
    assert config.explicit() == {}


def test_unknown_key_in_file_names_key_origin_and_suggestion(tmp_path: Path) -> None:
    path = _file(tmp_path, "log.segmnt.bytes=100\n")
    with pytest.raises(definitions.ConfigError) as info:
        loading.load_broker_config(path, [], {})
    message = str(info.value)
    assert message.startswith("unknown configuration key 'log.segmnt.bytes'")
    assert "did you mean 'log.segment.bytes'" in message
    assert str(path) in message
    assert info.value.key == "log.segmnt.bytes"


def test_topic_config_name_on_the_broker_points_at_broker_name() -> None:
    with pytest.raises(definitions.ConfigError, match=r"broker default is 'log\.retention\.ms'"):
        loading.load_broker_config(None, ["retention.ms=1000"], {})


def test_invalid_value_names_key_and_problem() -> None:
    with pytest.raises(definitions.ConfigError) as info:
        loading.load_broker_config(None, ["log.segment.bytes=3"], {})
    assert str(info.value) == "log.segment.bytes: must be at least 14, got 3 (set in --override)"


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("num.partitions=many", "num.partitions: expected an integer (INT), got 'many'"),
        ("num.partitions=0", "num.partitions: must be at least 1, got 0"),
        ("auto.create.topics.enable=yes", "auto.create.topics.enable: expected true or false"),
        ("log.retention.bytes=99999999999999999999", "log.retention.bytes: 99999999999999999999"),
        ("log.cleanup.policy=delete,shred", "log.cleanup.policy: must be one of compact, delete"),
        ("log.message.timestamp.type=createtime", "log.message.timestamp.type: must be one of"),
        ("log.cleaner.min.cleanable.ratio=1.5", "must be between 0 and 1, got 1.5"),
        ("process.roles=broker,zookeeper", "process.roles: must be one of broker, controller"),
        ("metrics.listener=0.0.0.0:9404", "metrics.listener: expected http://host:port"),
        ("controller.quorum.voters=1@host", "controller.quorum.voters: expected id@host:port"),
    ],
)
def test_invalid_values(setting: str, expected: str) -> None:
    with pytest.raises(definitions.ConfigError) as info:
        loading.load_broker_config(None, [setting], {})
    assert expected in str(info.value)


def test_values_are_trimmed_and_canonical() -> None:
    config = loading.load_broker_config(
        None, ["auto.create.topics.enable= TRUE ", "log.cleanup.policy=delete , compact"], {}
    )
    assert config.auto_create_topics_enable is True
    assert config.rendered("log.cleanup.policy") == "delete,compact"


def test_bad_override_syntax() -> None:
    with pytest.raises(definitions.ConfigError, match="expected key=value"):
        loading.load_broker_config(None, ["num.partitions"], {})


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(definitions.ConfigError, match="cannot read config file"):
        loading.load_broker_config(tmp_path / "nope.properties", [], {})
