"""A loaded broker (metadata, logs, groups; no listeners) and a way to call it with
requests encoded as a client would encode them. Imported by name: conftest puts this
folder on sys.path (importlib mode, no __init__.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader
from strom.cluster import topic_requests
from strom.config import broker as broker_config
from strom.protocol import apis, outbound
from strom.server import broker as broker_module
from strom.server import context, dispatch


def new_broker(data: Path, **settings: str) -> broker_module.Broker:
    return broker_module.Broker(
        broker_config.BrokerConfig(
            {"log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0", **settings}
        )
    )


async def loaded(data: Path, **settings: str) -> broker_module.Broker:
    broker = new_broker(data, **settings)
    await broker.load()
    broker.context.endpoints.append(context.Endpoint("PLAINTEXT", "127.0.0.1", 9092))
    return broker


async def create_topic(
    broker: broker_module.Broker, name: str, partitions: int, configs: dict[str, str] | None = None
) -> None:
    (outcome,) = await broker.controller.create_topics(
        [topic_requests.NewTopic(name, partitions, 1, configs=configs or {})]
    )
    assert outcome.error is None, outcome.error


async def call(
    broker: broker_module.Broker,
    api_key: int,
    version: int,
    body: dict[str, Any],
    *,
    controller_listener: bool = False,
) -> Any:
    """Encode as a client would, decode, dispatch, encode the answer, decode it again; on
    a client listener, or on the controller listener with its table and handlers."""
    frame = outbound.encode_request(outbound.Draft(api_key, body).at(version), 3, "t")
    if controller_listener:
        request = apis.decode_request(memoryview(frame)[4:], apis.CONTROLLER_VERSIONS)
        dispatcher = dispatch.Dispatcher(broker.context, handlers=dispatch.CONTROLLER_HANDLERS)
        listener = "CONTROLLER"
    else:
        request = apis.decode_request(memoryview(frame)[4:])
        dispatcher = dispatch.Dispatcher(broker.context)
        listener = "PLAINTEXT"
    response = await dispatcher.dispatch(request, listener, "127.0.0.1")
    data = apis.joined(apis.encode_response(3, response))
    response_type = load_response_schema(api_key, version)
    _, header_size = entity_reader(response_type.__header_schema__)(data, 4)
    body_read, _ = entity_reader(response_type)(data, 4 + header_size)
    return body_read


def consumer_fetch(
    topics: list[dict[str, Any]],
    *,
    session_id: int = 0,
    epoch: int = -1,
    forgotten: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A consumer's Fetch body that waits for nothing; sessionless unless given a session
    id and epoch."""
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": topics,
        "forgotten_topics_data": forgotten or [],
        "rack_id": "",
    }
