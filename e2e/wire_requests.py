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
    return consumer_fetch(topic, {0: 0}, topic_id=topic_id)


def consumer_fetch(
    topic: str,
    offsets: dict[int, int],
    *,
    topic_id: uuid.UUID | None = None,
    session_id: int = 0,
    epoch: int = -1,
) -> outbound.Draft:
    """A consumer's Fetch of `topic`'s partitions from the given offsets (up to 1 MiB
    each), waiting for nothing: sessionless unless given a fetch session's id and epoch
    (KIP-227). A session's incremental fetch names only what changed: `offsets` may be
    empty."""
    named: dict[str, Any] = {"topic": topic}
    if topic_id is not None:
        named["topic_id"] = topic_id
    partitions = [
        {
            "partition": index,
            "current_leader_epoch": -1,
            "fetch_offset": offset,
            "last_fetched_epoch": -1,
            "log_start_offset": -1,
            "partition_max_bytes": 1 << 20,
        }
        for index, offset in offsets.items()
    ]
    return outbound.Draft(
        apis.ApiKey.FETCH,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": session_id,
            "session_epoch": epoch,
            "topics": [{**named, "partitions": partitions}] if partitions else [],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
