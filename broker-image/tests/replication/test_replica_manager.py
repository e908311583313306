"""The replica manager as a metadata publisher: logs opened for partitions placed here,
deleted with their topic, handed new configs, and prepared in bulk before a commit."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kio.static.primitive import i8, i32
from strom.cluster import config_cache, loader, records, topics
from strom.cluster import image as images
from strom.config import broker as broker_config
from strom.replication import replica_manager

NOW = 1_700_000_000_000


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


class Node:
    def __init__(self, root: Path) -> None:
        self.root = root
        config = broker_config.BrokerConfig({"log.dirs": str(root)})
        self.metadata = loader.MetadataLoader(images.MetadataImage("c"))
        self.configs = config_cache.ConfigCache(config, lambda: self.metadata.image)
        self.replicas = replica_manager.ReplicaManager(1, [root], self.configs, FixedClock(NOW))
        self.replicas.load(self.metadata.image)
        self.metadata.add_publisher(self.configs)
        self.metadata.add_publisher(self.replicas)

    def commit(self, *entries: records.MetadataRecord) -> images.MetadataImage:
        return self.metadata.load(self.metadata.stage((-1, e) for e in entries))

    def dirs(self) -> set[str]:
        return {
            p.name for p in self.root.iterdir() if p.is_dir() and not p.name.endswith("-delete")
        }


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    made = Node(tmp_path)
    yield made
    made.replicas.close()


def partition(
    topic_id: uuid.UUID, index: int, replicas: tuple[int, ...]
) -> records.PartitionRecord:
    return records.PartitionRecord(
        partition_id=i32(index),
        topic_id=topic_id,
        replicas=tuple(i32(r) for r in replicas),
        isr=tuple(i32(r) for r in replicas),
        leader=i32(replicas[0]),
        leader_epoch=i32(0),
        partition_epoch=i32(0),
    )


def test_only_partitions_placed_here_are_opened_and_served(node: Node) -> None:
    topic_id = uuid.uuid4()
    node.commit(
        records.TopicRecord(name="t", topic_id=topic_id),
        partition(topic_id, 0, (1, 2)),
        partition(topic_id, 1, (2, 3)),  # not on this broker
        partition(topic_id, 2, (3, 1)),
    )
    assert node.dirs() == {"t-0", "t-2"}
    served = node.replicas.partition("t", 2)
    assert served is not None and served.leader == 3 and not served.is_leader
    assert node.replicas.partition("t", 1) is None


def test_leadership_changes_reach_the_partition(node: Node) -> None:
    topic_id = uuid.uuid4()
    node.commit(records.TopicRecord(name="t", topic_id=topic_id), partition(topic_id, 0, (1, 2)))
    node.commit(
        records.PartitionChangeRecord(partition_id=i32(0), topic_id=topic_id, leader=i32(2))
    )
    served = node.replicas.partition("t", 0)
    assert served is not None
    assert (served.leader, served.leader_epoch, served.is_leader) == (2, 1, False)


def test_a_removed_topic_takes_its_logs_and_configs_apply_at_once(node: Node) -> None:
    topic_id = uuid.uuid4()
    node.commit(records.TopicRecord(name="t", topic_id=topic_id), partition(topic_id, 0, (1,)))
    node.commit(
        records.ConfigRecord(
            resource_type=i8(records.TOPIC_RESOURCE),
            resource_name="t",
            name="retention.ms",
            value="42",
        )
    )
    served = node.replicas.partition("t", 0)
    assert served is not None and served.log.config.retention_ms == 42
    node.commit(records.RemoveTopicRecord(topic_id=topic_id))
    assert node.replicas.partition("t", 0) is None
    assert "t-0" not in node.dirs()


async def test_prepared_logs_are_made_in_bulk_and_abandoned_on_request(node: Node) -> None:
    keys = [("bulk", index) for index in range(1200)]  # more than one worker-thread batch
    await node.replicas.prepare_logs(keys)
    assert len(node.dirs()) == 1200
    await node.replicas.abandon_logs(keys)
    assert node.dirs() == set()


async def test_a_disk_error_while_preparing_removes_what_was_made(node: Node) -> None:
    (node.root / "bulk-700").write_text("a file where a partition directory must go")
    with pytest.raises(topics.StorageFailedError):
        await node.replicas.prepare_logs([("bulk", index) for index in range(1000)])
    assert node.dirs() == set()


async def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within 10 s: {what}")
        await asyncio.sleep(0.01)


async def test_replicas_placed_here_by_another_controller_are_made_off_the_event_loop(
    node: Node,
) -> None:
    topic_id = uuid.uuid4()
    node.commit(
        records.TopicRecord(name="big", topic_id=topic_id),
        *(partition(topic_id, index, (1, 2)) for index in range(600)),
    )
    # the publish returned before the logs exist: they are made in worker threads
    assert node.replicas.partition("big", 599) is None
    await wait_for(lambda: len(node.replicas) == 600, "all 600 replicas served")
    served = node.replicas.partition("big", 599)
    assert served is not None and served.is_leader
    assert len([d for d in node.dirs() if d.startswith("big-")]) == 600


async def test_a_topic_deleted_while_its_logs_are_made_leaves_nothing(node: Node) -> None:
    topic_id = uuid.uuid4()
    node.commit(
        records.TopicRecord(name="gone", topic_id=topic_id),
        *(partition(topic_id, index, (1,)) for index in range(600)),
    )
    node.commit(records.RemoveTopicRecord(topic_id=topic_id))
    await wait_for(lambda: not node.replicas._creating, "the creation finished")
    assert node.replicas.partition("gone", 0) is None
    assert not [d for d in node.dirs() if d.startswith("gone-")]
