"""The channel against a scripted peer in this process (our own server-side codec on a
loopback socket) and a manual clock: time is driven by the test, never waited for."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from strom.network import backoff, channel, errors
from strom.protocol import apis, outbound, shaping

NODE = 7


class ManualClock:
    """A clock that moves only when the test advances it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        self._sleepers.append((self.now + seconds, future))
        await future

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [f for at, f in self._sleepers if at <= self.now]
        self._sleepers = [(at, f) for at, f in self._sleepers if at > self.now]
        for future in due:
            if not future.done():
                future.set_result(None)


Responder = Callable[[apis.Request], Any]  # a kio response, or None for no answer


def api_versions_answer(request: apis.Request) -> Any:
    return shaping.build(
        apis.response_class(18, request.header.api_version),
        {"error_code": 0, "api_keys": apis.api_versions_entries(), "throttle_time": 0},
    )


def metadata_answer(request: apis.Request) -> Any:
    return shaping.build(
        apis.response_class(3, request.header.api_version),
        {
            "throttle_time": 0,
            "brokers": [],
            "cluster_id": "scripted",
            "error_code": 0,
            "controller_id": -1,
            "topics": [
                {"error_code": 3, "name": t.name, "is_internal": False, "partitions": []}
                for t in request.body.topics or ()
            ],
        },
    )


class ScriptedPeer:
    def __init__(self, respond: Responder, *, swap_pairs: bool = False) -> None:
        self.respond = respond
        self.swap_pairs = swap_pairs  # answer the 2nd request of each pair before the 1st
        self.connections = 0
        self.requests: list[apis.Request] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        host, port = self.server.sockets[0].getsockname()[:2]
        return host, port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        held: bytes | None = None
        try:
            while True:
                size = apis.frame_size(await reader.readexactly(4))
                request = apis.decode_request(memoryview(await reader.readexactly(size)))
                self.requests.append(request)
                answer = self.respond(request)
                if answer is None:
                    continue
                data = apis.joined(apis.encode_response(request.header.correlation_id, answer))
                if self.swap_pairs and request.header.api_key != apis.ApiKey.API_VERSIONS:
                    if held is None:
                        held = data
                        continue
                    data, held = data + held, None
                writer.write(data)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def answering(*, metadata: Responder | None = metadata_answer) -> Responder:
    def respond(request: apis.Request) -> Any:
        if request.header.api_key == apis.ApiKey.API_VERSIONS:
            return api_versions_answer(request)
        return metadata(request) if metadata else None

    return respond


def metadata(*names: str) -> outbound.Draft:
    return outbound.Draft(
        3,
        {
            "topics": [{"name": n, "topic_id": None} for n in names],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )


async def arrived(peer: ScriptedPeer, count: int) -> None:
    """Until the peer has read `count` requests (a real 5 s deadline, never the clock's)."""
    async with asyncio.timeout(5):
        while len(peer.requests) < count:
            await asyncio.sleep(0.001)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def connect(
    clock: ManualClock,
) -> AsyncIterator[Callable[[ScriptedPeer], Any]]:
    made: list[tuple[channel.TcpChannel, ScriptedPeer]] = []

    async def make(peer: ScriptedPeer) -> channel.TcpChannel:
        address = await peer.start()
        made.append((chan := channel.TcpChannel({NODE: address}.get, clock=clock), peer))
        return chan

    yield make
    for chan, peer in made:
        await chan.close()
        await peer.stop()


async def test_a_request_times_out_on_the_injected_clock(
    clock: ManualClock, connect: Callable[[ScriptedPeer], Any]
) -> None:
    peer = ScriptedPeer(answering(metadata=None))  # ApiVersions only; Metadata never
    chan: channel.TcpChannel = await connect(peer)
    pending = asyncio.create_task(chan.send(NODE, metadata("a"), timeout_s=2.0))
    await arrived(peer, 2)  # ApiVersions, then the Metadata request
    clock.advance(1.9)
    await asyncio.sleep(0.01)
    assert not pending.done()  # 0.1 s of its deadline left on the clock
    clock.advance(0.2)
    with pytest.raises(errors.RequestTimeout):
        await asyncio.wait_for(pending, 5)
    assert chan.negotiated_version(NODE, 3) is None  # that connection was closed


async def test_an_out_of_order_response_closes_the_connection(
    connect: Callable[[ScriptedPeer], Any],
) -> None:
    peer = ScriptedPeer(answering(), swap_pairs=True)
    chan: channel.TcpChannel = await connect(peer)
    first = asyncio.create_task(chan.send(NODE, metadata("a")))
    second = asyncio.create_task(chan.send(NODE, metadata("b")))
    results = await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 5)
    assert all(isinstance(r, errors.NetworkError) for r in results), results
    assert any(isinstance(r, errors.BadResponse) for r in results), results


async def test_kip511_fallback_retries_api_versions_at_the_peers_highest(
    connect: Callable[[ScriptedPeer], Any],
) -> None:
    entries = [
        {"api_key": 18, "min_version": 0, "max_version": 2},
        {"api_key": 3, "min_version": 0, "max_version": 9},
    ]

    def respond(request: apis.Request) -> Any:
        if request.header.api_key == apis.ApiKey.API_VERSIONS:
            version = request.header.api_version
            if version > 2:
                v0 = load_response_schema(18, 0)
                return shaping.build(
                    v0, {"error_code": ErrorCode.unsupported_version, "api_keys": entries}
                )
            return shaping.build(
                apis.response_class(18, version),
                {"error_code": 0, "api_keys": entries, "throttle_time": 0},
            )
        return metadata_answer(request)

    peer = ScriptedPeer(respond)
    chan: channel.TcpChannel = await connect(peer)
    response = await asyncio.wait_for(chan.send(NODE, metadata("x")), 5)
    assert type(response).__version__ == 9
    assert [(r.header.api_key, r.header.api_version) for r in peer.requests] == [
        (18, 4),
        (18, 2),
        (3, 9),
    ]
    with pytest.raises(errors.UnsupportedVersion):
        await chan.send(NODE, metadata("x"), api_version=10)


async def test_back_off_runs_on_the_injected_clock(clock: ManualClock) -> None:
    peer = ScriptedPeer(answering())
    address = await peer.start()
    await peer.stop()  # nobody listens there any more
    settings = channel.ChannelSettings(reconnect_backoff_ms=100, reconnect_backoff_max_ms=800)
    chan = channel.TcpChannel(
        {NODE: address}.get, clock=clock, settings=settings, rng=random.Random(1)
    )
    try:
        with pytest.raises(errors.Disconnected) as first:
            await chan.send(NODE, metadata())
        assert 0.08 <= first.value.retry_after_s <= 0.12
        # Within the back-off, a short deadline fails at once; a long one waits on the clock.
        with pytest.raises(errors.Disconnected):
            await chan.send(NODE, metadata(), timeout_s=0.01)
        waiting = asyncio.create_task(chan.send(NODE, metadata(), timeout_s=10))
        await asyncio.sleep(0.01)
        assert not waiting.done()  # asleep on the manual clock
        clock.advance(first.value.retry_after_s)
        with pytest.raises(errors.Disconnected) as second:
            await asyncio.wait_for(waiting, 5)
        assert 0.16 <= second.value.retry_after_s <= 0.24
    finally:
        await chan.close()


def test_exponential_back_off_doubles_with_jitter_up_to_the_max() -> None:
    exact = backoff.ExponentialBackoff(0.05, 1.0, jitter=0)
    assert [exact.backoff(n) for n in range(7)] == pytest.approx(
        [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    )
    jittered = backoff.ExponentialBackoff(0.05, 1.0, rng=random.Random(3))
    for n in range(10):
        expected = min(0.05 * 2**n, 1.0)
        assert 0.8 * expected <= jittered.backoff(n) <= min(1.2 * expected, 1.0)
    assert backoff.ExponentialBackoff(0.5, 0.1, jitter=0).backoff(3) == 0.5  # max below initial
