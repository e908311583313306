"""A transactional client that goes away while the transaction coordinator writes for it
(issue 18): what Kafka Streams' exactly-once hits when an app is SIGKILLed
(test_kafka_streams.py), made deterministic on the wire.

On a 3-broker Strom cluster (`__transaction_state` RF 3, min ISR 2), a producer's
AddPartitionsToTxn is left waiting for its `__transaction_state` record to replicate (the
two followers SIGSTOPped), and the client closes its connection meanwhile, as a killed
process does. Once the followers are back the record commits, and the id must behave as
Kafka's does, whose coordinator applies a write when it completes whoever is still waiting
for the answer: a new producer with the same transactional id fences the old one, its open
transaction is aborted, and its InitProducerId succeeds with a higher epoch. (Apache Kafka
is not run here: a single node has no followers to stall.)
"""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import wire_requests
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i8, i16, i32, i32Timedelta
from strom.network import channel as channel_module
from strom.network import clock
from strom.network import errors as network_errors
from strom_cluster import StromCluster
from strom_process import StromProcess
from waiting import wait_until

TOPIC = "txn-data"
TRANSACTIONAL_ID = "disconnected-producer"
TRANSACTION_TIMEOUT = datetime.timedelta(seconds=5)
REQUEST_TIMEOUT_S = 10.0
# the client gives up on its AddPartitionsToTxn after this and closes the connection
ABANDON_AFTER_S = 1.0
# a new producer's InitProducerId must succeed within this: the old transaction's fence
# and abort take a few marker rounds (and the transaction times out after 5 s anyway)
RECOVERY_TIMEOUT_S = 30.0
OVERRIDES = {
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


def send(node: StromProcess, request: Any) -> Any:
    return asyncio.run(
        wire_requests.send(node.port, request, host=node.host, timeout_s=REQUEST_TIMEOUT_S)
    )


def abandoned(node: StromProcess, request: Any, after_s: float) -> bool:
    """Send `request`, give up waiting after `after_s` and close the connection. True if
    no answer came in time."""

    async def go() -> bool:
        channel = channel_module.TcpChannel(
            {1: (node.host, node.port)}.get, clock=clock.SystemClock()
        )
        try:
            await channel.send(1, request, timeout_s=after_s)
        except network_errors.RequestTimeout:
            return True
        finally:
            await channel.close()
        return False

    return asyncio.run(go())


def init_producer_id(node: StromProcess) -> Any:
    return send(
        node,
        InitProducerIdRequest(
            transactional_id=TransactionalId(TRANSACTIONAL_ID),
            transaction_timeout=i32Timedelta.parse(TRANSACTION_TIMEOUT),
        ),
    )


def add_partition(producer_id: ProducerId, epoch: i16, partition: int) -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId(TRANSACTIONAL_ID),
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(
            AddPartitionsToTxnTopic(name=TopicName(TOPIC), partitions=(i32(partition),)),
        ),
    )


def coordinator(cluster: StromCluster) -> int | None:
    answer = send(
        cluster.nodes[1],
        FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(TRANSACTIONAL_ID,)),
    )
    (found,) = answer.coordinators
    return int(found.node_id) if found.error_code is ErrorCode.none else None


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[StromCluster]:
    with StromCluster(tmp_path, overrides=OVERRIDES).started() as made:
        yield made


@pytest.mark.timeout(180)
def test_a_client_gone_mid_write_leaves_its_transactional_id_usable(
    cluster: StromCluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 3)])[TOPIC].result(REQUEST_TIMEOUT_S)
    # the first FindCoordinator creates __transaction_state
    node_id = wait_until(lambda: coordinator(cluster), 30, "a coordinator for the id")
    assert node_id is not None
    coordinating = cluster.nodes[node_id]

    def initialised() -> Any:
        answer = init_producer_id(coordinating)
        return answer if answer.error_code is ErrorCode.none else None

    first = wait_until(initialised, 30, "InitProducerId answered")
    producer_id, epoch = first.producer_id, first.producer_epoch
    added = send(coordinating, add_partition(producer_id, epoch, 0))
    assert all(
        p.partition_error_code is ErrorCode.none
        for t in added.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ), added

    followers = [node for n, node in cluster.nodes.items() if n != node_id]
    for node in followers:
        assert node.proc is not None
        os.kill(node.proc.pid, signal.SIGSTOP)
    try:
        # the record of partition 1 cannot commit while the followers are stopped
        gone = abandoned(coordinating, add_partition(producer_id, epoch, 1), ABANDON_AFTER_S)
    finally:
        for node in followers:
            assert node.proc is not None
            os.kill(node.proc.pid, signal.SIGCONT)
    assert gone, "AddPartitionsToTxn was answered while the followers were stopped"

    # A new producer of the same id: fences the old one, whose transaction is aborted.
    errors: list[str] = []
    deadline = time.monotonic() + RECOVERY_TIMEOUT_S
    while True:
        answer = init_producer_id(coordinating)
        errors.append(answer.error_code.name)
        if answer.error_code is ErrorCode.none:
            break
        assert time.monotonic() < deadline, (
            f"a new producer of {TRANSACTIONAL_ID} got no producer id in "
            f"{RECOVERY_TIMEOUT_S:.0f}s: {errors[0]} x{len(errors)}"
        )
        time.sleep(0.5)  # the client's retry back-off
    assert answer.producer_id == producer_id and answer.producer_epoch > epoch, answer
