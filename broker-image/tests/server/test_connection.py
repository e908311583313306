"""The connection protocol object fed bytes through a fake transport (uvicorn's way):
ordering, pipelining, flow control and what happens to bad frames — no sockets."""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from broker_calls import loaded
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from strom.protocol import outbound
from strom.server import broker as broker_module
from strom.server import connection, dispatch, flow_control


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False
        self.reading = True

    def write(self, data: Any) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default


def request(api_key: int, version: int, body: dict[str, Any], correlation_id: int) -> bytes:
    return outbound.encode_request(outbound.Draft(api_key, body).at(version), correlation_id, "t")


def api_versions(correlation_id: int, version: int = 3) -> bytes:
    body = {"client_software_name": "t", "client_software_version": "1"}
    return request(18, version, body, correlation_id)


def responses(data: bytes, api_key: int, version: int) -> list[tuple[int, Any]]:
    response_type = load_response_schema(api_key, version)
    out = []
    position = 0
    while position < len(data):
        (size,) = struct.unpack_from(">i", data, position)
        frame = data[position + 4 : position + 4 + size]
        header, header_size = entity_reader(response_type.__header_schema__)(frame, 0)
        body, _ = entity_reader(response_type)(frame, header_size)
        out.append((header.correlation_id, body))
        position += 4 + size
    return out


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[broker_module.Broker]:
    server = await loaded(tmp_path)
    yield server
    server.close()


def connect(
    broker: broker_module.Broker,
    max_request_bytes: int = 1 << 20,
    request_memory: flow_control.RequestMemory | None = None,
    listener: str = "PLAINTEXT",
) -> tuple[connection.KafkaConnection, FakeTransport]:
    dispatcher = dispatch.Dispatcher(broker.context)
    protocol = connection.KafkaConnection(
        dispatch=lambda r, peer: dispatcher.dispatch(r, listener, peer),
        max_request_bytes=max_request_bytes,
        metrics=broker.metrics,
        on_close=lambda c: None,
        request_memory=request_memory,
        listener=listener,
    )
    transport = FakeTransport()
    protocol.connection_made(transport)
    return protocol, transport


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_pipelined_requests_are_answered_in_order(broker: broker_module.Broker) -> None:
    protocol, transport = connect(broker)
    stream = b"".join(api_versions(correlation_id) for correlation_id in range(1, 6))
    protocol.data_received(stream[:7])  # split anywhere, as TCP may
    protocol.data_received(stream[7:])
    await settle()
    answered = responses(bytes(transport.written), 18, 3)
    assert [correlation_id for correlation_id, _ in answered] == [1, 2, 3, 4, 5]
    assert all(body.error_code == ErrorCode.none for _, body in answered)
    assert not transport.closed


async def test_requests_are_counted_and_timed_by_api_and_listener(
    broker: broker_module.Broker,
) -> None:
    protocol, _ = connect(broker, listener="INTERNAL")
    protocol.data_received(api_versions(1) + api_versions(2))
    await settle()
    registry = broker.metrics.registry
    labels = {"api": "API_VERSIONS", "listener": "INTERNAL"}
    assert registry.get_sample_value("strom_requests_total", {**labels, "version": "3"}) == 2
    assert registry.get_sample_value("strom_request_latency_seconds_count", labels) == 2
    assert (
        registry.get_sample_value(
            "strom_requests_total", {**labels, "listener": "PLAINTEXT", "version": "3"}
        )
        is None
    )


async def test_unknown_api_versions_version_gets_v0_error_35_and_stays_open(
    broker: broker_module.Broker,
) -> None:
    protocol, transport = connect(broker)
    frame = bytearray(api_versions(9))
    struct.pack_into(">h", frame, 6, 42)  # the request's api_version
    protocol.data_received(bytes(frame))
    await settle()
    [(correlation_id, body)] = responses(bytes(transport.written), 18, 0)
    assert correlation_id == 9 and body.error_code == ErrorCode.unsupported_version
    assert not transport.closed


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">i", 10_000_000) + b"x",  # above socket.request.max.bytes
        struct.pack(">i", -1),  # negative size
        struct.pack(">ihhi", 8, 999, 0, 1),  # unknown API key
        struct.pack(">ihhi", 8, 3, 99, 1),  # Metadata v99
        struct.pack(">i", 3) + b"abc",  # shorter than any header
    ],
    ids=["oversized", "negative", "unknown-key", "unknown-version", "short"],
)
async def test_bad_frames_close_the_connection(broker: broker_module.Broker, frame: bytes) -> None:
    protocol, transport = connect(broker, max_request_bytes=1 << 20)
    protocol.data_received(frame)
    await settle()
    assert transport.closed
    assert transport.written == b""


async def test_reading_pauses_while_too_many_requests_wait(
    broker: broker_module.Broker,
) -> None:
    protocol, transport = connect(broker)
    # Fill the queue in one go before the worker runs: reading must pause...
    protocol.data_received(
        b"".join(api_versions(i) for i in range(connection.MAX_QUEUED_FRAMES + 5))
    )
    assert not transport.reading
    await settle()
    # ...and resume once the worker drained it.
    assert transport.reading
    assert len(responses(bytes(transport.written), 18, 3)) == connection.MAX_QUEUED_FRAMES + 5


async def test_requests_queued_when_the_client_closes_are_not_run(
    broker: broker_module.Broker,
) -> None:
    # A Metadata request that would auto-create a topic, queued behind another request
    # when the client goes away, must not run (a closing consumer's last Metadata once
    # re-created a topic deleted meanwhile).
    protocol, _ = connect(broker)
    metadata = request(
        3,
        12,
        {
            "topics": [{"name": "created-by-a-ghost", "topic_id": uuid.UUID(int=0)}],
            "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False,
        },
        2,
    )
    protocol.data_received(api_versions(1) + metadata)
    if not protocol.eof_received():
        protocol.connection_lost(None)  # what asyncio does when eof_received is falsy
    await settle()
    assert "created-by-a-ghost" not in broker.metadata.image.topics


def big_api_versions(correlation_id: int, size: int) -> bytes:
    body = {"client_software_name": "x" * size, "client_software_version": "1"}
    return request(18, 3, body, correlation_id)


async def test_request_memory_pauses_reading_across_connections_and_resumes(
    broker: broker_module.Broker,
) -> None:
    memory = flow_control.RequestMemory(100)  # queued.max.request.bytes
    first, first_transport = connect(broker, request_memory=memory)
    second, second_transport = connect(broker, request_memory=memory)
    third, third_transport = connect(broker, request_memory=memory)
    first.data_received(big_api_versions(1, 200))  # more than the limit: it may overshoot
    assert first_transport.reading and memory.used > 100
    second.data_received(big_api_versions(2, 50))  # arrived whole, but not reserved
    third_frame = big_api_versions(3, 50)
    third.data_received(third_frame[:4])  # only the size so far
    assert not second_transport.reading and not third_transport.reading
    assert memory.waiting == 2
    await settle()
    # The first was answered and gave its memory back; the others were let in, in order.
    assert second_transport.reading and third_transport.reading
    assert [c for c, _ in responses(bytes(second_transport.written), 18, 3)] == [2]
    third.data_received(third_frame[4:])
    await settle()
    assert [c for c, _ in responses(bytes(third_transport.written), 18, 3)] == [3]
    assert [c for c, _ in responses(bytes(first_transport.written), 18, 3)] == [1]
    assert memory.used == 0 and memory.waiting == 0


async def test_a_closed_connection_gives_its_request_memory_back(
    broker: broker_module.Broker,
) -> None:
    memory = flow_control.RequestMemory(100)
    first, _ = connect(broker, request_memory=memory)
    second, _ = connect(broker, request_memory=memory)
    waiting, waiting_transport = connect(broker, request_memory=memory)
    frame = big_api_versions(1, 200)
    first.data_received(frame[:150])  # reserved, half read
    second.data_received(frame[:10])  # waiting for memory
    waiting.data_received(big_api_versions(2, 10))  # waiting behind it
    assert memory.waiting == 2
    second.connection_lost(None)
    assert memory.waiting == 1
    first.connection_lost(ConnectionResetError())
    assert waiting_transport.reading
    await settle()
    assert [c for c, _ in responses(bytes(waiting_transport.written), 18, 3)] == [2]
    assert memory.used == 0
