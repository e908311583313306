"""The cluster and quorum gauges of /metrics (brokers online and fenced, preferred-leader
imbalance and leaders per broker on the active controller; Raft state, epoch, high
watermark, log end, commit lag, applied metadata offset), the process collector, the
listener label of the request metrics and the fetch purgatory."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from broker_calls import call, consumer_fetch, create_topic, loaded
from kio.schema.errors import ErrorCode
from prometheus_client import generate_latest
from strom.cluster import image as images
from strom.cluster.raft import states
from strom.server import broker as broker_module
from strom.server import cluster_metrics

FETCH = 1


def sample(broker: broker_module.Broker, name: str, **labels: str) -> float | None:
    return broker.metrics.registry.get_sample_value(name, labels)


def registered(node_id: int, *, fenced: bool) -> images.BrokerImage:
    return images.BrokerImage(node_id, uuid.uuid4(), 1, (), fenced=fenced)


def topic(name: str, *partitions: tuple[tuple[int, ...], int]) -> images.TopicImage:
    """A topic whose partitions have these (replicas, leader)."""
    return images.TopicImage(
        name,
        uuid.uuid4(),
        {
            index: images.PartitionImage(index, replicas, replicas, leader, 0, 0)
            for index, (replicas, leader) in enumerate(partitions)
        },
    )


IMAGE = images.MetadataImage(
    "c",
    brokers={
        1: registered(1, fenced=False),
        2: registered(2, fenced=False),
        3: registered(3, fenced=True),
    },
    topics={
        "a": topic("a", ((1, 2), 1), ((2, 1), 1), ((3, 1), -1)),
        "b": topic("b", ((2, 3), 2)),
    },
)


def test_the_active_controller_counts_imbalance_and_leaders_per_broker() -> None:
    reading = cluster_metrics.read_cluster(IMAGE, active_controller=True)
    assert (reading.brokers_online, reading.brokers_fenced) == (2, 1)
    # a-1 is led by 1 instead of 2; a-2 has no leader at all
    assert reading.preferred_replica_imbalance == 2
    assert reading.leaders_by_broker == {1: 2, 2: 1, 3: 0}


def test_other_nodes_count_brokers_but_leave_partition_counts_to_the_controller() -> None:
    reading = cluster_metrics.read_cluster(IMAGE, active_controller=False)
    assert (reading.brokers_online, reading.brokers_fenced) == (2, 1)
    assert reading.preferred_replica_imbalance == 0
    assert reading.leaders_by_broker == {}


def test_raft_states_have_kafkas_names() -> None:
    follower = states.FollowerState(epoch=4, leader_id=1, fetch_deadline=0, fetch_timeout_ms=0)
    assert cluster_metrics.raft_state_name(follower, is_voter=True) == "follower"
    assert cluster_metrics.raft_state_name(follower, is_voter=False) == "observer"
    voted = states.UnattachedState(epoch=4, voted_id=2, election_deadline=0)
    assert cluster_metrics.raft_state_name(voted, is_voter=True) == "unattached-voted"
    unattached = states.UnattachedState(epoch=4, voted_id=None, election_deadline=0)
    assert cluster_metrics.raft_state_name(unattached, is_voter=True) == "unattached"


async def test_a_single_broker_scrapes_as_the_quorum_leader_and_active_controller(
    tmp_path: Path,
) -> None:
    broker = await loaded(tmp_path)
    try:
        await create_topic(broker, "counted", 3)
        text = generate_latest(broker.metrics.registry).decode()
        assert 'strom_raft_state{state="leader"} 1.0' in text
        assert 'strom_raft_state{state="follower"} 0.0' in text
        epoch = sample(broker, "strom_raft_current_epoch")
        assert epoch is not None and epoch >= 1
        assert sample(broker, "strom_controller_epoch") == epoch
        assert sample(broker, "strom_raft_current_leader") == broker.node_id
        high_watermark = sample(broker, "strom_raft_high_watermark")
        assert high_watermark == sample(broker, "strom_raft_log_end_offset")
        assert sample(broker, "strom_raft_commit_lag") == 0
        # the image holds everything committed (the topic's records included)
        assert high_watermark is not None and high_watermark > 0
        assert sample(broker, "strom_metadata_applied_offset") == high_watermark - 1
        assert sample(broker, "strom_preferred_replica_imbalance") == 0
        # a broker that has loaded but not started has not registered yet
        assert sample(broker, "strom_brokers_online") == 0
        assert sample(broker, "strom_fenced_brokers") == 0
        # the process collector: this process's memory and file descriptors
        resident = sample(broker, "process_resident_memory_bytes")
        assert resident is not None and resident > 0
        open_fds = sample(broker, "process_open_fds")
        assert open_fds is not None and open_fds > 0
    finally:
        await broker.metadata_log.stop()
        broker.close()


async def test_errors_carry_the_listener_and_a_waiting_fetch_is_in_the_purgatory(
    tmp_path: Path,
) -> None:
    broker = await loaded(tmp_path)
    try:
        await create_topic(broker, "waits", 1)
        unknown = [{"topic": "nope", "partitions": [_partition(0)]}]
        await call(broker, FETCH, 12, consumer_fetch(unknown))
        error = ErrorCode.unknown_topic_or_partition.name
        labels = {"api": "FETCH", "error": error, "listener": "PLAINTEXT"}
        assert sample(broker, "strom_request_errors_total", **labels) == 1

        waiting = consumer_fetch([{"topic": "waits", "partitions": [_partition(0)]}])
        waiting["max_wait"] = 400  # nothing to read: it waits the whole time
        fetch = asyncio.create_task(call(broker, FETCH, 12, waiting))
        gauge = "strom_fetch_purgatory_size"
        async with asyncio.timeout(5):
            while sample(broker, gauge, fetcher="consumer") != 1:
                await asyncio.sleep(0.005)
        await fetch
        assert sample(broker, gauge, fetcher="consumer") == 0
        assert sample(broker, "strom_produce_purgatory_size") == 0
    finally:
        await broker.metadata_log.stop()
        broker.close()


def _partition(index: int) -> dict[str, int]:
    return {
        "partition": index,
        "current_leader_epoch": -1,
        "fetch_offset": 0,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }
