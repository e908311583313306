"""The admin and edge behaviour of a single broker, through real clients: CreateTopics
(validate_only, configs), DescribeConfigs, CreatePartitions, DeleteRecords, ListOffsets
by timestamp, message.max.bytes, socket.request.max.bytes, Fetch long polling, metrics."""

from __future__ import annotations

import io
import os
import re
import socket
import struct
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from strom.protocol import shaping
from strom.records import batches
from strom_process import StromProcess

MAX_MESSAGE_BYTES = 20_000
REQUEST_MAX_BYTES = 200_000
CORRUPT_MESSAGE = 2  # Kafka's error code for a batch failing its CRC


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromProcess]:
    """A broker with small limits so the edges are cheap to reach."""
    process = StromProcess(
        tmp_path_factory.mktemp("strom-apis"),
        overrides={
            "message.max.bytes": str(MAX_MESSAGE_BYTES),
            "socket.request.max.bytes": str(REQUEST_MAX_BYTES),
            "num.partitions": "2",
            "log.retention.hours": "48",
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


def produce(
    broker: StromProcess,
    topic: str,
    values: list[bytes],
    partition: int = 0,
    timestamps: list[int] | None = None,
    **config: object,
) -> list[int]:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **config})
    offsets: list[int] = []
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: object) -> None:
        if error is not None:
            errors.append(error)
        else:
            offsets.append(message.offset())  # type: ignore[attr-defined]

    for index, value in enumerate(values):
        kwargs = {"timestamp": timestamps[index]} if timestamps else {}
        producer.produce(topic, value=value, partition=partition, on_delivery=delivered, **kwargs)
        producer.flush(30)
    if errors:
        raise KafkaException(errors[0])
    return offsets


def test_create_topic_validate_only_creates_nothing(admin: AdminClient, topic: str) -> None:
    futures = admin.create_topics([NewTopic(topic, 3, 1)], validate_only=True)
    futures[topic].result(30)
    assert topic not in admin.list_topics(timeout=10).topics


def test_create_topic_with_configs_reports_them_in_describe_configs(
    admin: AdminClient, topic: str
) -> None:
    config = {"retention.ms": "3600000", "cleanup.policy": "delete"}
    admin.create_topics([NewTopic(topic, 3, 1, config=config)])[topic].result(30)
    metadata = admin.list_topics(topic, timeout=10).topics[topic]
    assert len(metadata.partitions) == 3
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["retention.ms"].value == "3600000"
    assert described["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # Not overridden, set on the broker as log.retention.hours=48 -> static broker config.
    assert described["delete.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["max.message.bytes"].value == str(MAX_MESSAGE_BYTES)
    assert described["max.message.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert len(described) >= 20, "every topic config is described, not only overrides"


def test_invalid_topic_config_and_duplicate_topic_are_refused(
    admin: AdminClient, topic: str
) -> None:
    bad = admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "soon"})])
    with pytest.raises(KafkaException) as refused:
        bad[topic].result(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in refused.value.args[0].str()
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    again = admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(KafkaException) as exists:
        again[topic].result(30)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_broker_configs_are_all_described_with_sources(
    admin: AdminClient, broker: StromProcess
) -> None:
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["num.partitions"].value == "2"
    assert described["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert described["auto.create.topics.enable"].source == ConfigSource.DEFAULT_CONFIG.value
    assert len(described) > 50


def test_create_partitions_grows_a_topic(admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4
    shrink = admin.create_partitions([NewPartitions(topic, 2)])
    with pytest.raises(KafkaException) as refused:
        shrink[topic].result(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_delete_records_moves_the_log_start_offset(
    admin: AdminClient, broker: StromProcess, topic: str
) -> None:
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produce(broker, topic, [b"r%d" % i for i in range(10)])
    partition = TopicPartition(topic, 0, 6)
    result = admin.delete_records([partition])[partition].result(30)
    assert result.low_watermark == 6
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (6, 10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        first = consumer.poll(10)
        assert first is not None and first.error() is None
        assert first.offset() == 6 and first.value() == b"r6"
    finally:
        consumer.close()


def test_list_offsets_by_timestamp(broker: StromProcess, topic: str) -> None:
    # An hour ago, well inside this broker's retention (48 h): a fixed date years back
    # would let a retention pass (every 30 s) delete the records before they are listed.
    base = (int(time.time()) - 3600) * 1000
    produce(broker, topic, [b"a", b"b", b"c"], timestamps=[base, base + 1000, base + 2000])
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        tp = KafkaPythonPartition(topic, 0)
        found = consumer.offsets_for_times({tp: base + 500})[tp]
        assert (found.offset, found.timestamp) == (1, base + 1000)
        assert consumer.offsets_for_times({tp: base + 5000})[tp] is None
        assert consumer.beginning_offsets([tp])[tp] == 0
        assert consumer.end_offsets([tp])[tp] == 3
    finally:
        consumer.close()


def test_batch_over_message_max_bytes_is_refused_and_nothing_is_written(
    broker: StromProcess, topic: str
) -> None:
    produce(broker, topic, [b"small"])
    with pytest.raises(KafkaException) as refused:
        produce(
            broker,
            topic,
            [b"x" * (MAX_MESSAGE_BYTES + 100)],
            **{"compression.type": "none", "message.max.bytes": 10_000_000},
        )
    assert refused.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce(broker, topic, [b"after"]) == [1], "the refused batch took no offset"


def test_request_over_socket_request_max_bytes_closes_the_connection(
    broker: StromProcess,
) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as connection:
        connection.sendall(struct.pack(">i", REQUEST_MAX_BYTES + 1) + b"\x00" * 64)
        assert connection.recv(100) == b"", "the broker closes without reading the body"
    # ...and keeps serving others.
    assert produce(broker, "after-oversized-request", [b"ok"]) == [0]


def test_fetch_long_polls_until_data_arrives(broker: StromProcess, topic: str) -> None:
    produce(broker, topic, [b"first"])
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5000,
            "fetch.min.bytes": 1,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        message = consumer.poll(10)
        assert message is not None and message.value() == b"first"
        produced_at = time.monotonic()
        produce(broker, topic, [b"second"])
        message = consumer.poll(10)
        waited = time.monotonic() - produced_at
        assert message is not None and message.value() == b"second"
        # A fetch parked on an empty partition is woken by the append, long before the
        # 5 s max wait; a broker that ignored long polling would answer after 5 s.
        assert waited < 4.0, f"record arrived {waited:.1f}s after it was produced"
    finally:
        consumer.close()


def test_metrics_expose_requests_bytes_and_log_sizes(broker: StromProcess, topic: str) -> None:
    produce(broker, topic, [b"x" * 1000] * 3)
    with urllib.request.urlopen(f"{broker.metrics_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    assert 'strom_requests_total{api="PRODUCE"' in text
    assert 'strom_request_latency_seconds_bucket{api="PRODUCE"' in text
    # by the listener the client came in on
    assert re.search(
        r'^strom_requests_total\{api="PRODUCE",listener="PLAINTEXT",version="\d+"\} [1-9]',
        text,
        re.M,
    )
    assert 'strom_request_latency_seconds_count{api="PRODUCE",listener="PLAINTEXT"}' in text
    # a single node: the registered broker, the quorum's leader, the active controller
    assert "\nstrom_brokers_online 1.0\n" in text
    assert '\nstrom_raft_state{state="leader"} 1.0\n' in text
    assert "\nstrom_raft_commit_lag " in text
    assert "\nprocess_open_fds " in text
    bytes_in = [
        line
        for line in text.splitlines()
        if line.startswith(f'strom_topic_bytes_in_total{{topic="{topic}"}}')
    ]
    assert bytes_in and float(bytes_in[0].split()[-1]) >= 3000
    size_line = f'strom_log_size_bytes{{partition="0",topic="{topic}"}}'
    assert any(line.startswith(size_line) for line in text.splitlines())
    # the log dir's filesystem, as DescribeLogDirs reports it: what a disk-full alert reads
    log_dir = os.path.abspath(broker.log_dir)
    total = metric_in(text, f'strom_log_dir_total_bytes{{log_dir="{log_dir}"}}')
    usable = metric_in(text, f'strom_log_dir_usable_bytes{{log_dir="{log_dir}"}}')
    assert 0 < usable <= total
    assert metric_in(text, f'strom_log_dir_offline{{log_dir="{log_dir}"}}') == 0


def metric_in(text: str, series: str) -> float:
    """The value of one series (name and labels as Prometheus writes them) in a scrape."""
    lines = [line for line in text.splitlines() if line.startswith(series + " ")]
    assert len(lines) == 1, f"{series}: {lines or 'absent'}"
    return float(lines[0].split()[-1])


def metric_value(broker: StromProcess, prefix: str) -> float:
    with urllib.request.urlopen(f"{broker.metrics_url}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(prefix):
                return float(line.split()[-1])
    return 0.0


def test_large_fetches_are_sent_with_sendfile(
    admin: AdminClient, broker: StromProcess, topic: str
) -> None:
    # 16 KiB values, ~1 MiB in all: fetch responses carry ranges far above the
    # 64 KiB threshold, which go out with sendfile rather than through Python.
    # This module's broker caps batches at 20 kB and requests at 200 kB.
    big = {"max.message.bytes": "190000"}
    admin.create_topics([NewTopic(topic, 1, 1, config=big)])[topic].result(30)
    values = [bytes([65 + i % 26]) * 16_000 for i in range(64)]
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "linger.ms": 50,
            "batch.size": 150_000,
            "compression.type": "none",
        }
    )
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0
    before = metric_value(broker, 'strom_fetch_record_bytes_sent_total{method="sendfile"}')
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "check.crcs": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        received = []
        while len(received) < len(values):
            message = consumer.poll(10)
            assert message is not None and message.error() is None
            received.append(message.value())
    finally:
        consumer.close()
    assert received == values
    after = metric_value(broker, 'strom_fetch_record_bytes_sent_total{method="sendfile"}')
    assert after - before >= 500_000


def raw_produce(broker: StromProcess, topic: str, batch: bytes) -> int:
    """Send one Produce v9 over a plain socket; return the partition's error code."""
    request_type = load_request_schema(0, 9)
    header_type = request_type.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_type)(
        buffer,
        header_type(request_api_key=0, request_api_version=9, correlation_id=1, client_id="raw"),
    )
    entity_writer(request_type)(
        buffer,
        shaping.build(
            request_type,
            {
                "acks": 1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        ),
    )
    payload = buffer.getvalue()
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as connection:
        connection.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", connection.recv(4, socket.MSG_WAITALL))[0]
        data = connection.recv(size, socket.MSG_WAITALL)
    response_type = load_response_schema(0, 9)
    _, header_size = entity_reader(response_type.__header_schema__)(data, 0)
    response, _ = entity_reader(response_type)(data, header_size)
    return int(response.responses[0].partition_responses[0].error_code)


def test_batch_with_bad_crc_is_refused_and_the_log_stays_clean(
    broker: StromProcess, topic: str
) -> None:
    assert produce(broker, topic, [b"before"]) == [0]
    good = bytearray(batches.build_batch([(b"k", b"v" * 100, [], 1_700_000_000_000)]))
    good[-1] ^= 0xFF  # a flipped payload byte: the CRC no longer matches
    assert raw_produce(broker, topic, bytes(good)) == CORRUPT_MESSAGE
    assert produce(broker, topic, [b"after"]) == [1]
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "check.crcs": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values = [consumer.poll(10).value() for _ in range(2)]  # type: ignore[union-attr]
    finally:
        consumer.close()
    assert values == [b"before", b"after"]
