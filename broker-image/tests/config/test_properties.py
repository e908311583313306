from pathlib import Path

import pytest
from strom.config import definitions, loading


def test_separators_and_comments() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "  node.id=3\n"
        "log.dirs: /data/a\n"
        "num.partitions 4\n"
        "broker.rack   =   rack-1   \n"
        "empty.value=\n"
        "key.only\n"
    )
    assert loading.parse_properties(text) == {
        "node.id": "3",
        "log.dirs": "/data/a",
        "num.partitions": "4",
        "broker.rack": "rack-1   ",  # Java keeps trailing blanks; parsing trims later
        "empty.value": "",
        "key.only": "",
    }


def test_continuation_lines() -> None:
    text = "listeners=PLAINTEXT://:9092,\\\n    CONTROLLER://:9093\nnext=1\n"
    assert loading.parse_properties(text) == {
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "next": "1",
    }


def test_continued_line_starting_with_hash_is_not_a_comment() -> None:
    assert loading.parse_properties("a=1\\\n#2\n") == {"a": "1#2"}


def test_comment_ending_in_backslash_does_not_continue() -> None:
    assert loading.parse_properties("# comment \\\na=1\n") == {"a": "1"}


def test_even_backslashes_do_not_continue() -> None:
    assert loading.parse_properties("a=x\\\\\nb=2\n") == {"a": "x\\", "b": "2"}


def test_escapes() -> None:
    text = "my\\ key\\=x = a\\tb\\u00e9\\:\\\\\n"
    assert loading.parse_properties(text) == {"my key=x": "a\tbé:\\"}


def test_crlf_and_duplicate_keys() -> None:
    assert loading.parse_properties("a=1\r\nb=2\r\na=3\r\n") == {"a": "3", "b": "2"}


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(definitions.ConfigError, match=r"f\.properties, line 2: malformed"):
        loading.parse_properties("a=1\nb=\\u12x\n", source="f.properties")


def test_kafka_server_properties_loads(tmp_path: Path) -> None:
    # The KRaft combined-mode config/server.properties shipped with Kafka 4.
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=broker,controller\n"
        "node.id=1\n"
        "controller.quorum.bootstrap.servers=localhost:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n"
        "inter.broker.listener.name=PLAINTEXT\n"
        "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL\n"
        "num.network.threads=3\n"
        "num.io.threads=8\n"
        "socket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\n"
        "socket.request.max.bytes=104857600\n"
        "log.dirs=/tmp/kraft-combined-logs\n"
        "num.partitions=1\n"
        "num.recovery.threads.per.data.dir=1\n"
        "offsets.topic.replication.factor=1\n"
        "share.coordinator.state.topic.replication.factor=1\n"
        "share.coordinator.state.topic.min.isr=1\n"
        "transaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\n"
        "log.retention.hours=168\n"
        "log.segment.bytes=1073741824\n"
        "log.retention.check.interval.ms=300000\n"
    )
    config = loading.load_broker_config(path, [], {})
    assert [str(listener) for listener in config.advertised_listeners] == [
        "PLAINTEXT://localhost:9092"
    ]
    assert config.controller_listener_names == ["CONTROLLER"]
    assert config.log_dirs == [Path("/tmp/kraft-combined-logs")]
    assert config.origin("num.partitions") == str(path)
