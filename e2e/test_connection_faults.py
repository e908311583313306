"""Faults at the connection level against a real broker: requests with null arrays where
the schema has none, clients that vanish in the middle of a large response, and many
large requests at once. Each costs at most the offending connection, never a traceback,
and the broker keeps serving everyone else."""

from __future__ import annotations

import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import waiting
from kio.index import load_request_schema
from strom.protocol import outbound
from strom.records import batches
from strom_process import StromProcess

LARGE_VALUE_BYTES = 900_000  # under message.max.bytes; one batch is a sendfile range


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromProcess]:
    process = StromProcess(tmp_path_factory.mktemp("strom-faults"))
    process.start()
    try:
        yield process
    finally:
        process.stop()


def encode(api_key: int, version: int, body: dict[str, Any], correlation_id: int = 1) -> bytes:
    """A request frame with its size prefix."""
    return outbound.encode_request(
        outbound.Draft(api_key, body).at(version), correlation_id, "faults"
    )


def exchange(broker: StromProcess, frame: bytes) -> bytes:
    """Send one frame and read one whole response frame (b"" if the broker closed)."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as connection:
        connection.sendall(frame)
        prefix = connection.recv(4, socket.MSG_WAITALL)
        if len(prefix) < 4:
            return b""
        (size,) = struct.unpack(">i", prefix)
        return connection.recv(size, socket.MSG_WAITALL)


def api_versions_answers(broker: StromProcess) -> bool:
    body = {"client_software_name": "faults", "client_software_version": "1"}
    return len(exchange(broker, encode(18, 3, body, correlation_id=99))) > 0


def assert_no_traceback(broker: StromProcess, since: int) -> None:
    log = broker.log_tail(1 << 20)[since:] if since else broker.log_tail(1 << 20)
    assert "Traceback" not in log, log
    assert " ERROR " not in log, log


def open_connections(broker: StromProcess) -> float:
    """strom_connections from the broker's /metrics."""
    with urllib.request.urlopen(f"{broker.metrics_url}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("strom_connections "):
                return float(line.split()[1])
    raise AssertionError("no strom_connections in /metrics")


def log_size(broker: StromProcess) -> int:
    return len(broker.log_tail(1 << 20))


# --- 1. null arrays where the schema's array is not nullable -------------------------


def _with_null_array(
    api_key: int, version: int, body: dict[str, Any], field: str, element: Any
) -> bytes:
    """`body` encoded with `field` as a null array, which kio's writer refuses to do:
    encode it empty and with one element, and null the count where the two differ
    (after the size prefix)."""
    empty = encode(api_key, version, {**body, field: []})
    one = encode(api_key, version, {**body, field: [element]})
    # The size prefix differs too: compare what follows it.
    first_difference = next(i for i in range(4, len(empty)) if empty[i] != one[i])
    frame = bytearray(empty)
    if load_request_schema(api_key, version).__flexible__:
        assert frame[first_difference] == 1  # compact array: count + 1, 0 is null
        frame[first_difference] = 0
    else:
        start = first_difference - 3  # the low byte of an int32 count differs
        assert frame[start : start + 4] == b"\0\0\0\0"
        frame[start : start + 4] = b"\xff\xff\xff\xff"
    return bytes(frame)


NULL_ARRAY_CASES = {
    "produce": (
        0,
        9,
        {"transactional_id": None, "acks": 1, "timeout": 1000},
        "topic_data",
        {"name": "t", "partition_data": []},
    ),
    "list-offsets": (
        2,
        5,
        {"replica_id": -1, "isolation_level": 0},
        "topics",
        {"name": "t", "partitions": []},
    ),
    "offset-commit": (
        8,
        8,
        {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": ""},
        "topics",
        {"name": "t", "partitions": []},
    ),
    "sync-group": (
        14,
        5,
        {
            "group_id": "g",
            "generation_id": 1,
            "member_id": "m",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
        },
        "assignments",
        {"member_id": "m", "assignment": b""},
    ),
    "describe-configs": (
        32,
        4,
        {"include_synonyms": False, "include_documentation": False},
        "resources",
        {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
    ),
    "create-partitions": (
        37,
        3,
        {"timeout": 1000, "validate_only": False},
        "topics",
        {"name": "t", "count": 2, "assignments": None},
    ),
    "offset-fetch": (9, 1, {"group_id": "g"}, "topics", {"name": "t", "partition_indexes": []}),
}


@pytest.mark.parametrize("case", list(NULL_ARRAY_CASES))
def test_a_null_array_closes_the_connection_without_a_traceback(
    broker: StromProcess, case: str
) -> None:
    api_key, version, body, field, element = NULL_ARRAY_CASES[case]
    since = log_size(broker)
    frame = _with_null_array(api_key, version, body, field, element)
    assert exchange(broker, frame) == b""
    assert api_versions_answers(broker)
    assert_no_traceback(broker, since)
    assert f"{field} was null" in broker.log_tail(1 << 20)[since:]


def test_nullable_arrays_still_work(broker: StromProcess) -> None:
    flags = {"allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    assert exchange(broker, encode(3, 1, {"topics": None, **flags}))  # all topics
    assert exchange(broker, encode(9, 2, {"group_id": "g", "topics": None}))  # all offsets


# --- 2. a client that goes away in the middle of a sendfile --------------------------


def _produce_large(broker: StromProcess, topic: str, count: int) -> None:
    create = {
        "topics": [
            {
                "name": topic,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout_ms": 10_000,
        "validate_only": False,
    }
    assert exchange(broker, encode(19, 7, create))
    for index in range(count):
        batch = batches.build_batch(
            [(b"k", bytes([65 + index % 26]) * LARGE_VALUE_BYTES, [], 1_700_000_000_000)]
        )
        produce = {
            "transactional_id": None,
            "acks": 1,
            "timeout": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        }
        assert exchange(broker, encode(0, 9, produce, correlation_id=index))


def _fetch(topic: str, max_bytes: int) -> bytes:
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": max_bytes}
                ],
            }
        ],
    }
    return encode(1, 4, body)


def test_a_client_leaving_during_sendfile_is_not_an_error(broker: StromProcess, topic: str) -> None:
    _produce_large(broker, topic, count=8)  # ~7 MiB in one partition
    since = log_size(broker)
    for attempt in range(12):
        with socket.socket() as client:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            client.settimeout(10)
            client.connect(("127.0.0.1", broker.port))
            client.sendall(_fetch(topic, 50_000_000))
            assert client.recv(4096)  # the response has started
            if attempt % 3:
                time.sleep(0.05 * (attempt % 3))  # let the broker fill the socket buffer
            # An abortive close (RST): the broker's next send fails at once.
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # The broker has handled every reset once it holds no connection of ours any more.
    waiting.wait_until(
        lambda: open_connections(broker) == 0, 30, "the broker still holds the reset connections"
    )
    assert api_versions_answers(broker)
    assert_no_traceback(broker, since)


# --- 4. many large requests at once: queued.max.request.bytes bounds the memory --------

LARGE_REQUEST_BYTES = 16 << 20
LARGE_CLIENTS = 24  # 384 MiB of requests in flight at once without a bound


def _memory_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_many_large_requests_at_once_keep_the_broker_memory_bounded(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    process = StromProcess(
        tmp_path_factory.mktemp("strom-memory"),
        overrides={
            "socket.request.max.bytes": str(LARGE_REQUEST_BYTES + (1 << 20)),
            "queued.max.request.bytes": str(LARGE_REQUEST_BYTES),
        },
    )
    process.start()
    try:
        assert process.proc is not None
        pid = process.proc.pid
        batch = batches.build_batch([(b"k", b"m" * LARGE_REQUEST_BYTES, [], 1_700_000_000_000)])
        produce = {
            "transactional_id": None,
            "acks": 1,
            "timeout": 10_000,
            "topic_data": [{"name": "memory", "partition_data": [{"index": 0, "records": batch}]}],
        }
        frame = encode(0, 9, produce)
        assert api_versions_answers(process)
        before_kib = _memory_kib(pid, "VmRSS")
        answered: list[int] = []
        failures: list[BaseException] = []

        def client() -> None:
            try:
                answered.append(len(exchange(process, frame)))
            except BaseException as error:  # reported by the main thread
                failures.append(error)

        threads = [threading.Thread(target=client) for _ in range(LARGE_CLIENTS)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 120
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(thread.is_alive() for thread in threads), "clients still waiting"
        assert not failures, failures
        assert len(answered) == LARGE_CLIENTS and all(answered), "every request was answered"
        peak_growth_mib = (_memory_kib(pid, "VmHWM") - before_kib) / 1024
        unbounded_mib = LARGE_CLIENTS * LARGE_REQUEST_BYTES / (1 << 20)
        # A handful of requests' worth of copies, far from all of them at once.
        assert peak_growth_mib < 160, (
            f"the broker grew by {peak_growth_mib:.0f} MiB ({unbounded_mib:.0f} MiB sent)"
        )
        assert_no_traceback(process, 0)
    finally:
        process.stop()
