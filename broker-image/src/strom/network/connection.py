"""One TCP connection to one node: pipelined requests matched to responses.

Requests are written as they come; a reader task reads response frames and completes the
request with the same correlation id. Kafka answers in order on a connection, so a
response for anything but the oldest outstanding request means the stream is broken:
the connection is closed and every outstanding request fails. So does a request that
misses its deadline, as the stream state is then unknown.

`open_connection` connects and negotiates versions with ApiVersions before the
connection is handed out; the peer's ranges are kept for the life of the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from strom.network import clock as clock_module
from strom.network import errors
from strom.protocol import apis, outbound

T = TypeVar("T")
_MAX_CORRELATION_ID = 2**31 - 1


class _Expired(Exception):
    pass


async def until(clock: clock_module.Clock, deadline: float, awaitable: Awaitable[T]) -> T:
    """Await `awaitable` until `deadline` on `clock`; on expiry cancel it, raise _Expired."""
    task = asyncio.ensure_future(awaitable)
    remaining = deadline - clock.monotonic()
    if remaining <= 0 and not task.done():
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise _Expired
    timer = asyncio.ensure_future(clock.sleep(max(remaining, 0)))
    try:
        await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        timer.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    raise _Expired


class Connection:
    def __init__(
        self,
        node_id: int,
        address: tuple[str, int],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        clock: clock_module.Clock,
        client_id: str | None,
        max_response_bytes: int,
    ) -> None:
        self.node_id = node_id
        self.address = address
        self._reader = reader
        self._writer = writer
        self._clock = clock
        self._client_id = client_id
        self._max_response_bytes = max_response_bytes
        self._next_correlation_id = 0
        # correlation id -> (api key, api version, future), oldest first
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._closed = False
        self._close_callbacks: list[Callable[[], None]] = []
        self.peer_versions: dict[int, tuple[int, int]] = {}
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    def __repr__(self) -> str:
        host, port = self.address
        return f"Connection(node {self.node_id} at {host}:{port})"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def on_close(self, callback: Callable[[], None]) -> None:
        self._close_callbacks.append(callback)

    async def request(self, body: Any, deadline: float) -> Any:
        """Send a kio request object and return the kio response, by `deadline`."""
        if self._closed:
            raise errors.Disconnected(f"{self!r} is closed")
        api_key = outbound.api_key_of(body)
        api_version = outbound.api_version_of(body)
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) % _MAX_CORRELATION_ID
        frame = outbound.encode_request(body, correlation_id, self._client_id)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (api_key, api_version, future)
        self._writer.write(frame)
        try:
            return await until(self._clock, deadline, self._round_trip(future))
        except _Expired:
            future.cancel()  # this request's own failure is the RequestTimeout below
            self.close(errors.Disconnected(f"{self!r} closed: another request on it timed out"))
            raise errors.RequestTimeout(
                f"no response from node {self.node_id} to api {api_key} v{api_version} "
                "before the deadline"
            ) from None
        finally:
            if not future.done():
                future.cancel()  # abandoned (the caller was cancelled): drop the answer

    async def _round_trip(self, future: asyncio.Future[Any]) -> Any:
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as error:
            self.close(errors.Disconnected(f"{self!r} failed writing: {error!r}"))
        return await asyncio.shield(future)

    async def _read_loop(self) -> None:
        try:
            while True:
                prefix = await self._reader.readexactly(4)
                size = apis.frame_size(prefix)
                if size < 4 or size > self._max_response_bytes:
                    raise outbound.MalformedResponse(f"response frame of {size} bytes")
                frame = await self._reader.readexactly(size)
                self._dispatch(frame)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as error:
            self.close(errors.Disconnected(f"{self!r} closed by the peer: {error!r}"))
        except outbound.MalformedResponse as error:
            self.close(errors.BadResponse(f"{self!r}: {error}"))

    def _dispatch(self, frame: bytes) -> None:
        correlation_id = outbound.response_correlation_id(frame)
        oldest = next(iter(self._pending), None)
        if correlation_id != oldest:
            raise outbound.MalformedResponse(
                f"response to correlation id {correlation_id}, expected {oldest}"
            )
        api_key, api_version, future = self._pending.pop(correlation_id)
        _, body = outbound.decode_response(frame, api_key, api_version)
        if not future.done():
            future.set_result(body)

    def close(self, error: errors.NetworkError | None = None) -> None:
        """Close now: outstanding requests fail with `error` (Disconnected by default)."""
        if self._closed:
            return
        self._closed = True
        if error is None:
            error = errors.Disconnected(f"{self!r} was closed")
        transport = self._writer.transport
        transport.abort()
        if self._read_task is not asyncio.current_task():
            self._read_task.cancel()
        pending, self._pending = self._pending, {}
        for _, _, future in pending.values():
            if not future.done():
                future.set_exception(type(error)(str(error)))
        for callback in self._close_callbacks:
            callback()

    async def wait_closed(self) -> None:
        with contextlib.suppress(BaseException):
            await self._read_task
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()


async def open_connection(
    node_id: int,
    address: tuple[str, int],
    *,
    clock: clock_module.Clock,
    client_id: str | None,
    deadline: float,
    max_response_bytes: int,
) -> Connection:
    """Connect and negotiate versions by `deadline`; raise Disconnected if that fails."""
    host, port = address
    try:
        reader, writer = await until(clock, deadline, asyncio.open_connection(host, port))
    except _Expired:
        raise errors.Disconnected(
            f"connecting to node {node_id} at {host}:{port} timed out"
        ) from None
    except OSError as error:
        raise errors.Disconnected(
            f"cannot connect to node {node_id} at {host}:{port}: {error}"
        ) from error
    connection = Connection(
        node_id,
        address,
        reader,
        writer,
        clock=clock,
        client_id=client_id,
        max_response_bytes=max_response_bytes,
    )
    try:
        connection.peer_versions = await _negotiate(connection, deadline)
    except errors.NetworkError as error:
        connection.close()
        raise errors.Disconnected(
            f"ApiVersions with node {node_id} at {host}:{port} failed: {error}"
        ) from error
    except BaseException:
        connection.close()
        raise
    return connection


async def _negotiate(connection: Connection, deadline: float) -> dict[int, tuple[int, int]]:
    versions = outbound.client_versions(apis.ApiKey.API_VERSIONS)
    assert versions is not None
    version = versions[1]
    response = await connection.request(outbound.api_versions_request(version), deadline)
    if response.error_code == ErrorCode.unsupported_version:
        # KIP-511: the peer listed what it serves in a v0 body; ask again at its highest.
        peer = outbound.peer_versions(response)
        retry = outbound.highest_common_version(apis.ApiKey.API_VERSIONS, peer)
        if retry is None or retry >= version:
            raise errors.UnsupportedVersion("no ApiVersions version in common with the peer")
        response = await connection.request(outbound.api_versions_request(retry), deadline)
    if response.error_code != ErrorCode.none:
        raise errors.BadResponse(f"ApiVersions answered {response.error_code.name}")
    return outbound.peer_versions(response)
