"""The controller over a real metadata log and real partition logs: what it creates, what
it refuses, and that a failure leaves nothing half-made behind."""

from __future__ import annotations

import asyncio
import collections
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
from strom.cluster import (
    broker_sessions,
    config_cache,
    controller,
    loader,
    metadata_log,
    records,
    topic_requests,
    topics,
)
from strom.cluster import image as images
from strom.config import broker as broker_config
from strom.config import definitions
from strom.replication import replica_manager

START_MS = 1_700_000_000_000


class FixedClock:
    """Time that stands still: these tests never wait on it."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def time_ms(self) -> int:
        return self.now_ms

    def monotonic(self) -> float:
        return self.now_ms / 1000

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("nothing here sleeps")


class FlakyLog:
    """The real metadata log, failing the next `failures` appends as a full disk would."""

    def __init__(self, inner: metadata_log.LocalMetadataLog) -> None:
        self.inner = inner
        self.failures = 0
        self.appends = 0

    async def append(self, entries: Sequence[records.MetadataRecord]) -> int:
        self.appends += 1
        if self.failures:
            self.failures -= 1
            raise metadata_log.MetadataLogError("No space left on device")
        return await self.inner.append(entries)

    def read_committed(self) -> Iterator[tuple[int, records.MetadataRecord]]:
        return self.inner.read_committed()

    def close(self) -> None:
        self.inner.close()


class Node:
    """The metadata half of a broker, wired as the broker wires it."""

    def __init__(self, root: Path, **settings: str) -> None:
        self.root = root
        self.config = broker_config.BrokerConfig(
            {"log.dirs": str(root), "num.partitions": "3", **settings}
        )
        self.log = FlakyLog(metadata_log.LocalMetadataLog(root, lambda: START_MS))
        self.metadata = loader.MetadataLoader(images.MetadataImage("cluster"))
        self.metadata.load(self.metadata.stage(self.log.read_committed()))
        self.configs = config_cache.ConfigCache(self.config, lambda: self.metadata.image)
        self.replicas = replica_manager.ReplicaManager(
            1, self.config.log_dirs, self.configs, FixedClock(START_MS)
        )
        self.replicas.load(self.metadata.image)
        self.metadata.add_publisher(self.configs)
        self.metadata.add_publisher(self.replicas)
        self.controller = controller.Controller(
            1, self.log, self.metadata, lambda: self.configs.broker, self.replicas
        )

    @property
    def image(self) -> images.MetadataImage:
        return self.metadata.image

    def partition_dirs(self) -> set[str]:
        return {p.name for p in self.root.iterdir() if p.is_dir()} - {"__cluster_metadata-0"}

    def close(self) -> None:
        self.replicas.close()
        self.log.close()


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    opened = Node(tmp_path)
    yield opened
    opened.close()


async def test_a_created_topic_is_durable_served_and_replayed(tmp_path: Path) -> None:
    first = Node(tmp_path)
    (outcome,) = await first.controller.create_topics(
        [topic_requests.NewTopic("orders", 4, 1, configs={"retention.ms": "1000"})]
    )
    assert outcome.error is None and outcome.partitions == 4 and outcome.replication_factor == 1
    topic = first.image.topics["orders"]
    assert topic.topic_id == outcome.topic_id and dict(topic.configs) == {"retention.ms": "1000"}
    assert [p.leader for p in topic.partitions.values()] == [1, 1, 1, 1]
    assert first.replicas.partition("orders", 3) is not None
    assert first.partition_dirs() == {f"orders-{i}" for i in range(4)}
    first.close()

    second = Node(tmp_path)
    try:
        again = second.image.topics["orders"]
        assert again.topic_id == topic.topic_id and again.partition_count == 4
        assert dict(again.configs) == {"retention.ms": "1000"}
        assert second.replicas.partition("orders", 0) is not None
    finally:
        second.close()


async def test_refusals_name_the_problem_as_kafka_does(node: Node) -> None:
    await node.controller.create_topics(
        [topic_requests.NewTopic("orders", 1, 1), topic_requests.NewTopic("my.topic", 1, 1)]
    )
    outcomes = await node.controller.create_topics(
        [
            topic_requests.NewTopic("orders", 1, 1),
            topic_requests.NewTopic("my_topic", 1, 1),
            topic_requests.NewTopic("bad name", 1, 1),
            topic_requests.NewTopic("zero", 0, 1),
            topic_requests.NewTopic("replicated", 1, 3),
            topic_requests.NewTopic("configured", 1, 1, configs={"retention.ms": "soon"}),
            topic_requests.NewTopic("__cluster_metadata", 1, 1),
            topic_requests.NewTopic("fine", -1, -1),
        ]
    )
    errors = {o.name: o.error for o in outcomes}
    assert isinstance(errors["orders"], topics.TopicExistsError)
    assert isinstance(errors["my_topic"], topics.InvalidTopicError)
    assert "collides" in str(errors["my_topic"])
    assert isinstance(errors["bad name"], topics.InvalidTopicError)
    assert isinstance(errors["zero"], topics.InvalidPartitionsError)
    assert isinstance(errors["replicated"], topics.InvalidReplicationFactorError)
    assert "only 1 broker(s) are registered" in str(errors["replicated"])
    assert isinstance(errors["configured"], definitions.ConfigError)
    assert isinstance(errors["__cluster_metadata"], topics.InvalidTopicError)
    assert errors["fine"] is None
    assert node.image.topics["fine"].partition_count == 3  # num.partitions
    assert set(node.image.topics) == {"orders", "my.topic", "fine"}


async def test_validate_only_answers_without_creating_anything(node: Node) -> None:
    (outcome,) = await node.controller.create_topics(
        [topic_requests.NewTopic("planned", 5, 1)], validate_only=True
    )
    assert outcome.error is None and outcome.partitions == 5 and outcome.topic_id is None
    assert node.image.topics == {} and node.partition_dirs() == set()
    assert node.log.appends == 0


async def test_one_request_may_not_create_more_than_ten_thousand_partitions(node: Node) -> None:
    outcomes = await node.controller.create_topics(
        [topic_requests.NewTopic("small", 1, 1), topic_requests.NewTopic("huge", 10_000, 1)]
    )
    # Kafka refuses the whole request, with its words.
    for outcome in outcomes:
        assert isinstance(outcome.error, topics.PolicyViolationError)
        assert str(outcome.error) == "Excessively large number of partitions per request."
    await node.controller.create_topics([topic_requests.NewTopic("t", 1, 1)])
    with pytest.raises(topics.PolicyViolationError):
        await node.controller.create_partitions("t", 16_000_000)
    assert node.image.topics["t"].partition_count == 1
    assert node.partition_dirs() == {"t-0"}


async def test_a_broker_hosts_at_most_max_partitions_per_broker(tmp_path: Path) -> None:
    node = Node(tmp_path, **{"max.partitions.per.broker": "10"})
    try:
        (first,) = await node.controller.create_topics([topic_requests.NewTopic("a", 8, 1)])
        assert first.error is None
        (second,) = await node.controller.create_topics([topic_requests.NewTopic("b", 3, 1)])
        assert isinstance(second.error, topics.PolicyViolationError)
        assert "max.partitions.per.broker" in str(second.error)
        with pytest.raises(topics.PolicyViolationError):
            await node.controller.create_partitions("a", 11)
        await node.controller.create_partitions("a", 10)
        assert node.image.topics["a"].partition_count == 10
    finally:
        node.close()


async def test_a_failed_metadata_write_leaves_no_topic_and_no_logs(node: Node) -> None:
    node.log.failures = 1
    (outcome,) = await node.controller.create_topics([topic_requests.NewTopic("orders", 3, 1)])
    assert isinstance(outcome.error, topics.StorageFailedError)
    assert "orders" not in node.image.topics
    assert node.partition_dirs() == set()  # the prepared logs were removed again
    assert node.replicas.partition("orders", 0) is None
    # Retriable: once the disk takes writes again the same request succeeds.
    (retried,) = await node.controller.create_topics([topic_requests.NewTopic("orders", 3, 1)])
    assert retried.error is None and node.partition_dirs() == {"orders-0", "orders-1", "orders-2"}


async def test_a_failed_log_creation_leaves_nothing_behind(node: Node) -> None:
    # A file where a partition directory must go: creating that log fails.
    (node.root / "orders-2").write_text("in the way")
    (outcome,) = await node.controller.create_topics([topic_requests.NewTopic("orders", 3, 1)])
    assert isinstance(outcome.error, topics.StorageFailedError)
    assert "orders" not in node.image.topics
    assert node.partition_dirs() == set()
    assert node.log.appends == 0  # nothing reached the metadata log


async def test_concurrent_creates_of_one_name_make_one_topic(node: Node) -> None:
    results = await asyncio.gather(
        *(node.controller.create_topics([topic_requests.NewTopic("race", 2, 1)]) for _ in range(5))
    )
    errors = [outcome.error for (outcome,) in results]
    assert sum(e is None for e in errors) == 1
    assert all(isinstance(e, topics.TopicExistsError) for e in errors if e is not None)


async def test_config_changes_are_stored_as_differences(node: Node) -> None:
    await node.controller.create_topics([topic_requests.NewTopic("t", 1, 1)])
    await node.controller.set_topic_configs("t", {"retention.ms": "5", "segment.bytes": "4096"})
    await node.controller.set_topic_configs("t", {"retention.ms": "6"})
    assert dict(node.image.topics["t"].configs) == {"retention.ms": "6"}
    partition = node.replicas.partition("t", 0)
    assert partition is not None and partition.log.config.retention_ms == 6
    await node.controller.set_broker_configs("", {"log.retention.bytes": "777"})
    assert node.configs.broker.dynamic_cluster_defaults() == {"log.retention.bytes": "777"}
    assert partition.log.config.retention_bytes == 777
    with pytest.raises(topics.UnknownTopicError):
        await node.controller.set_topic_configs("missing", {})


async def test_deleting_a_topic_removes_its_logs(node: Node) -> None:
    await node.controller.create_topics([topic_requests.NewTopic("gone", 2, 1)])
    outcomes = await node.controller.delete_topics(["gone", "never"])
    assert outcomes["gone"] is None
    assert isinstance(outcomes["never"], topics.UnknownTopicError)
    assert "gone" not in node.image.topics and node.replicas.partition("gone", 0) is None
    assert not any(
        name.startswith("gone-") and not name.endswith("-delete") for name in node.partition_dirs()
    )


async def test_producer_id_blocks_are_never_handed_out_twice(tmp_path: Path) -> None:
    first = Node(tmp_path)
    blocks = [await first.controller.allocate_producer_ids(1) for _ in range(3)]
    assert [b.start for b in blocks] == [0, 1000, 2000]
    first.close()
    second = Node(tmp_path)
    try:
        assert (await second.controller.allocate_producer_ids(1)).start == 3000
    finally:
        second.close()


def registration(
    node_id: int, incarnation: uuid.UUID, rack: str | None = None
) -> broker_sessions.Registration:
    return broker_sessions.Registration(
        node_id=node_id,
        cluster_id="cluster",
        incarnation_id=incarnation,
        endpoints=(images.BrokerEndpoint("PLAINTEXT", f"10.0.0.{node_id}", 9092, 0),),
        rack=rack,
    )


async def test_brokers_register_fenced_and_are_unfenced_once_caught_up(node: Node) -> None:
    first = uuid.uuid4()
    epoch = await node.controller.register_broker(registration(2, first, "b"), now_ms=0)
    assert node.image.brokers[2].fenced and node.image.brokers[2].rack == "b"
    behind = await node.controller.broker_heartbeat(
        2, epoch, epoch - 1, want_fence=False, want_shut_down=False, now_ms=1000
    )
    assert behind.is_fenced and not behind.is_caught_up
    caught_up = await node.controller.broker_heartbeat(
        2, epoch, node.image.offset, want_fence=False, want_shut_down=False, now_ms=2000
    )
    assert not caught_up.is_fenced and [b.node_id for b in node.image.live_brokers()] == [2]
    # Another incarnation while this one's session lives: refused, as Kafka does.
    with pytest.raises(broker_sessions.DuplicateBrokerRegistrationError):
        await node.controller.register_broker(registration(2, uuid.uuid4()), now_ms=3000)
    with pytest.raises(broker_sessions.StaleBrokerEpochError):
        await node.controller.broker_heartbeat(
            2, epoch + 100, 0, want_fence=False, want_shut_down=False, now_ms=3000
        )
    # No heartbeat for broker.session.timeout.ms (9 s): fenced.
    assert await node.controller.fence_expired_brokers(now_ms=5000) == []
    assert await node.controller.fence_expired_brokers(now_ms=11_001) == [2]
    assert node.image.brokers[2].fenced and node.image.live_brokers() == []
    # Its session over, a new incarnation may register (a restarted broker).
    again = await node.controller.register_broker(registration(2, uuid.uuid4()), now_ms=12_000)
    assert again > epoch


async def test_a_restarted_broker_leaves_its_leaderships_and_isrs_at_registration(
    node: Node,
) -> None:
    """A new incarnation registered while its old one still leads (its session ran out
    but was not fenced yet, or a new controller never heard of it) must not keep those
    leaderships at the same leader epoch: it may have lost what it had not flushed. As
    Kafka's handleBrokerUncleanShutdown: out of every ISR and leadership, as if fenced."""
    incarnations = {node_id: uuid.uuid4() for node_id in (2, 3, 4)}
    for node_id, incarnation in incarnations.items():
        epoch = await node.controller.register_broker(registration(node_id, incarnation), now_ms=0)
        await node.controller.broker_heartbeat(
            node_id, epoch, node.image.offset, want_fence=False, want_shut_down=False, now_ms=0
        )
    (outcome,) = await node.controller.create_topics([topic_requests.NewTopic("led", 6, 3)])
    assert outcome.error is None
    led_by_2 = {
        index: partition.leader_epoch
        for index, partition in node.image.topics["led"].partitions.items()
        if partition.leader == 2
    }
    assert led_by_2
    # broker 2's session ran out (9 s) but no fencing pass ran yet; it restarted
    await node.controller.register_broker(registration(2, uuid.uuid4()), now_ms=9_500)
    for index, partition in node.image.topics["led"].partitions.items():
        assert 2 not in partition.isr and partition.leader != 2, (index, partition)
        if index in led_by_2:
            assert partition.leader in (3, 4)
            assert partition.leader_epoch > led_by_2[index]
    # the same incarnation registering again (a retry) moves nothing
    before = node.image.topics["led"]
    await node.controller.register_broker(registration(3, incarnations[3]), now_ms=9_600)
    assert node.image.topics["led"] == before


async def test_new_replicas_go_to_the_live_brokers_across_racks(node: Node) -> None:
    for node_id, rack in ((1, "a"), (2, "a"), (3, "b"), (4, "b")):
        epoch = await node.controller.register_broker(
            registration(node_id, uuid.uuid4(), rack), now_ms=0
        )
        await node.controller.broker_heartbeat(
            node_id, epoch, node.image.offset, want_fence=False, want_shut_down=False, now_ms=0
        )
    (outcome,) = await node.controller.create_topics([topic_requests.NewTopic("spread", 8, 2)])
    assert outcome.error is None
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    topic = node.image.topics["spread"]
    for partition in topic.partitions.values():
        assert len({racks[r] for r in partition.replicas}) == 2
    leaders = collections.Counter(p.leader for p in topic.partitions.values())
    assert sorted(leaders.values()) == [2, 2, 2, 2]
    # This node hosts only the partitions placed on it.
    local = {p.index for p in topic.partitions.values() if 1 in p.replicas}
    assert {i for i in range(8) if node.replicas.partition("spread", i)} == local


async def test_a_request_cancelled_midway_still_commits_what_it_wrote(tmp_path: Path) -> None:
    # A client that goes away cancels its request; the controller's write must finish and
    # be applied before the next operation validates against the image.
    node = Node(tmp_path)
    first = asyncio.ensure_future(
        node.controller.create_topics([topic_requests.NewTopic("a", 600, 1)])
    )
    for _ in range(3):
        await asyncio.sleep(0)  # into the worker thread that makes the logs
    first.cancel()
    (again,) = await node.controller.create_topics([topic_requests.NewTopic("a", 1, 1)])
    assert isinstance(again.error, topics.TopicExistsError)
    assert node.image.topics["a"].partition_count == 600
    node.close()
    reopened = Node(tmp_path)  # the log replays into the same image
    try:
        assert reopened.image.topics["a"].partition_count == 600
    finally:
        reopened.close()


async def test_a_controller_active_again_gives_every_broker_a_fresh_session(node: Node) -> None:
    """Heartbeats went to another controller while this one was not active: what it
    remembers of them is stale, and must not fence every broker at once."""
    epoch = await node.controller.register_broker(registration(2, uuid.uuid4()), now_ms=0)
    await node.controller.broker_heartbeat(
        2, epoch, node.image.offset, want_fence=False, want_shut_down=False, now_ms=1000
    )
    assert not node.image.brokers[2].fenced
    # ... another controller was active from 2 s to 60 s, then this one again:
    node.controller.activate_sessions(now_ms=60_000)
    assert await node.controller.fence_expired_brokers(now_ms=60_500) == []
    assert await node.controller.fence_expired_brokers(now_ms=69_001) == [2]


async def test_the_next_session_expiry_is_the_earliest_live_broker_deadline(node: Node) -> None:
    assert node.controller.next_session_expiry_ms(now_ms=0) is None  # no broker yet
    epoch = await node.controller.register_broker(registration(2, uuid.uuid4()), now_ms=0)
    await node.controller.broker_heartbeat(
        2, epoch, node.image.offset, want_fence=False, want_shut_down=False, now_ms=1000
    )
    assert node.controller.next_session_expiry_ms(now_ms=1500) == 10_000  # 1 s + 9 s
