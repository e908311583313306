"""strom.client's pure parts: Java client properties translated for librdkafka, the
connection watch that stops a tool when no bootstrap server answers, topic ids, and the
strom-configs describe lines."""

from __future__ import annotations

import confluent_kafka
import pytest
from strom.cli import configs
from strom.client import connection, errors, results, settings, topics


def test_plain_properties_pass_through_and_bootstrap_wins() -> None:
    out = settings.librdkafka_settings(
        "h:1", {"bootstrap.servers": "other:2", "acks": "all", "client.id": "c"}
    )
    assert out == {"bootstrap.servers": "h:1", "acks": "all", "client.id": "c"}
    assert settings.librdkafka_settings(None, {"bootstrap.servers": "x:9"}) == {
        "bootstrap.servers": "x:9"
    }
    with pytest.raises(errors.ConfigurationError, match="--bootstrap-server"):
        settings.librdkafka_settings(None, {})


def test_java_only_properties_are_dropped_or_translated() -> None:
    out = settings.librdkafka_settings(
        "h:1",
        {
            "key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
            "buffer.memory": "33554432",
            "send.buffer.bytes": "-1",
            "security.protocol": "SASL_SSL",
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor",
            "ssl.truststore.location": "/ca.pem",
            "ssl.truststore.type": "PEM",
        },
    )
    assert out == {
        "bootstrap.servers": "h:1",
        "queue.buffering.max.kbytes": "32768",
        "socket.send.buffer.bytes": "0",
        "security.protocol": "sasl_ssl",
        "partition.assignment.strategy": "range",
        "ssl.ca.location": "/ca.pem",
    }


def test_jks_stores_and_unknown_assignors_are_refused_by_name() -> None:
    with pytest.raises(errors.ConfigurationError, match=r"ssl\.truststore\.type=JKS"):
        settings.librdkafka_settings("h:1", {"ssl.truststore.location": "/ts.jks"})
    with pytest.raises(errors.ConfigurationError, match="StickyAssignor"):
        settings.librdkafka_settings("h:1", {"partition.assignment.strategy": "StickyAssignor"})


def test_jaas_config_gives_sasl_credentials() -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="s3cr\\"et";'
    )
    assert settings.jaas_credentials(jaas) == {
        "sasl.username": "alice",
        "sasl.password": 's3cr"et',
    }
    scram = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=bob password=pw;"
    )
    assert settings.jaas_credentials(scram) == {"sasl.username": "bob", "sasl.password": "pw"}
    with pytest.raises(errors.ConfigurationError, match="OAuthBearerLoginModule"):
        settings.jaas_credentials(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
        )


def kafka_error(code: int, text: str, fatal: bool = False) -> confluent_kafka.KafkaError:
    return confluent_kafka.KafkaError(code, text, fatal=fatal)


def test_watch_stops_when_no_bootstrap_server_answers() -> None:
    watch = connection.Watch("127.0.0.1:1")
    watch.check()  # nothing wrong yet
    watch(
        kafka_error(
            confluent_kafka.KafkaError._TRANSPORT,
            "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused "
            "(after 0ms in state CONNECT)",
        )
    )
    watch.check()  # one failed attempt is not the end
    watch(kafka_error(confluent_kafka.KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    with pytest.raises(errors.ConnectError) as caught:
        watch.check()
    assert str(caught.value) == (
        "cannot connect to bootstrap server 127.0.0.1:1: "
        "Connect to ipv4#127.0.0.1:1 failed: Connection refused"
    )


def test_watch_tolerates_brokers_going_down_after_a_success() -> None:
    watch = connection.Watch("a:1,b:2")
    watch.connected()
    watch(kafka_error(confluent_kafka.KafkaError._ALL_BROKERS_DOWN, "2/2 brokers are down"))
    watch.check()
    watch(kafka_error(confluent_kafka.KafkaError._FATAL, "fenced", fatal=True))
    with pytest.raises(errors.ClientError, match="fenced"):
        watch.check()


def test_topic_ids_print_as_kafka_prints_them() -> None:
    assert topics.kafka_topic_id("wgv9XqAYT+6fsxg1KLm6qw") == "wgv9XqAYT-6fsxg1KLm6qw"
    assert topics.kafka_topic_id("FNMx2ep/QlmUu78lcikzEA==") == "FNMx2ep_QlmUu78lcikzEA"


def test_configs_describe_lines() -> None:
    synonyms = (
        results.ConfigSynonym("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG"),
        results.ConfigSynonym("log.retention.hours", "168", "DEFAULT_CONFIG"),
    )
    entries = [
        results.ConfigEntry("segment.bytes", "1073741824", "DEFAULT_CONFIG", False, False, ()),
        results.ConfigEntry("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG", False, False, synonyms),
        results.ConfigEntry("cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG", False, False, ()),
    ]
    heading = "Dynamic configs for topic t are:"
    assert configs.describe_lines(heading, entries, shown_source="DYNAMIC_TOPIC_CONFIG") == [
        heading,
        "  cleanup.policy=compact sensitive=false synonyms={}",
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    assert len(configs.describe_lines(heading, entries, shown_source=None)) == 4
