"""One Kafka request to a broker on loopback, sent through Strom's own outbound channel,
for tests that need a request no client library sends (a raw InitProducerId, a
CreatePartitions of 16 million, ...)."""

from __future__ import annotations

import uuid
from typing import Any

from strom.network import channel as channel_module
from strom.network import clock
from strom.protocol import apis, outbound


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


def fetch_from_start(topic: str, topic_id: uuid.UUID | None = None) -> outbound.Draft:
    """A consumer's Fetch of partition 0 of `topic` from offset 0 (up to 1 MiB), named by
    name (and by id from v13 on, when `topic_id` is given)."""
    named: dict[str, Any] = {"topic": topic}
    if topic_id is not None:
        named["topic_id"] = topic_id
    return outbound.Draft(
        apis.ApiKey.FETCH,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    **named,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
