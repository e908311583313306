"""The channel: send a request to a node id, get its response.

`Channel` is the whole interface the rest of the broker sees, so a simulation can put a
router in its place. `TcpChannel` is the real one: a connection per node (see
`connection`), opened on first use and reused; when it breaks, the next request
reconnects, no sooner than the back-off allows (reconnect.backoff.ms doubling up to
reconnect.backoff.max.ms, with jitter, counted from the previous attempt as Kafka does).
A request sent while its node is backing off waits for the next attempt if that comes
before its deadline, and fails at once with Disconnected (saying when) if it does not.
Concurrent requests to a node share one connection attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from strom.network import backoff, errors
from strom.network import clock as clock_module
from strom.network import connection as connection_module
from strom.protocol import outbound

Resolver = Callable[[int], tuple[str, int] | None]


class Channel(Protocol):
    async def send(
        self,
        node_id: int,
        request: Any,
        *,
        api_version: int | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Send `request` to `node_id` and return the kio response object.

        `request` is a kio request object (sent at its class's version) or an
        `outbound.Draft`, built at `api_version` or else at the highest version both
        sides support. Raises a `errors.NetworkError`: `RequestTimeout` after
        `timeout_s` (request.timeout.ms by default), `Disconnected`, `BadResponse`,
        `UnsupportedVersion`.
        """
        ...

    async def close(self) -> None:
        """Close every connection; outstanding and later requests fail with Disconnected."""
        ...


@dataclass(frozen=True, slots=True)
class ChannelSettings:
    """The client settings of Kafka's NetworkClient that apply here, by their Kafka names."""

    client_id: str = "strom-broker"
    request_timeout_ms: int = 30_000  # request.timeout.ms
    reconnect_backoff_ms: int = 50  # reconnect.backoff.ms
    reconnect_backoff_max_ms: int = 1_000  # reconnect.backoff.max.ms
    connection_setup_timeout_ms: int = 10_000  # socket.connection.setup.timeout.ms
    max_response_bytes: int = 104_857_600  # as socket.request.max.bytes
    backoff_jitter: float = 0.2


@dataclass
class _Link:
    """What the channel knows about one node."""

    connection: connection_module.Connection | None = None
    connecting: asyncio.Task[connection_module.Connection] | None = None
    failures: int = 0  # consecutive failed attempts (a dropped connection counts)
    last_attempt: float = float("-inf")
    next_attempt: float = float("-inf")
    closing: set[connection_module.Connection] = field(default_factory=set)


class TcpChannel:
    """A Channel over real TCP connections, one per node."""

    def __init__(
        self,
        resolve: Resolver,
        *,
        clock: clock_module.Clock,
        settings: ChannelSettings | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._resolve = resolve
        self._clock = clock
        self.settings = settings or ChannelSettings()
        self._backoff = backoff.ExponentialBackoff(
            self.settings.reconnect_backoff_ms / 1000,
            self.settings.reconnect_backoff_max_ms / 1000,
            jitter=self.settings.backoff_jitter,
            rng=rng,
        )
        self._links: dict[int, _Link] = {}
        self._closed = False

    async def send(
        self,
        node_id: int,
        request: Any,
        *,
        api_version: int | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        if timeout_s is None:
            timeout_s = self.settings.request_timeout_ms / 1000
        deadline = self._clock.monotonic() + timeout_s
        connection = await self.connection(node_id, deadline)
        body = _versioned(connection, request, api_version)
        return await connection.request(body, deadline)

    async def connection(self, node_id: int, deadline: float) -> connection_module.Connection:
        """The open connection to `node_id`, connecting (after any back-off) if need be."""
        if self._closed:
            raise errors.Disconnected("the channel is closed")
        address = self._resolve(node_id)
        if address is None:
            raise errors.UnknownNode(f"node {node_id} has no known address")
        link = self._links.setdefault(node_id, _Link())
        current = link.connection
        if current is not None:
            if not current.closed and current.address == address:
                return current
            if not current.closed:  # the node moved: metadata has a new address
                current.close(errors.Disconnected(f"node {node_id} moved to {address}"))
            link.connection = None
        if link.connecting is None:
            now = self._clock.monotonic()
            wait = max(link.next_attempt - now, 0.0)
            if now + wait > deadline:
                raise errors.Disconnected(
                    f"node {node_id} is unreachable; next attempt in {wait * 1000:.0f} ms",
                    retry_after_s=wait,
                )
            link.connecting = asyncio.get_running_loop().create_task(
                self._connect(node_id, link, address, wait)
            )
            link.connecting.add_done_callback(_retrieve)
        try:
            return await connection_module.until(
                self._clock, deadline, asyncio.shield(link.connecting)
            )
        except connection_module._Expired:
            raise errors.RequestTimeout(
                f"not connected to node {node_id} before the deadline"
            ) from None

    async def _connect(
        self, node_id: int, link: _Link, address: tuple[str, int], wait: float
    ) -> connection_module.Connection:
        try:
            if wait > 0:
                await self._clock.sleep(wait)
            link.last_attempt = self._clock.monotonic()
            opened = await connection_module.open_connection(
                node_id,
                address,
                clock=self._clock,
                client_id=self.settings.client_id,
                deadline=link.last_attempt + self.settings.connection_setup_timeout_ms / 1000,
                max_response_bytes=self.settings.max_response_bytes,
            )
        except errors.Disconnected as error:
            retry_after = self._failed(link)
            raise errors.Disconnected(str(error), retry_after_s=retry_after) from error
        finally:
            link.connecting = None
        if self._closed:
            opened.close()
            raise errors.Disconnected("the channel is closed")
        link.failures = 0
        link.connection = opened
        opened.on_close(lambda: self._dropped(link, opened))
        return opened

    def _failed(self, link: _Link) -> float:
        link.failures += 1
        link.next_attempt = link.last_attempt + self._backoff.backoff(link.failures - 1)
        return max(link.next_attempt - self._clock.monotonic(), 0.0)

    def _dropped(self, link: _Link, dropped: connection_module.Connection) -> None:
        if link.connection is dropped:
            link.connection = None
            self._failed(link)
        if not self._closed:
            link.closing.add(dropped)
            task = asyncio.get_running_loop().create_task(dropped.wait_closed())
            task.add_done_callback(lambda _: link.closing.discard(dropped))

    def negotiated_version(self, node_id: int, api_key: int) -> int | None:
        """The version a Draft for `api_key` would be sent at now, if connected."""
        link = self._links.get(node_id)
        if link is None or link.connection is None or link.connection.closed:
            return None
        return outbound.highest_common_version(api_key, link.connection.peer_versions)

    async def close(self) -> None:
        self._closed = True
        connections = []
        for link in self._links.values():
            if link.connecting is not None:
                link.connecting.cancel()
                with contextlib.suppress(BaseException):
                    await link.connecting
            if link.connection is not None:
                connections.append(link.connection)
                link.connection.close(errors.Disconnected("the channel is closed"))
            connections.extend(link.closing)
        for connection in connections:
            await connection.wait_closed()


def _versioned(
    connection: connection_module.Connection, request: Any, api_version: int | None
) -> Any:
    """The kio request object to send: a Draft built at the version to use, checked."""
    if isinstance(request, outbound.Draft):
        if api_version is None:
            api_version = outbound.highest_common_version(request.api_key, connection.peer_versions)
            if api_version is None:
                raise errors.UnsupportedVersion(
                    f"node {connection.node_id} supports no version of api {request.api_key} "
                    "that we can send"
                )
        request = request.at(api_version)
    elif api_version is not None and api_version != outbound.api_version_of(request):
        raise ValueError(
            f"{type(request).__name__} is v{outbound.api_version_of(request)}, not v{api_version}"
        )
    version = outbound.api_version_of(request)
    low, high = connection.peer_versions.get(outbound.api_key_of(request), (0, -1))
    if not low <= version <= high:
        raise errors.UnsupportedVersion(
            f"node {connection.node_id} does not serve {type(request).__name__} v{version}"
        )
    return request


def _retrieve(task: asyncio.Task[Any]) -> None:
    # Every waiter may have given up on a connection attempt; don't log its failure as lost.
    if not task.cancelled():
        task.exception()
