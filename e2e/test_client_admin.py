"""strom.client's admin calls for the operator, for real: leader elections, partition
reassignments, log dirs and the metadata quorum against Apache Kafka (the answers we
expect) and the same calls against Strom, and AsyncAdmin on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from apache_kafka import ApacheKafka
from strom.client import admin as client_admin
from strom.client import errors, results
from strom_process import StromProcess, free_port

TP = results.TopicPartition
QUICK_S = 15.0  # an unsupported call must fail well within this


@pytest.fixture(scope="module")
def kafka_admin(kafka: ApacheKafka) -> client_admin.Admin:
    return client_admin.Admin(kafka.bootstrap, timeout=30.0)


@pytest.fixture(params=["kafka", "strom"])
def any_admin(request: pytest.FixtureRequest) -> client_admin.Admin:
    """The same assertions against Apache Kafka and against Strom (both node 1 alone)."""
    admin: client_admin.Admin = request.getfixturevalue(f"{request.param}_admin")
    return admin


def test_preferred_election_where_the_leader_is_already_preferred(
    any_admin: client_admin.Admin, topic: str
) -> None:
    any_admin.create_topic(topic, partitions=2, replication_factor=1)
    wanted = [TP(topic, 0), TP(topic, 1)]
    assert any_admin.elect_leaders("preferred", wanted) == {tp: None for tp in wanted}


def test_unclean_election_where_a_leader_exists(any_admin: client_admin.Admin, topic: str) -> None:
    any_admin.create_topic(topic, partitions=1, replication_factor=1)
    assert any_admin.elect_leaders("unclean", [TP(topic, 0)]) == {TP(topic, 0): None}


def test_election_of_an_unknown_partition_is_refused_by_name(
    any_admin: client_admin.Admin, topic: str
) -> None:
    result = any_admin.elect_leaders("preferred", [TP(topic, 0)])
    error = result[TP(topic, 0)]
    assert isinstance(error, errors.NotFoundError), result
    assert topic in str(error)


def test_reassignments(any_admin: client_admin.Admin, topic: str) -> None:
    any_admin.create_topic(topic, partitions=2, replication_factor=1)
    # to the replica it already has: accepted, and done at once
    assert any_admin.alter_partition_reassignments({TP(topic, 0): [1]}) == {TP(topic, 0): None}
    assert any_admin.list_partition_reassignments() == {}
    assert any_admin.list_partition_reassignments([TP(topic, 0), TP(topic, 1)]) == {}
    refused = any_admin.alter_partition_reassignments({TP(topic, 0): [1, 42], TP(topic, 1): None})
    assert set(refused) == {TP(topic, 0), TP(topic, 1)}
    # broker 42 does not exist; partition 1 has nothing to cancel
    assert "INVALID_REPLICA_ASSIGNMENT" in str(refused[TP(topic, 0)])
    assert "NO_REASSIGNMENT_IN_PROGRESS" in str(refused[TP(topic, 1)])
    assert any_admin.describe_topics([topic])[topic].partitions[0].replicas == (1,)


def test_log_dirs(kafka: ApacheKafka, kafka_admin: client_admin.Admin, topic: str) -> None:
    kafka_admin.create_topic(topic, partitions=2, replication_factor=1)
    deadline = time.monotonic() + 30
    while True:
        dirs = kafka_admin.describe_log_dirs()
        [log_dir] = dirs[1]
        if {TP(topic, 0), TP(topic, 1)} <= {r.partition for r in log_dir.replicas}:
            break
        assert time.monotonic() < deadline, log_dir
        time.sleep(0.2)
    assert set(dirs) == {1}
    assert Path(log_dir.path) == kafka.data_dir
    assert log_dir.error is None
    assert log_dir.total_bytes is not None and log_dir.total_bytes > 0
    assert log_dir.usable_bytes is not None and 0 < log_dir.usable_bytes <= log_dir.total_bytes
    replica = next(r for r in log_dir.replicas if r.partition == TP(topic, 0))
    assert (replica.size, replica.offset_lag, replica.is_future) == (0, 0, False)
    assert kafka_admin.describe_log_dirs([1]).keys() == {1}
    with pytest.raises(errors.NotFoundError, match="Broker 7"):
        kafka_admin.describe_log_dirs([7])


def test_metadata_quorum(kafka_admin: client_admin.Admin) -> None:
    quorum = kafka_admin.describe_metadata_quorum()
    assert quorum.leader_id == 1
    assert quorum.leader_epoch >= 1
    assert quorum.high_watermark > 0
    assert [v.id for v in quorum.voters] == [1]
    assert quorum.voters[0].log_end_offset >= quorum.high_watermark
    assert quorum.observers == ()


async def test_async_admin_against_kafka(kafka: ApacheKafka, topic: str) -> None:
    admin = client_admin.AsyncAdmin(kafka.bootstrap, timeout=30.0)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    try:
        assert await admin.create_topic(
            topic, partitions=2, replication_factor=1, configs={"retention.ms": "60000"}
        )
        assert not await admin.create_topic(topic, partitions=2, if_not_exists=True)
        assert topic in await admin.topic_names()
        await admin.create_partitions(topic, 3)
        info = (await admin.describe_topics([topic]))[topic]
        assert [p.partition for p in info.partitions] == [0, 1, 2]
        await admin.alter_configs("topic", topic, {"retention.ms": "120000"}, [])
        configs = {e.name: e for e in (await admin.topic_configs([topic]))[topic]}
        assert configs["retention.ms"].value == "120000"
        assert (await admin.cluster()).nodes[0].id == 1
        assert isinstance(await admin.list_groups(), list)
        assert await admin.describe_groups([]) == {}
        assert await admin.elect_leaders("preferred", [TP(topic, 0)]) == {TP(topic, 0): None}
        assert await admin.list_partition_reassignments() == {}
        assert (await admin.describe_metadata_quorum()).leader_id == 1
        assert 1 in await admin.describe_log_dirs()
        await admin.delete_topics([topic])
        with pytest.raises(errors.NotFoundError, match=topic):
            await admin.describe_topics([topic])
    finally:
        ticking.cancel()
    assert ticks > 0  # the loop kept running while the calls were awaited


async def test_async_admin_fails_fast_without_blocking_the_loop() -> None:
    admin = client_admin.AsyncAdmin(f"127.0.0.1:{free_port()}", timeout=30.0)
    started = time.monotonic()
    beat = asyncio.create_task(asyncio.sleep(0.01))
    with pytest.raises(errors.ConnectError, match="cannot connect"):
        await admin.cluster()
    assert beat.done()
    assert time.monotonic() - started < QUICK_S
    with pytest.raises(errors.ConnectError, match="cannot connect"):
        await admin.describe_metadata_quorum()


# --- Strom does not serve these yet: a clear error, not a hang ---------------------------


@pytest.fixture(scope="module")
def strom_admin(strom: StromProcess) -> client_admin.Admin:
    return client_admin.Admin(strom.bootstrap, timeout=QUICK_S)


async def test_strom_answers_through_async_admin_too(strom: StromProcess) -> None:
    admin = client_admin.AsyncAdmin(strom.bootstrap, timeout=QUICK_S)
    assert await admin.list_partition_reassignments() == {}


def test_strom_describes_its_log_dir(
    strom: StromProcess, strom_admin: client_admin.Admin, topic: str
) -> None:
    strom_admin.create_topic(topic, partitions=2)
    [log_dir] = strom_admin.describe_log_dirs()[1]
    assert Path(log_dir.path) == strom.log_dir
    assert log_dir.error is None
    assert log_dir.total_bytes is not None and log_dir.total_bytes > 0
    assert log_dir.usable_bytes is not None and 0 < log_dir.usable_bytes <= log_dir.total_bytes
    replica = next(r for r in log_dir.replicas if r.partition == TP(topic, 0))
    assert (replica.size, replica.offset_lag, replica.is_future) == (0, 0, False)
    assert TP(topic, 1) in {r.partition for r in log_dir.replicas}
    with pytest.raises(errors.NotFoundError, match="Broker 7"):
        strom_admin.describe_log_dirs([7])


async def test_strom_describes_its_quorum_of_one(
    strom: StromProcess, strom_admin: client_admin.Admin
) -> None:
    for quorum in (
        strom_admin.describe_metadata_quorum(),
        await client_admin.AsyncAdmin(strom.bootstrap, timeout=QUICK_S).describe_metadata_quorum(),
    ):
        assert (quorum.leader_id, quorum.leader_epoch) == (1, 1)
        assert [v.id for v in quorum.voters] == [1] and quorum.observers == ()
        assert quorum.voters[0].log_end_offset == quorum.high_watermark
