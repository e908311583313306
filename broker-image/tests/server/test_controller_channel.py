"""ControllerChannel and BrokerLifecycle over real TCP: controller listeners served by
KafkaConnection with the controller dispatcher of real single-node brokers. A "follower"
is such a broker whose controller refuses every change with NotControllerError, as a
controller that is not the Raft leader does."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from broker_calls import call, loaded
from kio.schema.errors import ErrorCode
from strom.clock import SystemClock
from strom.cluster import broker_sessions, controller_channel, records, topics
from strom.cluster import image as images
from strom.config import broker as broker_config
from strom.config import cluster_id as cluster_ids
from strom.network import channel as channels
from strom.protocol import apis, outbound
from strom.server import broker as broker_module
from strom.server import connection as connections
from strom.server import dispatch, lifecycle

ACTIVE, FOLLOWER, UNREACHABLE = 1, 2, 3
SERVED_NODE_ID = 7  # the broker that registers through the channel


class FollowerLog:
    """The broker's real metadata log, refusing appends as a non-leader controller does."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.refused = 0
        self.slow_after: int | None = None  # refusals answered at once, then each 1 s late

    async def append(self, entries: Sequence[records.MetadataRecord]) -> int:
        if self.slow_after is not None and self.refused >= self.slow_after:
            await asyncio.sleep(1.0)  # a busy node: the answer comes after the deadline
        self.refused += 1
        raise topics.NotControllerError("this node is not the active controller")

    def read_committed(self) -> Iterator[tuple[int, records.MetadataRecord]]:
        return iter(self.inner.read_committed())

    def close(self) -> None:
        self.inner.close()


@contextlib.asynccontextmanager
async def controller_listener(broker: broker_module.Broker) -> AsyncIterator[int]:
    """Serve `broker`'s controller listener on a free port; yields the port."""
    dispatcher = dispatch.Dispatcher(broker.context, handlers=dispatch.CONTROLLER_HANDLERS)
    open_connections: set[connections.KafkaConnection] = set()

    def new_connection() -> connections.KafkaConnection:
        connection = connections.KafkaConnection(
            lambda request, peer: dispatcher.dispatch(request, "CONTROLLER", peer),
            100 * 1024 * 1024,
            broker.metrics,
            open_connections.discard,
            listener="CONTROLLER",
            versions=apis.CONTROLLER_VERSIONS,
        )
        open_connections.add(connection)
        return connection

    server = await asyncio.get_running_loop().create_server(new_connection, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for connection in list(open_connections):
            await connection.drain_and_close()
        await server.wait_closed()


class Cluster:
    """An active controller and a follower, serving their controller listeners, and the
    channel a broker reaches them with."""

    def __init__(self, active: broker_module.Broker, follower: broker_module.Broker) -> None:
        self.active = active
        self.follower = follower
        self.follower_log = FollowerLog(follower.controller._log)
        # The seam a Raft-backed log will fill: the follower's controller cannot commit.
        follower.controller._log = self.follower_log
        self.ports: dict[int, tuple[str, int]] = {}  # controller endpoints
        self.channel = channels.TcpChannel(self.ports.get, clock=SystemClock())
        self.leader: Callable[[], int | None] = lambda: ACTIVE

    def controller(
        self, *, timeout_s: float = 5.0, node_id: int = SERVED_NODE_ID
    ) -> controller_channel.ControllerChannel:
        return controller_channel.ControllerChannel(
            self.channel,
            lambda: self.leader(),
            node_id=node_id,
            clock=SystemClock(),
            request_timeout_s=timeout_s,
            retry_backoff_s=0.02,
        )

    def registration(self) -> broker_sessions.Registration:
        return broker_sessions.Registration(
            node_id=SERVED_NODE_ID,
            cluster_id=self.active.context.image.cluster_id,
            incarnation_id=uuid.UUID(int=0x77),
            endpoints=(images.BrokerEndpoint("PLAINTEXT", "b7.example", 9092, 0),),
            rack=None,
        )


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    same_cluster = {"cluster.id": cluster_ids.new_cluster_id()}
    active = await loaded(tmp_path / "active", **same_cluster)
    follower = await loaded(tmp_path / "follower", **same_cluster)
    nodes = Cluster(active, follower)
    async with (
        controller_listener(active) as active_port,
        controller_listener(follower) as follower_port,
    ):
        nodes.ports.update(
            {
                ACTIVE: ("127.0.0.1", active_port),
                FOLLOWER: ("127.0.0.1", follower_port),
                UNREACHABLE: ("127.0.0.1", _closed_port()),
            }
        )
        yield nodes
        await nodes.channel.close()
    active.close()
    follower.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_lifecycle_rpcs_reach_the_active_controller(cluster: Cluster) -> None:
    controller = cluster.controller()
    epoch = await controller.register_broker(cluster.registration())
    # Connecting asked ApiVersions: the controller listener advertised its own table.
    assert cluster.channel.negotiated_version(ACTIVE, apis.ApiKey.BROKER_REGISTRATION) == 4
    assert cluster.channel.negotiated_version(ACTIVE, apis.ApiKey.PRODUCE) is None
    assert cluster.active.context.image.brokers[SERVED_NODE_ID].epoch == epoch
    answer = await controller.broker_heartbeat(
        SERVED_NODE_ID,
        epoch,
        cluster.active.context.image.offset,
        want_fence=False,
        want_shut_down=False,
    )
    assert answer == broker_sessions.HeartbeatAnswer(is_caught_up=True, is_fenced=False)
    block = await controller.allocate_producer_ids(SERVED_NODE_ID)
    assert len(block) > 0
    with pytest.raises(broker_sessions.StaleBrokerEpochError):
        await controller.broker_heartbeat(
            SERVED_NODE_ID, epoch - 1, 0, want_fence=False, want_shut_down=False
        )
    other = broker_sessions.Registration(
        SERVED_NODE_ID, "another-cluster", uuid.UUID(int=1), endpoints=()
    )
    with pytest.raises(broker_sessions.InconsistentClusterError):
        await controller.register_broker(other)


async def test_not_controller_answers_are_retried_at_the_new_active_controller(
    cluster: Cluster,
) -> None:
    asked: list[int] = []

    def leader() -> int:
        # The follower until it has refused once: then the broker learns the new leader.
        chosen = ACTIVE if cluster.follower_log.refused else FOLLOWER
        asked.append(chosen)
        return chosen

    cluster.leader = leader
    epoch = await cluster.controller().register_broker(cluster.registration())
    assert cluster.follower_log.refused == 1
    assert asked[0] == FOLLOWER and asked[-1] == ACTIVE
    assert cluster.active.context.image.brokers[SERVED_NODE_ID].epoch == epoch
    assert SERVED_NODE_ID not in cluster.follower.context.image.brokers


@contextlib.asynccontextmanager
async def silent_listener() -> AsyncIterator[tuple[int, asyncio.Event]]:
    """A node that accepts connections and reads what it is sent but never answers, as a
    stalled controller does; yields its port and an event set once bytes came in."""
    received = asyncio.Event()

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            received.set()
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], received
    finally:
        server.close()


async def test_a_request_in_flight_goes_to_the_new_controller_when_the_leadership_moves(
    cluster: Cluster,
) -> None:
    """A controller that lost the leadership may never answer (it may be the stalled
    node): once another node is the active controller, the request goes there at once,
    not at its deadline."""
    silent_node = 4
    async with silent_listener() as (port, received):
        cluster.ports[silent_node] = ("127.0.0.1", port)
        cluster.leader = lambda: ACTIVE if received.is_set() else silent_node
        started = time.monotonic()
        epoch = await cluster.controller(timeout_s=20).register_broker(cluster.registration())
        assert time.monotonic() - started < 5, "sent again well before the 20 s deadline"
        assert received.is_set()
    assert cluster.active.context.image.brokers[SERVED_NODE_ID].epoch == epoch


async def test_no_active_controller_until_the_deadline_is_a_retriable_error(
    cluster: Cluster,
) -> None:
    cluster.leader = lambda: FOLLOWER
    started = time.monotonic()
    with pytest.raises(controller_channel.ControllerUnavailableError):
        await cluster.controller(timeout_s=0.3).register_broker(cluster.registration())
    assert 0.3 <= time.monotonic() - started < 2
    assert cluster.follower_log.refused >= 2  # asked again after each back-off

    cluster.leader = lambda: None
    with pytest.raises(topics.NotControllerError):
        await cluster.controller(timeout_s=0.1).allocate_producer_ids(SERVED_NODE_ID)


async def test_refusals_then_an_attempt_cut_short_by_the_deadline_is_still_no_controller(
    cluster: Cluster,
) -> None:
    # what a busy CI machine did: after the refusals, a back-off left a few ms, and the
    # last attempt timed out; the answer must stay "no active controller" (retriable
    # NOT_CONTROLLER), not a controller that did not answer
    cluster.leader = lambda: FOLLOWER
    cluster.follower_log.slow_after = 1
    with pytest.raises(controller_channel.ControllerUnavailableError, match="last attempt"):
        await cluster.controller(timeout_s=0.3).register_broker(cluster.registration())
    assert cluster.follower_log.refused >= 1


async def test_an_unreachable_controller_times_out_at_the_deadline(cluster: Cluster) -> None:
    cluster.leader = lambda: UNREACHABLE
    started = time.monotonic()
    with pytest.raises(controller_channel.ControllerTimeoutError):
        await cluster.controller(timeout_s=0.3).broker_heartbeat(
            SERVED_NODE_ID, 1, 0, want_fence=False, want_shut_down=False
        )
    assert time.monotonic() - started < 2


def _create_topics(name: str) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": name,
                "num_partitions": 2,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout": 1000,
        "validate_only": False,
    }


async def test_forward_sends_the_request_unchanged_and_returns_the_answer(
    cluster: Cluster,
) -> None:
    request = outbound.Draft(apis.ApiKey.CREATE_TOPICS, _create_topics("forwarded")).at(5)
    response = await cluster.controller().forward(request)
    assert type(response).__version__ == 5
    assert response.topics[0].error_code == ErrorCode.none
    assert cluster.active.context.image.topics["forwarded"].partition_count == 2


async def test_a_client_listeners_admin_request_goes_to_the_active_controller(
    cluster: Cluster,
) -> None:
    # The follower's client listener forwards; the active controller creates the topic.
    cluster.leader = lambda: ACTIVE
    cluster.follower.context.controller_forwarder = cluster.controller(node_id=FOLLOWER)
    created = await call(cluster.follower, apis.ApiKey.CREATE_TOPICS, 7, _create_topics("fw"))
    assert created.topics[0].error_code == ErrorCode.none
    assert "fw" in cluster.active.context.image.topics
    assert "fw" not in cluster.follower.context.image.topics

    # No controller in time: every topic gets a retriable error.
    cluster.leader = lambda: None
    cluster.follower.context.controller_forwarder = cluster.controller(
        node_id=FOLLOWER, timeout_s=0.1
    )
    refused = await call(cluster.follower, apis.ApiKey.CREATE_TOPICS, 7, _create_topics("late"))
    assert refused.topics[0].error_code == ErrorCode.not_controller
    cluster.leader = lambda: UNREACHABLE
    deleted = await call(
        cluster.follower,
        apis.ApiKey.DELETE_TOPICS,
        6,
        {"topics": [{"name": "fw", "topic_id": uuid.UUID(int=0)}], "timeout": 1000},
    )
    assert deleted.responses[0].error_code == ErrorCode.request_timed_out
    altered = await call(
        cluster.follower,
        apis.ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [{"resource_type": 2, "resource_name": "fw", "configs": []}],
            "validate_only": False,
        },
    )
    assert altered.responses[0].error_code == ErrorCode.request_timed_out

    # The active controller (is_local) handles its client listener's requests itself.
    cluster.leader = lambda: FOLLOWER
    local = await call(cluster.follower, apis.ApiKey.CREATE_TOPICS, 7, _create_topics("here"))
    assert local.topics[0].error_code == ErrorCode.not_controller  # its log refuses
    assert cluster.follower_log.refused == 1


# BrokerLifecycle -----------------------------------------------------------------------


def _lifecycle(
    controller: lifecycle.LifecycleController,
    registration: broker_sessions.Registration,
    metadata_offset: Callable[[], int],
    **options: Any,
) -> lifecycle.BrokerLifecycle:
    return lifecycle.BrokerLifecycle(
        controller,
        registration,
        metadata_offset=metadata_offset,
        clock=SystemClock(),
        heartbeat_interval_ms=20,
        retry_backoff_ms=20,
        **options,
    )


async def test_lifecycle_registers_is_unfenced_and_shuts_down_through_the_channel(
    cluster: Cluster,
) -> None:
    cluster.leader = lambda: None  # no controller yet: registration keeps trying
    active = cluster.active
    manager = _lifecycle(
        cluster.controller(timeout_s=0.05),
        cluster.registration(),
        lambda: active.context.image.offset,
    )
    manager.start()
    await asyncio.sleep(0.2)
    assert not manager.registered.is_set()
    cluster.leader = lambda: ACTIVE
    await asyncio.wait_for(manager.unfenced.wait(), 5)
    assert manager.caught_up.is_set() and not manager.is_fenced
    assert not active.context.image.brokers[SERVED_NODE_ID].fenced
    assert await manager.shut_down(timeout_s=5)
    assert active.context.image.brokers[SERVED_NODE_ID].fenced


async def test_lifecycle_with_the_local_controller_waits_until_ready_and_registers_again(
    tmp_path: Path,
) -> None:
    broker = await loaded(tmp_path)
    try:
        registration = broker_sessions.Registration(
            node_id=SERVED_NODE_ID,
            cluster_id=broker.context.image.cluster_id,
            incarnation_id=uuid.UUID(int=0x99),
            endpoints=(),
        )
        manager = _lifecycle(
            broker.controller,
            registration,
            lambda: broker.context.image.offset,
            wait_until_ready=True,
        )
        manager.start()
        await asyncio.wait_for(manager.caught_up.wait(), 5)
        await asyncio.sleep(0.1)
        assert manager.is_fenced  # caught up, but it asks to stay fenced
        manager.ready_to_unfence()
        await asyncio.wait_for(manager.unfenced.wait(), 5)
        first_epoch = manager.broker_epoch
        assert first_epoch is not None

        # Another registration of this node id makes its epoch stale: it registers again.
        replaced = await broker.controller.register_broker(registration, 0)
        for _ in range(250):
            if manager.broker_epoch is not None and manager.broker_epoch > replaced:
                break
            await asyncio.sleep(0.02)
        assert manager.broker_epoch is not None and manager.broker_epoch > replaced
        await asyncio.wait_for(manager.unfenced.wait(), 5)
        assert await manager.shut_down(timeout_s=5)
        assert broker.context.image.brokers[SERVED_NODE_ID].fenced
    finally:
        broker.close()


def test_controller_endpoints_are_the_voters_controller_listeners() -> None:
    config = broker_config.BrokerConfig(
        {
            "process.roles": "broker,controller",
            "node.id": "2",
            "controller.quorum.voters": "1@c1.example:9093,2@c2.example:9094",
            "listeners": "PLAINTEXT://:9092,CONTROLLER://:9094",
            "controller.listener.names": "CONTROLLER",
        }
    )
    resolve = controller_channel.controller_endpoints(config.quorum)
    assert resolve(1) == ("c1.example", 9093)
    assert resolve(2) == ("c2.example", 9094)
    assert resolve(3) is None
