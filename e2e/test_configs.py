"""Configs changed at run time, through real peers: the Java AdminClient
(incrementalAlterConfigs / describeConfigs), Kafka's own kafka-configs tool, librdkafka and
kafka-python (incremental and legacy AlterConfigs); altered configs survive a restart; and
retention set at run time deletes whole old segments, after which consumers below the log
start offset get OFFSET_OUT_OF_RANGE and reset per auto.offset.reset."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from java_peers import JavaPeers
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from strom_process import StromProcess
from waiting import wait_until

CONFIG_COMMAND = "kafka.admin.ConfigCommand"  # kafka-configs.sh; Kafka 4.x keeps it in core
SEGMENT_BYTES = 4096
RETENTION_CHECK_MS = 300
RECORD_VALUE = b"v" * 200
WAIT_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromProcess]:
    """Small segments and a frequent retention check, so retention is quick to see."""
    process = StromProcess(
        tmp_path_factory.mktemp("strom-configs"),
        overrides={
            "log.segment.bytes": str(SEGMENT_BYTES),
            "log.retention.check.interval.ms": str(RETENTION_CHECK_MS),
        },
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def admin(broker: StromProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(admin: AdminClient, topic: str, config: dict[str, str] | None = None) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(30)


def describe(admin: AdminClient, kind: Any, name: str) -> dict[str, Any]:
    resource = ConfigResource(kind, name)
    described: dict[str, Any] = admin.describe_configs([resource])[resource].result(30)
    return described


def alter(admin: AdminClient, kind: Any, name: str, **changes: tuple[Any, str | None]) -> None:
    """IncrementalAlterConfigs through librdkafka: key=(op, value), dots as '__'."""
    entries = [
        ConfigEntry(key.replace("__", "."), value, incremental_operation=op)
        for key, (op, value) in changes.items()
    ]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)


# --- the Java AdminClient


def java_configs(java_peers: JavaPeers, broker: StromProcess, *args: str) -> list[Any]:
    return java_peers.run_json_lines(
        "PeerConfigs", "--bootstrap-server", broker.bootstrap, *args, timeout=120
    )


@pytest.mark.timeout(300)
def test_java_admin_incremental_alter_and_describe_round_trip(
    broker: StromProcess, java_peers: JavaPeers, admin: AdminClient, topic: str
) -> None:
    create_topic(admin, topic)
    done = java_configs(
        java_peers,
        broker,
        "alter",
        "topic",
        topic,
        "set:retention.ms=3600000",
        "append:cleanup.policy=compact",
        "set:max.message.bytes=50000",
    )
    assert done == [{"ok": True}]
    described = {
        e["name"]: e
        for e in java_configs(
            java_peers, broker, "describe", "topic", topic, "retention.ms", "cleanup.policy"
        )
    }
    retention = described["retention.ms"]
    assert retention["value"] == "3600000"
    assert retention["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert retention["type"] == "LONG" and retention["documented"]
    assert not retention["readOnly"] and not retention["sensitive"]
    assert retention["synonyms"][0] == {
        "name": "retention.ms",
        "value": "3600000",
        "source": "DYNAMIC_TOPIC_CONFIG",
    }
    assert retention["synonyms"][-1]["source"] == "DEFAULT_CONFIG"
    assert described["cleanup.policy"]["value"] == "delete,compact"

    # validateOnly checks but changes nothing.
    done = java_configs(
        java_peers,
        broker,
        "--validate-only",
        "alter",
        "topic",
        topic,
        "subtract:cleanup.policy=compact",
        "delete:retention.ms",
    )
    assert done == [{"ok": True}]
    assert describe(admin, ConfigResource.Type.TOPIC, topic)["cleanup.policy"].value == (
        "delete,compact"
    )

    # Refusals arrive as the exceptions Kafka's own brokers raise.
    (invalid,) = java_configs(java_peers, broker, "alter", "topic", topic, "set:retention.ms=x")
    assert invalid["error"] == "InvalidConfigurationException"
    assert "retention.ms" in invalid["message"]
    (missing,) = java_configs(
        java_peers, broker, "alter", "topic", f"{topic}-missing", "set:retention.ms=1"
    )
    assert missing["error"] == "UnknownTopicOrPartitionException"
    (read_only,) = java_configs(java_peers, broker, "alter", "broker", "1", "set:log.dirs=/x")
    assert read_only["error"] == "InvalidRequestException"
    assert "Cannot update these configs dynamically: log.dirs" in read_only["message"]
    (not_a_list,) = java_configs(
        java_peers, broker, "alter", "topic", topic, "append:retention.ms=5"
    )
    assert not_a_list["error"] == "InvalidConfigurationException"

    # A cluster-wide default (the broker resource "") reaches topics without an override.
    done = java_configs(
        java_peers, broker, "alter", "broker", "", "set:log.retention.bytes=123456789"
    )
    assert done == [{"ok": True}]
    try:
        (default,) = java_configs(java_peers, broker, "describe", "broker", "")
        assert default["name"] == "log.retention.bytes"
        assert default["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
        (inherited,) = java_configs(
            java_peers, broker, "describe", "topic", topic, "retention.bytes"
        )
        assert inherited["value"] == "123456789"
        assert inherited["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
        assert inherited["synonyms"][0] == {
            "name": "log.retention.bytes",
            "value": "123456789",
            "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
        }
    finally:
        java_configs(java_peers, broker, "alter", "broker", "", "delete:log.retention.bytes")
    assert describe(admin, ConfigResource.Type.TOPIC, topic)["retention.bytes"].value == "-1"


# --- kafka-configs


def kafka_configs(
    java_peers: JavaPeers, broker: StromProcess, *args: str, check: bool = True
) -> tuple[int, str, str]:
    done = java_peers.run(
        CONFIG_COMMAND, "--bootstrap-server", broker.bootstrap, *args, timeout=120, check=check
    )
    return done.returncode, done.stdout, done.stderr


def described_lines(out: str) -> dict[str, str]:
    """'  retention.ms=1000 sensitive=false synonyms={...}' lines as {name: rest}."""
    found = {}
    for line in out.splitlines():
        if line.startswith("  ") and "=" in line:
            name, _, rest = line.strip().partition("=")
            found[name] = rest
    return found


@pytest.mark.timeout(400)
def test_kafka_configs_alters_and_describes_topic_and_broker_configs(
    broker: StromProcess, java_peers: JavaPeers, admin: AdminClient, topic: str
) -> None:
    create_topic(admin, topic)
    entity = ("--entity-type", "topics", "--entity-name", topic)
    _, out, err = kafka_configs(
        java_peers,
        broker,
        *entity,
        "--alter",
        "--add-config",
        "retention.ms=1000,cleanup.policy=[compact,delete]",
    )
    assert f"Completed updating config for topic {topic}." in out, (out, err)

    _, out, err = kafka_configs(java_peers, broker, *entity, "--describe")
    assert f"Dynamic configs for topic {topic} are:" in out, (out, err)
    lines = described_lines(out)
    assert set(lines) == {"retention.ms", "cleanup.policy"}, out
    assert lines["retention.ms"].startswith("1000 sensitive=false synonyms={"), out
    assert "DYNAMIC_TOPIC_CONFIG:retention.ms=1000" in lines["retention.ms"], out
    assert lines["cleanup.policy"].startswith("compact,delete "), out

    _, out, err = kafka_configs(
        java_peers, broker, *entity, "--alter", "--delete-config", "retention.ms"
    )
    assert f"Completed updating config for topic {topic}." in out, (out, err)
    _, out, _ = kafka_configs(java_peers, broker, *entity, "--describe")
    assert set(described_lines(out)) == {"cleanup.policy"}, out
    assert describe(admin, ConfigResource.Type.TOPIC, topic)["retention.ms"].source == (
        ConfigSource.DEFAULT_CONFIG.value
    )

    rc, out, err = kafka_configs(
        java_peers, broker, *entity, "--alter", "--add-config", "segment.bytes=tiny", check=False
    )
    assert rc != 0 and "InvalidConfigurationException" in out + err, (out, err)

    # The cluster-wide broker defaults: --entity-default.
    defaults = ("--entity-type", "brokers", "--entity-default")
    _, out, err = kafka_configs(
        java_peers, broker, *defaults, "--alter", "--add-config", "log.retention.ms=7200000"
    )
    assert "Completed updating default config for brokers in the cluster." in out, (out, err)
    try:
        _, out, _ = kafka_configs(java_peers, broker, *defaults, "--describe")
        assert "Default configs for brokers in the cluster are:" in out, out
        lines = described_lines(out)
        assert lines["log.retention.ms"].startswith("7200000 "), out
        assert "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000" in out, out
        retention = describe(admin, ConfigResource.Type.TOPIC, topic)["retention.ms"]
        assert retention.value == "7200000"
        assert retention.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    finally:
        kafka_configs(
            java_peers, broker, *defaults, "--alter", "--delete-config", "log.retention.ms"
        )
    _, out, _ = kafka_configs(java_peers, broker, *defaults, "--describe")
    assert described_lines(out) == {}, out

    rc, out, err = kafka_configs(
        java_peers,
        broker,
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--alter",
        "--add-config",
        "node.id=7",
        check=False,
    )
    assert rc != 0, (out, err)
    assert "Cannot update these configs dynamically: node.id" in out + err, (out, err)


# --- librdkafka and kafka-python


@pytest.mark.timeout(120)
def test_librdkafka_and_kafka_python_alter_configs(
    broker: StromProcess, admin: AdminClient, topic: str
) -> None:
    create_topic(admin, topic, {"segment.ms": "600000"})
    alter(
        admin,
        ConfigResource.Type.TOPIC,
        topic,
        retention__ms=(AlterConfigOpType.SET, "5000"),
        cleanup__policy=(AlterConfigOpType.APPEND, "compact"),
    )
    described = describe(admin, ConfigResource.Type.TOPIC, topic)
    assert described["retention.ms"].value == "5000"
    assert described["cleanup.policy"].value == "delete,compact"
    assert described["segment.ms"].value == "600000"

    with pytest.raises(KafkaException) as refused:
        alter(admin, ConfigResource.Type.TOPIC, topic, retention__ms=(AlterConfigOpType.SET, "-5"))
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG

    # A per-broker dynamic config wins over the static default and is described as such.
    alter(
        admin, ConfigResource.Type.BROKER, "1", message__max__bytes=(AlterConfigOpType.SET, "9999")
    )
    try:
        own = describe(admin, ConfigResource.Type.BROKER, "1")["message.max.bytes"]
        assert own.value == "9999"
        assert own.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert describe(admin, ConfigResource.Type.TOPIC, topic)["max.message.bytes"].value == (
            "9999"
        )
    finally:
        alter(
            admin,
            ConfigResource.Type.BROKER,
            "1",
            message__max__bytes=(AlterConfigOpType.DELETE, None),
        )

    # kafka-python's legacy AlterConfigs replaces every override of the topic.
    legacy = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="e2e-configs-legacy")
    try:
        result = legacy.alter_configs(
            [KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "7000"})],
            incremental=False,
        )
    finally:
        legacy.close()
    assert result == {"topic": {topic: "OK"}}, result
    described = describe(admin, ConfigResource.Type.TOPIC, topic)
    assert described["retention.ms"].value == "7000"
    # The client sends the other modified configs along (AlterConfigs resets what is missing).
    assert described["segment.ms"].value == "600000"


# --- restart


@pytest.mark.timeout(300)
def test_altered_configs_survive_restarts(
    strom_factory: Callable[..., StromProcess], java_peers: JavaPeers
) -> None:
    broker = strom_factory()
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "kept")
    alter(admin, ConfigResource.Type.TOPIC, "kept", retention__ms=(AlterConfigOpType.SET, "4321"))
    alter(
        admin,
        ConfigResource.Type.BROKER,
        "1",
        log__retention__bytes=(AlterConfigOpType.SET, "777777"),
    )
    done = java_configs(java_peers, broker, "alter", "broker", "", "set:log.segment.bytes=65536")
    assert done == [{"ok": True}]

    def check() -> None:
        topic = describe(admin, ConfigResource.Type.TOPIC, "kept")
        assert topic["retention.ms"].value == "4321"
        assert topic["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert topic["retention.bytes"].value == "777777"
        assert topic["retention.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert topic["segment.bytes"].value == "65536"
        assert topic["segment.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

    check()
    broker.restart(graceful=True)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    check()
    broker.restart(graceful=False)  # SIGKILL: the metadata was already on disk
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    check()


# --- retention at run time


def produce_records(broker: StromProcess, topic: str, count: int) -> None:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1}
    )
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _: object) -> None:
        if error is not None:
            failures.append(error)

    for index in range(count):
        producer.produce(topic, key=b"%d" % index, value=RECORD_VALUE, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failures, failures


def offsets(broker: StromProcess, topic: str) -> tuple[int, int]:
    """(earliest, latest) from ListOffsets."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "e2e-offsets"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


def segment_bases(broker: StromProcess, topic: str) -> list[int]:
    """Base offsets of the partition's live segment files (not those awaiting deletion)."""
    return sorted(int(path.stem) for path in (broker.log_dir / f"{topic}-0").glob("*.log"))


def first_message(consumer: Consumer, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None:
            return message
    return None


@pytest.mark.timeout(300)
def test_retention_bytes_set_at_run_time_then_consumers_reset(
    broker: StromProcess, admin: AdminClient, topic: str
) -> None:
    create_topic(admin, topic)
    produce_records(broker, topic, 200)
    bases_before = segment_bases(broker, topic)
    assert len(bases_before) >= 6, bases_before
    assert offsets(broker, topic) == (0, 200)

    alter(
        admin, ConfigResource.Type.TOPIC, topic, retention__bytes=(AlterConfigOpType.SET, "12288")
    )
    low, high = wait_until(
        lambda: (o := offsets(broker, topic))[0] > 0 and o,
        WAIT_S,
        "the log start offset to advance",
    )
    assert high == 200
    # Whole segments went: the log now starts where a segment started.
    assert low in bases_before, (low, bases_before)
    assert segment_bases(broker, topic)[0] == low
    size = sum(path.stat().st_size for path in (broker.log_dir / f"{topic}-0").glob("*.log"))
    assert size <= 12288 + 2 * SEGMENT_BYTES, size

    def consumer(reset: str) -> Consumer:
        made = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": f"e2e-reset-{reset}",
                "enable.auto.commit": False,
                "auto.offset.reset": reset,
            }
        )
        made.assign([TopicPartition(topic, 0, 0)])  # below the log start offset
        return made

    strict = consumer("error")
    try:
        message = first_message(strict)
        assert message is not None and message.error() is not None
        assert message.error().code() == KafkaError._AUTO_OFFSET_RESET, message.error()
        assert "out of range" in message.error().str().lower(), message.error()
    finally:
        strict.close()

    earliest = consumer("earliest")
    try:
        message = first_message(earliest)
        assert message is not None and message.error() is None, message and message.error()
        assert message.offset() == low
    finally:
        earliest.close()

    latest = consumer("latest")
    try:
        assert first_message(latest, timeout=5.0) is None
        produce_records(broker, topic, 1)
        message = first_message(latest)
        assert message is not None and message.error() is None
        assert message.offset() == high
    finally:
        latest.close()

    # kafka-python: the same reset, and OffsetOutOfRangeError when there is no policy.
    partition = KafkaPythonPartition(topic, 0)
    for reset, expected in (("earliest", low), ("latest", high + 1)):
        python_consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            client_id=f"e2e-configs-{reset}",
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset=reset,
        )
        try:
            python_consumer.assign([partition])
            python_consumer.seek(partition, 0)
            polled = python_consumer.poll(timeout_ms=10_000)
            position = python_consumer.position(partition, timeout_ms=10_000)
            if reset == "earliest":
                records = polled.get(partition, [])
                assert records and records[0].offset == expected
            else:
                assert not polled.get(partition)
                assert position == expected
        finally:
            python_consumer.close()


@pytest.mark.timeout(300)
def test_retention_ms_set_at_run_time_deletes_expired_segments(
    broker: StromProcess, admin: AdminClient, topic: str
) -> None:
    create_topic(admin, topic)
    produce_records(broker, topic, 60)
    assert len(segment_bases(broker, topic)) >= 2
    assert offsets(broker, topic) == (0, 60)

    alter(admin, ConfigResource.Type.TOPIC, topic, retention__ms=(AlterConfigOpType.SET, "1000"))
    # Every segment expires, the active one included (rolled first), as in Kafka.
    assert wait_until(lambda: offsets(broker, topic) == (60, 60), WAIT_S, "all records to expire")
    assert segment_bases(broker, topic) == [60]
    # Offsets go on where they were.
    alter(admin, ConfigResource.Type.TOPIC, topic, retention__ms=(AlterConfigOpType.DELETE, None))
    produce_records(broker, topic, 1)
    assert offsets(broker, topic) == (60, 61)
