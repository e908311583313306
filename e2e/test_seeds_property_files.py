"""The seeds' property files, pasted: old tutorials' server.properties start Strom brokers.

Single broker: the ZooKeeper-era server.properties a Kafka 2.x walk-through prints
(broker.id=0, zookeeper.connect, log.dirs, num.partitions, ...) starts a broker, which
warns once about the ZooKeeper keys and serves a produce and a consume.

Several brokers, as the quickstart of every Kafka version does it:

    cp config/server.properties config/server-1.properties     (Strom's shipped file)
    cp config/server.properties config/server-2.properties
    # server-1: broker.id=1, listeners=PLAINTEXT://:9093, log.dirs=/tmp/kafka-logs-1
    # server-2: listeners=PLAINTEXT://:9094, broker.id=2, port=9094, log.dir=/tmp/kafka-logs-2
    kafka-server-start.sh config/server-1.properties   (strom-server here)
    kafka-topics.sh --create --replication-factor 3 --partitions 1 --topic my-replicated-topic
    kafka-topics.sh --describe --topic my-replicated-topic       -> 3 replicas, all in the Isr

The files keep the shapes the seeds print, with two rewrites because other tests run in
parallel on this machine: the ports (9092, 9093, 9094 and the shipped controller port
19093) become free ports, and the log directories (/tmp/kafka-logs...) directories of the
test. Each broker also gets `--override metrics.listener=...` on a free port, for the
test to see when it is ready (the file is not touched for it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from java_peers import JavaPeers
from kafka_topic_tools import create_topic, describe_partitions
from strom_process import StromProcess, free_port, server_command
from waiting import wait_until

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "config" / "server.properties"

# Seed 000's single-broker file, as printed (ports and directory rewritten by the test).
SEED_SERVER_PROPERTIES = (
    ROOT / "broker-image/tests/config/kafka_configs/seed-zookeeper-era-server.properties"
).read_text()
TOPIC = "my-replicated-topic"
QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"
READY_TIMEOUT_S = 60


class PropertiesFileBroker(StromProcess):
    """`strom-server <file>`: the file as written, plus only the metrics endpoint."""

    def __init__(self, data_dir: Path, properties: Path, port: int) -> None:
        super().__init__(data_dir, port=port, host="localhost")
        self.properties = properties

    def argv(self) -> list[str]:
        return [
            *server_command(),
            str(self.properties),
            "--override",
            f"metrics.listener=http://127.0.0.1:{self.metrics_port}",
        ]

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"


def edited(text: str, edits: Sequence[tuple[str, str]]) -> str:
    """The file with each key's line set to the new value (a new line when absent), as a
    user edits a copy in an editor."""
    for key, value in edits:
        line = f"{key}={value}"
        pattern = re.compile(rf"^{re.escape(key)}=.*$", re.MULTILINE)
        text = pattern.sub(line, text) if pattern.search(text) else f"{text}{line}\n"
    return text


@pytest.fixture
def brokers() -> Iterator[list[PropertiesFileBroker]]:
    started: list[PropertiesFileBroker] = []
    try:
        yield started
    finally:
        # the joined brokers first, the quorum's only voter last
        for broker in reversed(started):
            broker.stop()


def test_the_seeds_single_broker_file_serves_a_produce_and_a_consume(
    tmp_path: Path, brokers: list[PropertiesFileBroker]
) -> None:
    port = free_port()
    text = SEED_SERVER_PROPERTIES.replace("localhost:9092", f"localhost:{port}")
    text = text.replace("/tmp/kafka-logs", str(tmp_path / "kafka-logs"))
    properties = tmp_path / "server.properties"
    properties.write_text(text)
    broker = PropertiesFileBroker(tmp_path, properties, port)
    broker.start(READY_TIMEOUT_S)
    brokers.append(broker)
    log = broker.log_tail(20_000)
    [warning] = [line for line in log.splitlines() if "Kafka 4 removed" in line]
    assert "zookeeper.connect, zookeeper.connection.timeout.ms -> " in warning
    assert (tmp_path / "kafka-logs" / "meta.properties").exists()

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for n in range(3):
        producer.produce("testABC", value=f"This is message {n}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "seed-readers",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["testABC"])
        values: list[bytes] = []

        def read_all() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
            return len(values) == 3

        wait_until(read_all, timeout=30, what="the three records consumed")
        assert values == [f"This is message {n}".encode() for n in range(3)]
    finally:
        consumer.close()


def test_the_seeds_multi_broker_steps_make_a_three_broker_cluster(
    tmp_path: Path, brokers: list[PropertiesFileBroker], java_peers: JavaPeers
) -> None:
    ports = [free_port() for _ in range(3)]
    controller_port = free_port()
    config = tmp_path / "config"
    config.mkdir()
    shipped = SHIPPED.read_text()
    assert "listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:19093" in shipped
    shipped = shipped.replace("localhost:9092", f"localhost:{ports[0]}")
    shipped = shipped.replace("19093", str(controller_port))
    shipped = shipped.replace("/tmp/strom-logs", str(tmp_path / "strom-logs"))
    (config / "server.properties").write_text(shipped)

    # cp config/server.properties config/server-N.properties, then the seeds' edits
    logs = tmp_path / "kafka-logs"
    (config / "server-1.properties").write_text(
        edited(
            shipped,
            [
                ("broker.id", "1"),
                ("listeners", f"PLAINTEXT://:{ports[1]}"),
                ("log.dirs", f"{logs}-1"),
            ],
        )
    )
    (config / "server-2.properties").write_text(
        edited(
            shipped,
            [
                ("listeners", f"PLAINTEXT://:{ports[2]}"),
                ("broker.id", "2"),
                ("port", str(ports[2])),
                ("log.dir", f"{logs}-2"),
            ],
        )
    )
    for n, name in enumerate(["server", "server-1", "server-2"]):
        data_dir = tmp_path / f"broker-{n}"
        data_dir.mkdir()
        broker = PropertiesFileBroker(data_dir, config / f"{name}.properties", ports[n])
        broker.launch()
        brokers.append(broker)
    for broker in brokers:
        broker.wait_ready(READY_TIMEOUT_S)
    for n, broker in enumerate(brokers[1:], start=1):
        log = broker.log_tail(20_000)
        assert f"node.id={n} is not one of the controller.quorum.voters" in log
        assert "running as a broker only" in log
    assert "port -> listeners" in brokers[2].log_tail(20_000)
    assert (Path(f"{logs}-1") / "meta.properties").exists()
    assert (Path(f"{logs}-2") / "meta.properties").exists()

    bootstrap = f"localhost:{ports[0]}"
    create_topic(java_peers, bootstrap, TOPIC, partitions=1, replication_factor=3)

    def in_sync() -> dict[str, str] | None:
        (row,) = describe_partitions(java_peers, bootstrap, TOPIC)
        return row if len(row["Isr"].split(",")) == 3 else None

    row = wait_until(in_sync, timeout=60, what="three replicas in the Isr")
    assert sorted(row["Replicas"].split(",")) == ["0", "1", "2"]
    assert sorted(row["Isr"].split(",")) == ["0", "1", "2"]

    # kafka-metadata-quorum.sh: node 0 is the quorum, the joined brokers its observers
    replication = java_peers.run(
        QUORUM_COMMAND, "--bootstrap-server", bootstrap, "describe", "--replication"
    ).stdout
    roles = {line.split()[0]: line.split()[-1] for line in replication.splitlines()[1:] if line}
    assert roles == {"0": "Leader", "1": "Observer", "2": "Observer"}, replication


def test_a_copy_started_before_the_first_node_stops_on_sigterm_while_it_waits(
    tmp_path: Path,
) -> None:
    """Started first, a joining broker waits for the quorum; Ctrl-C or SIGTERM stops it
    there, cleanly (exit status 0), as it does once it serves."""
    port, controller_port = free_port(), free_port()
    shipped = SHIPPED.read_text().replace("19093", str(controller_port))
    properties = tmp_path / "server-1.properties"
    properties.write_text(
        edited(
            shipped,
            [
                ("broker.id", "1"),
                ("listeners", f"PLAINTEXT://:{port}"),
                ("log.dirs", f"{tmp_path}/l"),
            ],
        )
    )
    broker = PropertiesFileBroker(tmp_path, properties, port)
    broker.launch()
    wait_until(
        lambda: "metadata quorum: leader unknown" in broker.log_tail(20_000),
        timeout=60,
        what=lambda: f"the broker waiting for the quorum:\n{broker.log_tail()}",
    )
    broker.stop()
    assert "shutting down before the broker started" in broker.log_tail(20_000)
