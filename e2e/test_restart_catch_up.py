"""A restarted broker serves clients only once it is registered and caught up.

Kafka's broker enables its client acceptors only after its initial metadata catch-up,
which needs its registration: a broker restarted within its old session's timeout waits
until the controller fences the old incarnation. Strom's broker served clients as soon as
it had replayed its own copy of the metadata log: it acted as the leader and coordinator
the old incarnation had been (coordinators loaded from that view, partitions served)
while the controller still counted the old process, and before it had caught up.

The check: SIGKILL a node of a 3-node cluster and start it again at once (within
broker.session.timeout.ms): a request sent as soon as it listens is answered only after it
has been registered and unfenced.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import wire_requests
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from strom.network import errors as network_errors
from strom_cluster import StromCluster
from waiting import wait_until

pytestmark = pytest.mark.timeout(240)

TOPIC = "stale-leader"
REQUEST_TIMEOUT_S = 30


def leader_and_isr(bootstrap: str) -> tuple[int, list[int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partition = admin.list_topics(TOPIC, timeout=REQUEST_TIMEOUT_S).topics[TOPIC].partitions[0]
    return partition.leader, list(partition.isrs)


def produce(bootstrap: str, count: int, start: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failures: list[str] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for number in range(start, start + count):
        producer.produce(TOPIC, f"record-{number}".encode(), partition=0, on_delivery=delivered)
    assert producer.flush(REQUEST_TIMEOUT_S) == 0, "every record delivered in time"
    assert not failures, failures


def fetch_at(port: int, offset: int, timeout_s: float) -> ErrorCode | None:
    """The error code of a consumer Fetch of partition 0 at `offset`; None when refused or
    not answered within `timeout_s`."""
    try:
        response = asyncio.run(
            wire_requests.send(
                port,
                wire_requests.consumer_fetch(TOPIC, {0: offset}),
                api_version=12,  # by topic name
                timeout_s=timeout_s,
            )
        )
    except (TimeoutError, network_errors.NetworkError):
        return None
    (topic,) = response.responses
    (partition,) = topic.partitions
    return ErrorCode(partition.error_code)


def answered(answer: ErrorCode | None) -> tuple[ErrorCode] | None:
    """An answer as wait_until takes one (NONE is 0, so false: wrapped)."""
    return None if answer is None else (answer,)


def test_a_restarted_broker_answers_only_once_registered_and_unfenced(tmp_path: Path) -> None:
    cluster = StromCluster(tmp_path, overrides={"broker.session.timeout.ms": "6000"})
    with cluster.started():
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        (created,) = admin.create_topics([NewTopic(TOPIC, 1, 3)]).values()
        created.result(timeout=REQUEST_TIMEOUT_S)
        wait_until(lambda: len(leader_and_isr(cluster.bootstrap)[1]) == 3, 30, "an ISR of 3")
        produce(cluster.bootstrap, 5, 0)
        node_id, _ = leader_and_isr(cluster.bootstrap)
        restarted = cluster.nodes[node_id]
        restarted.kill()
        restarted.launch()  # its old session lives on for up to 6 s
        wait_until(
            lambda: "listening on" in restarted.log_tail(),
            60,
            lambda: f"the restarted node binds its listener:\n{restarted.log_tail()}",
        )
        # Asked again and again from the moment it listens (refused meanwhile: its
        # listener is bound but not accepting): the first answer comes once unfenced.
        started = time.monotonic()
        got = wait_until(
            lambda: answered(fetch_at(restarted.port, 0, 5.0)),
            REQUEST_TIMEOUT_S,
            lambda: f"an answer from the restarted node:\n{restarted.log_tail()}",
        )
        assert got is not None
        (answer,) = got
        waited = time.monotonic() - started
        log = restarted.log_tail(1 << 20)
        assert f"broker {node_id} is unfenced" in log, (
            f"answered {answer} after {waited:.1f} s, before it was unfenced:\n{log}"
        )
        # Unfenced, it answers as the cluster sees it now: a follower, or the leader again.
        assert answer in (ErrorCode.not_leader_or_follower, ErrorCode.none)
        restarted.wait_ready()
