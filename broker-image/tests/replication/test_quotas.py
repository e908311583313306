"""Replication quotas: Kafka's SimpleRate window, which partitions a throttled-replicas
config throttles on a broker, and a quota that follows kafka-configs.sh changes at once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.static.primitive import i8
from strom.cluster import config_cache, loader, records
from strom.cluster import image as images
from strom.config import broker as broker_config
from strom.config import definitions, topics
from strom.records import batches
from strom.replication import fetcher, quotas
from strom.replication import partition as partitions
from strom.storage import log_config, partition_log


def test_a_first_burst_is_measured_over_one_sample_not_over_no_time() -> None:
    window = quotas.RateWindow(samples=11, sample_s=1.0)
    window.record(50_000, now=100.0)
    assert window.rate(100.0) == 50_000  # not 50 000 / 0 s
    assert window.rate(102.0) == 25_000  # the window grows with the time since its start


def test_the_rate_covers_the_samples_of_the_window_and_forgets_older_ones() -> None:
    window = quotas.RateWindow(samples=11, sample_s=1.0)
    for second in range(10):
        window.record(10_000, now=100.0 + second)
    assert window.rate(110.0) == pytest.approx(100_000 / 10)
    # 11 s after the first sample began it is forgotten; the others are still counted
    assert window.rate(111.0) == pytest.approx(90_000 / 10)
    assert window.rate(130.0) == 0.0


def test_records_within_one_sample_add_up() -> None:
    window = quotas.RateWindow(samples=2, sample_s=1.0)
    window.record(1_000, now=0.0)
    window.record(1_000, now=0.5)
    window.record(1_000, now=1.0)  # a second sample
    window.record(1_000, now=2.0)  # a third: the first goes (two samples kept)
    assert window.rate(2.0) == pytest.approx(2_000 / 1.0)


@pytest.mark.parametrize(
    ("value", "node_id", "throttled"),
    [
        (("*",), 1, None),
        ((" * ",), 7, None),
        (("0:1", "1:2", "2:1"), 1, frozenset({0, 2})),
        (("0:1", "1:2", "2:1"), 2, frozenset({1})),
        (("0:1", "1:2"), 3, frozenset()),
        (("",), 1, frozenset()),
        (("10:101", " 3:101 "), 101, frozenset({3, 10})),
    ],
)
def test_throttled_partitions_are_those_naming_this_broker(
    value: tuple[str, ...], node_id: int, throttled: frozenset[int] | None
) -> None:
    assert quotas.throttled_partitions(value, node_id) == throttled


@pytest.mark.parametrize("value", ["*", "0:1,1:2", " 0:1 , 1:2 ", ""])
def test_valid_throttled_replica_lists(value: str) -> None:
    topics.validate_topic_configs({"leader.replication.throttled.replicas": value})


@pytest.mark.parametrize("value", ["0-1", "0:1,*", "a:1", "0:1:2", "*,*"])
def test_invalid_throttled_replica_lists_are_refused(value: str) -> None:
    with pytest.raises(definitions.ConfigError, match="literal"):
        topics.validate_topic_configs({"follower.replication.throttled.replicas": value})


class StillClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def time_ms(self) -> int:
        return int(self.now * 1000)

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)  # time moves only when the test moves it


class Node:
    """Broker 2's config cache, fed metadata records as the broker's would be."""

    def __init__(self, root: Path) -> None:
        self.metadata = loader.MetadataLoader(images.MetadataImage("c"))
        static = broker_config.BrokerConfig({"log.dirs": str(root), "node.id": "2"})
        self.configs = config_cache.ConfigCache(static, lambda: self.metadata.image)
        self.metadata.add_publisher(self.configs)
        self.clock = StillClock()
        self.quotas = quotas.ReplicationQuotas.from_configs(2, self.configs, self.clock)
        self.commit(records.TopicRecord(name="moving", topic_id=uuid.uuid4()))

    def commit(self, *entries: records.MetadataRecord) -> None:
        self.metadata.load(self.metadata.stage((-1, e) for e in entries))

    def set(self, resource_type: int, resource: str, name: str, value: str | None) -> None:
        self.commit(
            records.ConfigRecord(
                resource_type=i8(resource_type), resource_name=resource, name=name, value=value
            )
        )


def test_a_quota_follows_the_dynamic_configs(tmp_path: Path) -> None:
    node = Node(tmp_path)
    leader = node.quotas.leader
    leader.record(1_000_000)  # a megabyte of some throttled partition, just now
    # Nothing configured: nothing throttled, and no rate is too high.
    assert not leader.is_throttled("moving", 0)
    assert not leader.is_exceeded()

    node.set(records.TOPIC_RESOURCE, "moving", "leader.replication.throttled.replicas", "0:2,1:3")
    node.set(records.BROKER_RESOURCE, "2", "leader.replication.throttled.rate", "50000")
    assert leader.is_throttled("moving", 0)
    assert not leader.is_throttled("moving", 1)  # broker 3's entry
    assert leader.is_exceeded()
    assert leader.should_throttle("moving", 0, in_sync=False)
    assert not leader.should_throttle("moving", 0, in_sync=True)  # never an in-sync replica
    assert not leader.should_throttle("moving", 1, in_sync=False)
    # The follower side has its own configs, unset here.
    assert not node.quotas.follower.should_throttle("moving", 0, in_sync=False)

    node.clock.now += 25  # 20 s at 50 000 B/s would do; the megabyte has left the window
    assert not leader.is_exceeded()
    leader.record(1_000_000)
    assert leader.is_exceeded()
    # A cluster-wide default applies too; --verify's removal lifts the throttle.
    node.set(records.BROKER_RESOURCE, "2", "leader.replication.throttled.rate", None)
    assert not leader.is_exceeded()
    node.set(records.BROKER_RESOURCE, "", "leader.replication.throttled.rate", "1000")
    assert leader.is_exceeded()
    node.set(records.TOPIC_RESOURCE, "moving", "leader.replication.throttled.replicas", None)
    assert not leader.should_throttle("moving", 0, in_sync=False)
    assert leader.bytes_total == 2_000_000


def test_a_wildcard_throttles_every_partition_of_the_topic(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.set(records.TOPIC_RESOURCE, "moving", "follower.replication.throttled.replicas", "*")
    node.set(records.BROKER_RESOURCE, "2", "follower.replication.throttled.rate", "10")
    follower = node.quotas.follower
    follower.record(100)
    assert follower.should_throttle("moving", 5, in_sync=False)
    assert not follower.is_throttled("other", 0)
    assert follower.byte_rate() == 100.0


class ScriptedLeader:
    """Broker 1 at the other end of the fetcher's channel: it answers every partition asked
    for with two 1 000-byte records at the fetch offset, and a high watermark far ahead
    (the follower stays behind), and notes which partitions each fetch named."""

    def __init__(self) -> None:
        self.fetches: list[set[tuple[str, int]]] = []
        self.fetched = asyncio.Event()

    async def send(self, node_id: int, request: Any, **_: Any) -> Any:
        await asyncio.sleep(0)
        asked = set()
        topics = []
        for topic in request.fields["topics"]:
            answers = []
            for wanted in topic["partitions"]:
                asked.add((topic["topic"], wanted["partition"]))
                offset = wanted["fetch_offset"]
                records = batches.build_batch(
                    [(None, b"x" * 1000, [], 0)] * 2, base_offset=offset, partition_leader_epoch=0
                )
                answers.append(
                    SimpleNamespace(
                        partition_index=wanted["partition"],
                        error_code=0,
                        diverging_epoch=None,
                        high_watermark=offset + 1000,
                        records=records,
                    )
                )
            topics.append(SimpleNamespace(topic=topic["topic"], partitions=answers))
        self.fetches.append(asked)
        self.fetched.set()
        return SimpleNamespace(error_code=0, session_id=0, responses=topics)  # no sessions

    async def close(self) -> None:
        pass

    async def wait_for(self, done: Callable[[list[set[tuple[str, int]]]], bool]) -> None:
        async with asyncio.timeout(5):
            while not done(self.fetches):
                self.fetched.clear()
                await self.fetched.wait()


async def test_a_follower_over_its_quota_leaves_throttled_partitions_out_of_its_fetches(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    node.commit(records.TopicRecord(name="steady", topic_id=uuid.uuid4()))
    node.set(records.TOPIC_RESOURCE, "moving", "follower.replication.throttled.replicas", "0:2")
    node.set(records.BROKER_RESOURCE, "2", "follower.replication.throttled.rate", "1000")
    leader = ScriptedLeader()
    settings = fetcher.FetchSettings(backoff_ms=0)
    fetchers = fetcher.Fetchers(2, lambda: 1, leader, settings, node.clock, node.quotas.follower)
    logs = []
    try:
        for topic in ("moving", "steady"):
            log = partition_log.PartitionLog.open(
                tmp_path / f"{topic}-0", log_config.LogConfig(), lambda: 0
            )
            logs.append(log)
            at = images.PartitionImage(0, (1, 2), (1,), leader=1, leader_epoch=0, partition_epoch=0)
            followed = partitions.Partition(topic, 0, log, 2, at)
            fetchers.follow(followed)
        # The first fetch asks for both (nothing recorded yet); 2 000 bytes of "moving"
        # put the follower over 1 000 B/s, so the next ones ask for "steady" alone.
        await leader.wait_for(lambda fetches: len(fetches) >= 3)
        assert leader.fetches[0] == {("moving", 0), ("steady", 0)}
        assert leader.fetches[1:3] == [{("steady", 0)}] * 2
        assert node.quotas.follower.bytes_total > 2000

        node.clock.now += 60  # what it fetched has left the quota window
        await leader.wait_for(lambda fetches: ("moving", 0) in fetches[-1])
    finally:
        await fetchers.close()
        for log in logs:
            log.close()
