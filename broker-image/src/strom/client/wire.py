"""Kafka requests sent by hand, for the admin calls librdkafka does not offer.

confluent-kafka has no AlterPartitionReassignments, ListPartitionReassignments,
DescribeLogDirs, DescribeQuorum or OffsetDelete, and cannot name the cluster-wide broker
default resource ("") in DescribeConfigs/IncrementalAlterConfigs. Those go over a plain
connection of their own: one ApiVersions exchange to check that the broker serves the
request at the version we send, then the request itself. Message classes come from kio,
as in the broker, but nothing here imports the broker's packages.

The exchange is sans-I/O (`_conversation` yields frames to send and receives the frames
read back); `request` runs it over a blocking socket, `request_async` over asyncio
streams. PLAINTEXT only: TLS and SASL connections are librdkafka's job, so these calls
refuse any other `security.protocol` (see `check_security`).
"""

from __future__ import annotations

import asyncio
import io
import socket
import struct
import time
from collections.abc import Generator, Sequence
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from strom.client import errors

CLIENT_ID = "strom-client"
_SIZE = struct.Struct(">i")
_MAX_FRAME = 256 * 1024 * 1024

# Frames to send out, frames read back in; the result is the decoded response.
_Conversation = Generator[bytes, bytes, Any]


def check_security(security_protocol: str) -> None:
    if security_protocol.lower() != "plaintext":
        raise errors.ConfigurationError(
            f"security.protocol={security_protocol} is not supported by this call: "
            "strom.client sends it without librdkafka, over PLAINTEXT only"
        )


def split_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """'h1:9092,h2:9093' -> [('h1', 9092), ('h2', 9093)] (a leading PLAINTEXT:// is dropped)."""
    out = []
    for item in bootstrap.split(","):
        text = item.strip().rpartition("://")[2]
        host, _, port = text.rpartition(":")
        if not host or not port.isdigit():
            raise errors.ConfigurationError(f"bootstrap server {item.strip()!r} is not HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    return out


def encode(request: Any, correlation_id: int) -> bytes:
    """A request frame with its size prefix and header (kio picks the header version)."""
    header_type = request.__header_schema__
    header = header_type(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=i32(correlation_id),
        client_id=CLIENT_ID,
    )
    buffer = io.BytesIO()
    buffer.write(_SIZE.pack(0))
    entity_writer(header_type)(buffer, header)
    entity_writer(type(request))(buffer, request)
    data = bytearray(buffer.getvalue())
    _SIZE.pack_into(data, 0, len(data) - _SIZE.size)
    return bytes(data)


def decode(frame: bytes, response_type: type[Any], correlation_id: int) -> Any:
    """A response frame (without its size prefix) as a kio object of `response_type`."""
    view = memoryview(frame)
    header, header_size = entity_reader(response_type.__header_schema__)(view, 0)
    if header.correlation_id != correlation_id:
        raise errors.ClientError(
            f"the broker answered correlation id {header.correlation_id}, not {correlation_id}"
        )
    body, _ = entity_reader(response_type)(view, header_size)
    return body


def _conversation(request: Any, response_type: type[Any], address: str) -> _Conversation:
    versions_frame = yield encode(
        ApiVersionsRequest(client_software_name=CLIENT_ID, client_software_version="1"), 0
    )
    versions = decode(versions_frame, ApiVersionsResponse, 0)
    if versions.error_code != ErrorCode.none:
        raise errors.ClientError(
            f"the broker at {address} refused ApiVersions v3: {error_name(versions.error_code)}"
        )
    key, version = int(request.__api_key__), int(request.__version__)
    name = type(request).__name__.removesuffix("Request")
    served = {
        int(api.api_key): (int(api.min_version), int(api.max_version)) for api in versions.api_keys
    }
    if key not in served:
        raise errors.UnsupportedError(
            f"the broker at {address} does not support {name} (API key {key})"
        )
    low, high = served[key]
    if not low <= version <= high:
        raise errors.UnsupportedError(
            f"the broker at {address} serves {name} v{low}-v{high}, this client sends v{version}"
        )
    frame = yield encode(request, 1)
    return decode(frame, response_type, 1)


def error_name(code: ErrorCode | int) -> str:
    """Kafka's printed name of an error code, e.g. NO_REASSIGNMENT_IN_PROGRESS."""
    try:
        return ErrorCode(i16(code)).name.upper()
    except ValueError:
        return f"error code {int(code)}"


def request(
    addresses: Sequence[tuple[str, int]],
    request: Any,
    response_type: type[Any],
    *,
    timeout: float,
    what: str,
) -> Any:
    """Send `request` to the first of `addresses` that accepts a connection; its response."""
    deadline = time.monotonic() + timeout
    sock, address = _connect(addresses, timeout, what)
    with sock:
        talk = _conversation(request, response_type, address)
        try:
            out = next(talk)
            while True:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                sock.sendall(out)
                out = talk.send(_read_frame(sock, address, what))
        except StopIteration as done:
            return done.value
        except TimeoutError:
            raise errors.ClientError(f"timed out after {timeout:g}s waiting for {what}") from None
        except OSError as e:
            raise errors.ClientError(f"{what}: connection to {address} failed: {e}") from None


async def request_async(
    addresses: Sequence[tuple[str, int]],
    request: Any,
    response_type: type[Any],
    *,
    timeout: float,
    what: str,
) -> Any:
    """`request`, over asyncio streams."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer, address = await _connect_async(addresses, what)
            try:
                talk = _conversation(request, response_type, address)
                try:
                    out = next(talk)
                    while True:
                        writer.write(out)
                        await writer.drain()
                        out = talk.send(await _read_frame_async(reader, address, what))
                except StopIteration as done:
                    return done.value
            finally:
                writer.close()
    except TimeoutError:
        raise errors.ClientError(f"timed out after {timeout:g}s waiting for {what}") from None
    except OSError as e:
        raise errors.ClientError(f"{what}: {e}") from None


def _connect(
    addresses: Sequence[tuple[str, int]], timeout: float, what: str
) -> tuple[socket.socket, str]:
    problems = []
    for host, port in addresses:
        try:
            return socket.create_connection((host, port), timeout=timeout), f"{host}:{port}"
        except OSError as e:
            problems.append(f"{host}:{port}: {e.strerror or e}")
    raise errors.ConnectError(f"cannot connect for {what}: " + "; ".join(problems))


async def _connect_async(
    addresses: Sequence[tuple[str, int]], what: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
    problems = []
    for host, port in addresses:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as e:
            problems.append(f"{host}:{port}: {e.strerror or e}")
        else:
            return reader, writer, f"{host}:{port}"
    raise errors.ConnectError(f"cannot connect for {what}: " + "; ".join(problems))


def _frame_size(prefix: bytes, address: str, what: str) -> int:
    if len(prefix) < _SIZE.size:
        raise errors.ClientError(f"the broker at {address} closed the connection during {what}")
    (size,) = _SIZE.unpack(prefix)
    if not 0 <= size <= _MAX_FRAME:
        raise errors.ClientError(f"the broker at {address} sent a frame of {size} bytes")
    return int(size)


def _read_frame(sock: socket.socket, address: str, what: str) -> bytes:
    size = _frame_size(_read_exactly(sock, _SIZE.size), address, what)
    body = _read_exactly(sock, size)
    if len(body) < size:
        _frame_size(b"", address, what)
    return body


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = []
    left = size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


async def _read_frame_async(reader: asyncio.StreamReader, address: str, what: str) -> bytes:
    try:
        prefix = await reader.readexactly(_SIZE.size)
        return await reader.readexactly(_frame_size(prefix, address, what))
    except asyncio.IncompleteReadError:
        _frame_size(b"", address, what)
        raise
