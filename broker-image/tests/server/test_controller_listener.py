"""The controller listener's handlers over a real broker (metadata log in a tmp dir):
ApiVersions of each listener, the quorum RPCs handed to the Raft driver, DescribeCluster
for controllers, and the broker lifecycle RPCs with the controller's refusals mapped to
Kafka's error codes."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from broker_calls import call, loaded
from kio.schema.errors import ErrorCode
from strom.cluster import broker_sessions, raft_wire, topics
from strom.cluster.raft import messages
from strom.protocol import apis
from strom.server import broker as broker_module
from strom.server.handlers import broker_lifecycle

INCARNATION = uuid.UUID(int=0xABC)


def _registration(broker: broker_module.Broker, **overrides: Any) -> dict[str, Any]:
    return {
        "broker_id": 7,
        "cluster_id": broker.context.image.cluster_id,
        "incarnation_id": INCARNATION,
        "listeners": [
            {"name": "PLAINTEXT", "host": "b7.example", "port": 9092, "security_protocol": 0}
        ],
        "features": [],
        "rack": "r1",
        **overrides,
    }


async def _register(broker: broker_module.Broker, **overrides: Any) -> Any:
    return await call(
        broker,
        apis.ApiKey.BROKER_REGISTRATION,
        4,
        _registration(broker, **overrides),
        controller_listener=True,
    )


async def _heartbeat(broker: broker_module.Broker, epoch: int, **fields: Any) -> Any:
    return await call(
        broker,
        apis.ApiKey.BROKER_HEARTBEAT,
        1,
        {
            "broker_id": 7,
            "broker_epoch": epoch,
            "current_metadata_offset": broker.context.image.offset,
            "want_fence": False,
            "want_shut_down": False,
            **fields,
        },
        controller_listener=True,
    )


async def test_api_versions_answers_the_listeners_own_table(
    broker: broker_module.Broker,
) -> None:
    for controller_listener, table in [
        (False, apis.SUPPORTED_VERSIONS),
        (True, apis.CONTROLLER_VERSIONS),
    ]:
        response = await call(
            broker,
            apis.ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "t", "client_software_version": "1"},
            controller_listener=controller_listener,
        )
        advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert advertised == {int(key): versions for key, versions in table.items()}


async def test_registration_then_heartbeats_unfence_a_caught_up_broker(
    broker: broker_module.Broker,
) -> None:
    registered = await _register(broker)
    assert registered.error_code == ErrorCode.none
    epoch = int(registered.broker_epoch)
    image_broker = broker.context.image.brokers[7]
    assert (image_broker.epoch, image_broker.fenced, image_broker.rack) == (epoch, True, "r1")
    assert image_broker.endpoints[0].host == "b7.example"

    behind = await _heartbeat(broker, epoch, current_metadata_offset=epoch - 1)
    assert (behind.error_code, behind.is_caught_up, behind.is_fenced) == (
        ErrorCode.none,
        False,
        True,
    )
    caught_up = await _heartbeat(broker, epoch)
    assert (caught_up.is_caught_up, caught_up.is_fenced) == (True, False)
    assert not broker.context.image.brokers[7].fenced
    leaving = await _heartbeat(broker, epoch, want_shut_down=True)
    assert (leaving.is_fenced, leaving.should_shut_down) == (True, True)


async def test_lifecycle_refusals_get_kafkas_error_codes(broker: broker_module.Broker) -> None:
    epoch = int((await _register(broker)).broker_epoch)
    await _heartbeat(broker, epoch)  # the session is alive

    duplicate = await _register(broker, incarnation_id=uuid.UUID(int=0xDEF))
    assert (duplicate.error_code, duplicate.broker_epoch) == (
        ErrorCode.duplicate_broker_registration,
        -1,
    )
    other_cluster = await _register(broker, cluster_id="another-cluster")
    assert other_cluster.error_code == ErrorCode.inconsistent_cluster_id
    no_incarnation = await _register(broker, incarnation_id=None)
    assert no_incarnation.error_code == ErrorCode.invalid_request
    stale = await _heartbeat(broker, epoch - 1)
    assert (stale.error_code, stale.is_fenced) == (ErrorCode.stale_broker_epoch, True)
    unknown = await call(
        broker,
        apis.ApiKey.BROKER_HEARTBEAT,
        0,
        {
            "broker_id": 99,
            "broker_epoch": 1,
            "current_metadata_offset": 0,
            "want_fence": False,
            "want_shut_down": False,
        },
        controller_listener=True,
    )
    assert unknown.error_code == ErrorCode.stale_broker_epoch
    # What a controller that lost the leadership raises (no real one does it yet here).
    assert (
        broker_lifecycle.lifecycle_error_code(topics.NotControllerError("no quorum"))
        == ErrorCode.not_controller
    )
    assert (
        broker_lifecycle.lifecycle_error_code(topics.StorageFailedError("disk"))
        == ErrorCode.kafka_storage_error
    )
    assert (
        broker_lifecycle.lifecycle_error_code(broker_sessions.StaleBrokerEpochError("old"))
        == ErrorCode.stale_broker_epoch
    )


async def test_allocate_producer_ids_hands_out_fresh_blocks(broker: broker_module.Broker) -> None:
    blocks = []
    for _ in range(2):
        response = await call(
            broker,
            apis.ApiKey.ALLOCATE_PRODUCER_IDS,
            0,
            {"broker_id": 7, "broker_epoch": -1},
            controller_listener=True,
        )
        assert response.error_code == ErrorCode.none
        blocks.append(
            range(response.producer_id_start, response.producer_id_start + response.producer_id_len)
        )
    assert len(blocks[0]) > 0 and blocks[1].start >= blocks[0].stop


class EchoingQuorum:
    """A Raft driver's server side reduced to its contract: a kio request in, its kio
    response out (a Vote granted at the candidate's epoch)."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []

    async def handle(self, body: Any) -> Any:
        self.bodies.append(body)
        request = raft_wire.request_from_kio(body)
        assert isinstance(request, messages.VoteRequest)
        response = messages.VoteResponse(
            error=ErrorCode.none,
            leader_epoch=request.candidate_epoch,
            leader_id=-1,
            vote_granted=True,
        )
        return raft_wire.response_to_kio(response, int(type(body).__version__))


async def _call_vote(broker: broker_module.Broker) -> Any:
    """A Vote v2 as a peer's Raft driver sends it, through the controller listener."""
    kio_request = raft_wire.request_to_kio(
        messages.VoteRequest(
            candidate_epoch=3, candidate_id=2, voter_id=1, last_offset_epoch=1, last_offset=10
        ),
        cluster_id="c",
    )
    fields = {name: getattr(kio_request, name) for name in type(kio_request).__dataclass_fields__}
    return await call(broker, apis.ApiKey.VOTE, 2, fields, controller_listener=True)


async def test_quorum_rpcs_go_to_the_raft_driver_or_fail_as_a_whole(
    broker: broker_module.Broker,
) -> None:
    # the broker's own Raft driver refuses a peer of another cluster as a whole
    foreign = await _call_vote(broker)
    assert foreign.error_code == ErrorCode.inconsistent_cluster_id

    broker.context.quorum_rpc = None
    without_driver = await _call_vote(broker)
    assert without_driver.error_code == ErrorCode.unknown_server_error

    driver = EchoingQuorum()
    broker.context.quorum_rpc = driver
    answered = await _call_vote(broker)
    assert answered.error_code == ErrorCode.none
    assert len(driver.bodies) == 1 and driver.bodies[0].cluster_id == "c"
    vote = raft_wire.response_from_kio(answered)
    assert isinstance(vote, messages.VoteResponse) and vote.vote_granted


async def test_describe_cluster_on_the_controller_listener_lists_the_voters(
    tmp_path: Path,
) -> None:
    broker = await loaded(
        tmp_path,
        **{
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": "1@127.0.0.1:19093",
            "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19093",
            "controller.listener.names": "CONTROLLER",
        },
    )
    try:
        fields = {"include_cluster_authorized_operations": False, "endpoint_type": 2}
        controllers = await call(
            broker, apis.ApiKey.DESCRIBE_CLUSTER, 1, fields, controller_listener=True
        )
        assert controllers.error_code == ErrorCode.none
        assert controllers.controller_id == 1
        assert [(b.broker_id, b.host, b.port) for b in controllers.brokers] == [
            (1, "127.0.0.1", 19093)
        ]
        brokers = await call(
            broker,
            apis.ApiKey.DESCRIBE_CLUSTER,
            1,
            {**fields, "endpoint_type": 1},
            controller_listener=True,
        )
        assert brokers.error_code == ErrorCode.mismatched_endpoint_type
        unknown_type = await call(
            broker,
            apis.ApiKey.DESCRIBE_CLUSTER,
            1,
            {**fields, "endpoint_type": 5},
            controller_listener=True,
        )
        assert unknown_type.error_code == ErrorCode.unsupported_endpoint_type
        on_client_listener = await call(broker, apis.ApiKey.DESCRIBE_CLUSTER, 1, fields)
        assert on_client_listener.error_code == ErrorCode.mismatched_endpoint_type
        v0 = await call(
            broker,
            apis.ApiKey.DESCRIBE_CLUSTER,
            0,
            {"include_cluster_authorized_operations": False},
            controller_listener=True,
        )
        assert v0.error_code == ErrorCode.invalid_request
    finally:
        broker.close()


@pytest.mark.parametrize("controller_listener", [False, True])
async def test_admin_requests_are_handled_here_without_a_forwarder(
    broker: broker_module.Broker, controller_listener: bool
) -> None:
    created = await call(
        broker,
        apis.ApiKey.CREATE_TOPICS,
        7,
        {
            "topics": [
                {
                    "name": f"t-{controller_listener}",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 1000,
            "validate_only": False,
        },
        controller_listener=controller_listener,
    )
    assert created.topics[0].error_code == ErrorCode.none
    assert f"t-{controller_listener}" in broker.context.image.topics
