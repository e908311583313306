"""The broker's outbound channel (strom.network) against a real strom-server process.

Versions are negotiated on connect; requests of several APIs go through; many requests
share one pipelined connection; and the failures are the typed ones, within deadlines:
nobody listening, a stopped broker (SIGSTOP), a killed and restarted broker.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import wire_requests
from kio.schema.errors import ErrorCode
from strom.network import channel as channel_module
from strom.network import clock, errors
from strom.protocol import apis, outbound
from strom.records import batches
from strom_process import StromProcess, free_port

NODE = 1
FAST = channel_module.ChannelSettings(
    client_id="test-channel",
    request_timeout_ms=10_000,
    reconnect_backoff_ms=50,
    reconnect_backoff_max_ms=400,
    connection_setup_timeout_ms=5_000,
)


def metadata(*topics: str) -> outbound.Draft:
    return outbound.Draft(
        apis.ApiKey.METADATA,
        {
            "topics": [{"name": name, "topic_id": None} for name in topics],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )


def channel_to(port: int, settings: channel_module.ChannelSettings = FAST) -> Any:
    return channel_module.TcpChannel(
        {NODE: ("127.0.0.1", port)}.get, clock=clock.SystemClock(), settings=settings
    )


@pytest.fixture
async def channel(strom: StromProcess) -> AsyncIterator[channel_module.TcpChannel]:
    made = channel_to(strom.port)
    yield made
    await made.close()


async def test_versions_are_negotiated_once_per_connection(
    channel: channel_module.TcpChannel,
) -> None:
    assert channel.negotiated_version(NODE, apis.ApiKey.METADATA) is None
    response = await channel.send(NODE, metadata())
    assert type(response).__version__ == 13 == channel.negotiated_version(NODE, 3)
    connection = await channel.connection(NODE, time.monotonic() + 5)
    assert connection.peer_versions == {int(k): v for k, v in apis.SUPPORTED_VERSIONS.items()}
    # Any ApiVersions version also goes through as an ordinary request.
    for version in range(5):
        answer = await channel.send(NODE, outbound.api_versions_request(version))
        assert answer.error_code == ErrorCode.none
    # A fixed older version is honoured; one the peer doesn't serve is refused locally.
    old = await channel.send(NODE, metadata(), api_version=1)
    assert type(old).__version__ == 1
    with pytest.raises(errors.UnsupportedVersion):
        await channel.send(NODE, outbound.Draft(52, {"topics": []}))  # Vote: not served
    assert await channel.connection(NODE, time.monotonic() + 5) is connection


async def test_metadata_lists_the_broker(
    channel: channel_module.TcpChannel, strom: StromProcess
) -> None:
    response = await channel.send(NODE, metadata())
    assert [(b.host, b.port) for b in response.brokers] == [("127.0.0.1", strom.port)]


async def test_produce_then_fetch_round_trip(
    channel: channel_module.TcpChannel, topic: str
) -> None:
    created = await channel.send(
        NODE,
        outbound.Draft(
            apis.ApiKey.CREATE_TOPICS,
            {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": 10_000,
                "validate_only": False,
            },
        ),
    )
    assert created.topics[0].error_code == ErrorCode.none
    topic_id: uuid.UUID = created.topics[0].topic_id
    sent = [(f"k{i}".encode(), f"value {i}".encode(), [], 1_700_000_000_000 + i) for i in range(5)]
    produced = await channel.send(
        NODE,
        outbound.Draft(
            apis.ApiKey.PRODUCE,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout": 10_000,
                "topic_data": [
                    {
                        "name": topic,
                        "topic_id": topic_id,
                        "partition_data": [{"index": 0, "records": batches.build_batch(sent)}],
                    }
                ],
            },
        ),
    )
    partition = produced.responses[0].partition_responses[0]
    assert (partition.error_code, partition.base_offset) == (ErrorCode.none, 0)

    fetched = await channel.send(
        NODE,
        wire_requests.fetch_from_start(topic, topic_id),
    )
    assert type(fetched).__version__ == apis.SUPPORTED_VERSIONS[apis.ApiKey.FETCH][1]
    data = fetched.responses[0].partitions[0]
    assert (data.error_code, data.high_watermark) == (ErrorCode.none, 5)
    got = [
        (r.offset, r.key, r.value, r.timestamp)
        for batch in batches.iter_batches(data.records)
        for r in batches.iter_records(data.records[batch.position : batch.position + batch.size])
    ]
    assert got == [(i, k, v, ts) for i, (k, v, _, ts) in enumerate(sent)]


async def test_concurrent_requests_are_pipelined_on_one_connection_and_matched(
    channel: channel_module.TcpChannel,
) -> None:
    await channel.send(NODE, metadata())
    connection = await channel.connection(NODE, time.monotonic() + 5)
    names = [f"no-such-topic-{i}" for i in range(200)]
    tasks = [asyncio.create_task(channel.send(NODE, metadata(name))) for name in names]
    await asyncio.sleep(0)  # one loop turn: every task has written its request by now
    assert connection.in_flight > 1
    responses = await asyncio.wait_for(asyncio.gather(*tasks), 30)
    for name, response in zip(names, responses, strict=True):
        assert [t.name for t in response.topics] == [name]
        assert response.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert await channel.connection(NODE, time.monotonic() + 5) is connection
    assert connection.in_flight == 0


async def test_nobody_listening_fails_with_disconnected_after_growing_back_off() -> None:
    channel = channel_to(free_port())
    try:
        started = time.monotonic()
        retry_afters = []
        gaps = []
        last_failure = None
        for _ in range(6):
            before = time.monotonic()
            with pytest.raises(errors.Disconnected) as failure:
                await channel.send(NODE, metadata(), timeout_s=5)
            if last_failure is not None:
                gaps.append(time.monotonic() - last_failure)
            assert time.monotonic() - before < 2  # bounded: never the 5 s deadline
            last_failure = time.monotonic()
            retry_afters.append(failure.value.retry_after_s)
        for attempt, retry_after in enumerate(retry_afters):
            expected = min(0.05 * 2**attempt, 0.4)
            assert 0.8 * expected - 0.05 <= retry_after <= min(1.2 * expected, 0.4), retry_afters
        for gap, retry_after in zip(gaps, retry_afters, strict=False):
            assert gap >= retry_after - 0.01  # each attempt waited out the back-off
        # A request whose deadline comes before the next attempt fails at once.
        before = time.monotonic()
        with pytest.raises(errors.Disconnected) as failure:
            await channel.send(NODE, metadata(), timeout_s=0.001)
        assert failure.value.retry_after_s > 0
        assert time.monotonic() - before < 0.2
        assert time.monotonic() - started < 5
        # An unknown node id is a Disconnected too, at once.
        with pytest.raises(errors.UnknownNode):
            await channel.send(NODE + 1, metadata())
    finally:
        await channel.close()


async def test_stopped_broker_times_out_then_a_fresh_connection_works(
    strom_factory: Callable[..., StromProcess],
) -> None:
    broker = strom_factory()
    broker.start()
    assert broker.proc is not None
    channel = channel_to(broker.port)
    try:
        await channel.send(NODE, metadata())
        first = await channel.connection(NODE, time.monotonic() + 5)
        os.kill(broker.proc.pid, signal.SIGSTOP)
        try:
            in_flight = [asyncio.create_task(channel.send(NODE, metadata(), timeout_s=30))]
            before = time.monotonic()
            with pytest.raises(errors.RequestTimeout):
                await channel.send(NODE, metadata(), timeout_s=1.0)
            assert 0.9 <= time.monotonic() - before < 5
            assert first.closed
            # The other request on the closed connection fails at once, not at its deadline.
            with pytest.raises(errors.Disconnected):
                await asyncio.wait_for(in_flight[0], 5)
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        response = await channel.send(NODE, metadata(), timeout_s=10)
        assert response.brokers
        second = await channel.connection(NODE, time.monotonic() + 5)
        assert second is not first and not second.closed
    finally:
        await channel.close()


async def test_killed_and_restarted_broker_is_reconnected(
    strom_factory: Callable[..., StromProcess],
) -> None:
    broker = strom_factory()
    broker.start()
    channel = channel_to(broker.port)
    try:
        await channel.send(NODE, metadata())
        first = await channel.connection(NODE, time.monotonic() + 5)
        broker.kill()
        with pytest.raises(errors.Disconnected):
            await channel.send(NODE, metadata(), timeout_s=5)
        await asyncio.to_thread(broker.start)
        deadline = time.monotonic() + 20
        while True:
            try:
                response = await channel.send(NODE, metadata(), timeout_s=5)
                break
            except errors.Disconnected as failure:
                assert time.monotonic() < deadline, f"never reconnected: {failure}"
                await asyncio.sleep(failure.retry_after_s)
        assert [b.port for b in response.brokers] == [broker.port]
        second = await channel.connection(NODE, time.monotonic() + 5)
        assert second is not first
        assert first.closed
    finally:
        await channel.close()


async def test_close_fails_outstanding_and_later_requests(strom: StromProcess) -> None:
    channel = channel_to(strom.port)
    await channel.send(NODE, metadata())
    outstanding = asyncio.create_task(channel.send(NODE, metadata()))
    await asyncio.sleep(0)  # the request is written
    await asyncio.wait_for(channel.close(), 5)
    with pytest.raises(errors.Disconnected):
        await asyncio.wait_for(outstanding, 5)
    with pytest.raises(errors.Disconnected):
        await channel.send(NODE, metadata())
