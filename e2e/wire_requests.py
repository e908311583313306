"""One Kafka request to a broker on loopback, sent through Strom's own outbound channel,
for tests that need a request no client library sends (a raw InitProducerId, a
CreatePartitions of 16 million, ...)."""

from __future__ import annotations

from typing import Any

from strom.network import channel as channel_module
from strom.network import clock
from strom.protocol import outbound


async def send(
    port: int,
    request: outbound.Draft | Any,
    api_version: int | None = None,
    *,
    host: str = "127.0.0.1",
    timeout_s: float | None = None,
) -> Any:
    """The broker's response to `request` (a Draft at `api_version`, else the highest both
    know, or a kio request object), from the broker at `host` (loopback unless it runs in
    a network namespace); `timeout_s` bounds the round trip (request.timeout.ms)."""
    channel = channel_module.TcpChannel({1: (host, port)}.get, clock=clock.SystemClock())
    try:
        return await channel.send(1, request, api_version=api_version, timeout_s=timeout_s)
    finally:
        await channel.close()
