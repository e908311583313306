"""What the operator's real-tier test sees of Kafka: the bootstrap Service's addresses, the
brokers' Metadata (leaders, replicas, ISR) and a producer that counts what was acknowledged.

There is no kube-proxy and no DNS on this machine: a client here cannot use the bootstrap
Service's ClusterIP or name. `bootstrap_servers` does what kube-proxy would do for it: it
resolves the Service to its ready endpoints through the Service's EndpointSlices.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource
from k8s_harness import Cluster

KAFKA_PORT = 9092


def bootstrap_servers(cluster: Cluster, namespace: str, service: str) -> str:
    """host:port of every ready endpoint of `service`, from its EndpointSlices."""
    slices = cluster.get(
        "endpointslices", "-n", namespace, "-l", f"kubernetes.io/service-name={service}"
    )["items"]
    addresses = sorted(
        address
        for endpoint_slice in slices
        for endpoint in endpoint_slice.get("endpoints") or []
        if (endpoint.get("conditions") or {}).get("ready", True)
        for address in endpoint["addresses"]
    )
    return ",".join(f"{address}:{KAFKA_PORT}" for address in addresses)


@dataclass(frozen=True)
class PartitionView:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def metadata(
    bootstrap: str, topics: list[str] | None = None, timeout: float = 5
) -> dict[str, list[PartitionView]]:
    """Each topic's partitions (all topics, internal ones included, without `topics`) as
    the brokers' Metadata answer shows them."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000)})
    answer = admin.list_topics(timeout=timeout)
    views: dict[str, list[PartitionView]] = {}
    for name in answer.topics if topics is None else topics:
        topic = answer.topics.get(name)
        if topic is None or topic.error is not None:
            raise KeyError(f"topic {name} not in Metadata ({topic and topic.error})")
        views[name] = [
            PartitionView(p.leader, tuple(p.replicas), tuple(p.isrs))
            for _, p in sorted(topic.partitions.items())
        ]
    return views


def leader_counts(views: dict[str, list[PartitionView]]) -> Counter[int]:
    return Counter(p.leader for partitions in views.values() for p in partitions)


def replica_counts(views: dict[str, list[PartitionView]]) -> Counter[int]:
    return Counter(r for partitions in views.values() for p in partitions for r in p.replicas)


def broker_config(bootstrap: str, broker_id: int, key: str) -> str | None:
    """The value broker `broker_id` reports for `key` (DescribeConfigs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    entry = entries.get(key)
    return None if entry is None else entry.value


@dataclass
class RunningProducer:
    """A producer thread (acks=all, idempotent) writing numbered records to `topic` until
    stopped; `acknowledged` holds the values the brokers acknowledged."""

    bootstrap: str
    topic: str
    prefix: str
    acknowledged: set[str] = field(default_factory=set)
    failed: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def __enter__(self) -> RunningProducer:
        self._thread = threading.Thread(target=self._run, name=f"produce-{self.prefix}")
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=90)
            assert not self._thread.is_alive(), "the producer did not finish its flush"
            self._thread = None

    def acknowledged_so_far(self) -> set[str]:
        """A copy taken while the producer runs (its thread adds to the set)."""
        with self._lock:
            return set(self.acknowledged)

    def acknowledged_after(self, count: int, timeout: float) -> bool:
        """True once more than `count` records are acknowledged (within `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.acknowledged) > count:
                return True
            time.sleep(0.1)
        return False

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                # a leader gone for a while is retried, not failed
                "message.timeout.ms": 120000,
            }
        )

        def delivered(err: KafkaError | None, msg: object) -> None:
            value = msg.value().decode()  # type: ignore[attr-defined]
            with self._lock:
                (self.failed.append(f"{value}: {err}") if err else self.acknowledged.add(value))

        sequence = 0
        while not self._stop.is_set():
            try:
                producer.produce(
                    self.topic, value=f"{self.prefix}-{sequence}", on_delivery=delivered
                )
                sequence += 1
            except BufferError:
                pass  # the queue is full while a leader moves: wait for deliveries
            producer.poll(0.01)  # ~100 records/s: enough to hit every moment of a roll
        producer.flush(80)


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60) -> list[str]:
    """Every record of `topic` from the beginning, up to each partition's end offset."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"k8s-operator-e2e-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        ends = {}
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        positions = dict.fromkeys(range(partitions), 0)
        values: list[str] = []
        deadline = time.monotonic() + timeout
        while any(positions[p] < ends[p] for p in positions) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error() is not None:
                raise KafkaException(msg.error())
            values.append(msg.value().decode())
            positions[msg.partition()] = msg.offset() + 1
        missing = {p: (positions[p], ends[p]) for p in positions if positions[p] < ends[p]}
        assert not missing, f"not read to the end within {timeout}s: {missing}"
        return values
    finally:
        consumer.close()
