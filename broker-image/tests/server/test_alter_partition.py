"""AlterPartition and ElectLeaders through the controller listener's codec and handlers
(requests encoded as a broker encodes them): a stale partition epoch is refused, a good
change commits and Metadata shows the new ISR."""

from __future__ import annotations

import uuid
from typing import Any

from broker_calls import call
from kio.schema.errors import ErrorCode
from strom.cluster import topic_requests
from strom.protocol import apis
from strom.server import broker as broker_module

OTHER = 7


async def _join(broker: broker_module.Broker, node_id: int) -> int:
    """Register `node_id` and unfence it; its broker epoch."""
    registered = await call(
        broker,
        apis.ApiKey.BROKER_REGISTRATION,
        4,
        {
            "broker_id": node_id,
            "cluster_id": broker.context.image.cluster_id,
            "incarnation_id": uuid.uuid4(),
            "listeners": [
                {
                    "name": "PLAINTEXT",
                    "host": "127.0.0.1",
                    "port": 9000 + node_id,
                    "security_protocol": 0,
                }
            ],
            "features": [],
            "rack": None,
        },
        controller_listener=True,
    )
    epoch = int(registered.broker_epoch)
    answer = await call(
        broker,
        apis.ApiKey.BROKER_HEARTBEAT,
        1,
        {
            "broker_id": node_id,
            "broker_epoch": epoch,
            "current_metadata_offset": broker.context.image.offset,
            "want_fence": False,
            "want_shut_down": False,
        },
        controller_listener=True,
    )
    assert not answer.is_fenced
    return epoch


async def _alter(
    broker: broker_module.Broker,
    epoch: int,
    topic_id: uuid.UUID,
    partition_epoch: int,
    isr: list[int],
) -> Any:
    return await call(
        broker,
        apis.ApiKey.ALTER_PARTITION,
        3,
        {
            "broker_id": broker.node_id,
            "broker_epoch": epoch,
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "leader_epoch": 0,
                            "new_isr_with_epochs": [
                                {"broker_id": r, "broker_epoch": -1} for r in isr
                            ],
                            "leader_recovery_state": 0,
                            "partition_epoch": partition_epoch,
                        }
                    ],
                }
            ],
        },
        controller_listener=True,
    )


async def test_alter_partition_commits_a_good_change_and_refuses_a_stale_one(
    broker: broker_module.Broker,
) -> None:
    epoch = await _join(broker, broker.node_id)
    await _join(broker, OTHER)
    (created,) = await broker.controller.create_topics(
        [topic_requests.NewTopic("shared", assignments=((broker.node_id, OTHER),))]
    )
    assert created.error is None and created.topic_id is not None

    shrunk = await _alter(broker, epoch, created.topic_id, 0, [broker.node_id])
    assert shrunk.error_code == ErrorCode.none
    (partition,) = shrunk.topics[0].partitions
    assert (partition.error_code, list(partition.isr), partition.partition_epoch) == (
        ErrorCode.none,
        [broker.node_id],
        1,
    )
    assert (partition.leader_id, partition.leader_epoch) == (broker.node_id, 0)

    stale = await _alter(broker, epoch, created.topic_id, 0, [broker.node_id, OTHER])
    (refused,) = stale.topics[0].partitions
    assert refused.error_code == ErrorCode.invalid_update_version
    assert list(refused.isr) == [broker.node_id]

    metadata = await call(
        broker,
        apis.ApiKey.METADATA,
        12,
        {
            "topics": [{"name": "shared", "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    (shown,) = metadata.topics[0].partitions
    assert list(shown.isr_nodes) == [broker.node_id]

    wrong_epoch = await _alter(broker, epoch + 100, created.topic_id, 1, [broker.node_id])
    assert (wrong_epoch.error_code, wrong_epoch.topics) == (ErrorCode.stale_broker_epoch, ())


async def test_elect_leaders_answers_each_partition(broker: broker_module.Broker) -> None:
    response = await call(
        broker,
        apis.ApiKey.ELECT_LEADERS,
        2,
        {
            "election_type": 0,
            "topic_partitions": [
                {"topic": "orders", "partitions": [0, 5]},
                {"topic": "missing", "partitions": [0]},
            ],
            "timeout": 1000,
        },
    )
    results = {
        (entry.topic, p.partition_id): p.error_code
        for entry in response.replica_election_results
        for p in entry.partition_result
    }
    assert results == {
        ("orders", 0): ErrorCode.election_not_needed,
        ("orders", 5): ErrorCode.unknown_topic_or_partition,
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
    }
    everything = await call(
        broker,
        apis.ApiKey.ELECT_LEADERS,
        2,
        {"election_type": 0, "topic_partitions": None, "timeout": 1000},
    )
    # every partition is led by its preferred replica: nothing to report
    assert all(not entry.partition_result for entry in everything.replica_election_results)
