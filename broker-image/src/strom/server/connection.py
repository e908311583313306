"""One client connection: frames in, requests handled strictly in order, responses out.

Kafka processes a connection's requests one at a time and answers in order (clients
match responses by correlation id but expect ordering), so a connection has one worker
task draining a queue of frames. Flow control is its own object (server/flow_control.py):
reading pauses while too many frames wait or while the broker-wide request memory
(queued.max.request.bytes) is used up, and writing waits while the transport's buffer is
above its high-water mark. A request's whole size is reserved from that memory when its
size prefix arrives and given back once it has been answered.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from strom.protocol import apis, framing, regions
from strom.server import closing, flow_control
from strom.server import metrics as broker_metrics

log = logging.getLogger(__name__)

# Frames queued per connection before we stop reading from the socket.
MAX_QUEUED_FRAMES = 64
# Below this a file range is read and written with the surrounding bytes: a sendfile
# call has to wait for the transport buffer to drain, which costs more than a copy.
SENDFILE_MIN_BYTES = 64 * 1024


class ShortRead(Exception):
    """A file range shrank under us (truncation): the frame can't be completed."""


class PeerGone(Exception):
    """The client closed or reset the connection while we were sending to it."""


class KafkaConnection(asyncio.Protocol):
    _flow: flow_control.FlowControl  # from connection_made on

    def __init__(
        self,
        dispatch: Callable[[apis.Request, str], Awaitable[Any | None]],
        max_request_bytes: int,
        metrics: broker_metrics.BrokerMetrics,
        on_close: Callable[[KafkaConnection], None],
        request_memory: flow_control.RequestMemory | None = None,
        *,
        listener: str,
        versions: apis.VersionTable = apis.SUPPORTED_VERSIONS,
    ) -> None:
        self._dispatch = dispatch
        self._listener = listener  # its name, for the request metrics
        self._versions = versions  # the listener's table: what this connection decodes
        self._frames = framing.FrameBuffer(max_request_bytes)
        self._metrics = metrics
        self._on_close = on_close
        self._memory = request_memory or flow_control.RequestMemory(-1)
        self._queue: collections.deque[bytes] = collections.deque()
        self._queue_changed = asyncio.Event()
        self._transport: asyncio.Transport | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        # Request memory: reserved for the frame being read (None: not yet reserved), and
        # held in all (that frame, queued frames, the frame being handled).
        self._reserved: int | None = None
        self._held = 0
        self.peer = "?"
        self.peer_host = ""

    # asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._flow = flow_control.FlowControl(transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.peer_host = f"/{peer[0]}" if peer else ""  # Kafka shows client hosts as /ip
        self._metrics.connections.inc()
        self._worker = asyncio.get_running_loop().create_task(self._work())

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._frames.feed(data)
        self._read_frames()

    def _read_frames(self) -> None:
        try:
            while True:
                if self._reserved is None:
                    size = self._frames.next_size()
                    if size is None:
                        break
                    if not self._memory.try_reserve(size):
                        self._flow.pause_reading(flow_control.NO_MEMORY)
                        self._memory.wait(
                            self, size, functools.partial(self._memory_reserved, size)
                        )
                        break
                    self._reserved = size
                    self._held += size
                frame = self._frames.next_frame()
                if frame is None:
                    break
                self._queue.append(frame)
                self._reserved = None
        except framing.FrameSizeError as error:
            self._fail("frame_size", str(error))
            return
        if self._queue:
            self._queue_changed.set()
        if len(self._queue) >= MAX_QUEUED_FRAMES:
            self._flow.pause_reading(flow_control.TOO_MANY_QUEUED)

    def _memory_reserved(self, size: int) -> None:
        # Called by another connection giving memory back: our next request fits now.
        self._reserved = size
        self._held += size
        if self._closing:
            return
        self._flow.resume_reading(flow_control.NO_MEMORY)
        self._read_frames()  # it may have arrived whole already

    def _release(self, size: int) -> None:
        size = min(size, self._held)
        if size:
            self._held -= size
            self._memory.release(size)

    def eof_received(self) -> bool | None:
        # A client that closes its side is gone (Kafka clients never half-close). Requests
        # it had queued behind a long poll are dropped, not run: Kafka reads one request
        # at a time per connection and would never have read them. Running them anyway
        # had side effects, e.g. a closing consumer's last Metadata re-creating a topic
        # deleted meanwhile. Returning False closes the transport: connection_lost follows.
        self._closing = True
        self._queue.clear()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._transport = None
        self._flow.resume_writing()
        self._queue_changed.set()
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
        self._memory.cancel(self)
        self._release(self._held)
        self._metrics.connections.dec()
        self._on_close(self)

    def pause_writing(self) -> None:
        self._flow.pause_writing()

    def resume_writing(self) -> None:
        self._flow.resume_writing()

    # Worker --------------------------------------------------------------------------

    async def _work(self) -> None:
        try:
            while True:
                while not self._queue:
                    if self._closing:
                        self._close_transport()
                        return
                    self._queue_changed.clear()
                    await self._queue_changed.wait()
                frame = self._queue.popleft()
                if len(self._queue) < MAX_QUEUED_FRAMES // 2:
                    self._flow.resume_reading(flow_control.TOO_MANY_QUEUED)
                try:
                    if not await self._handle_frame(frame):
                        return
                finally:
                    self._release(len(frame))
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug must cost one connection, never the broker
            log.exception("connection %s failed", self.peer)
            self._close_transport()

    async def _handle_frame(self, frame: bytes) -> bool:
        started = time.perf_counter()
        view = memoryview(frame)
        try:
            request = apis.decode_request(view, self._versions)
        except apis.UnsupportedVersionError as error:
            header = apis.peek_header(view)
            if header.api_key == apis.ApiKey.API_VERSIONS:
                await self._send(
                    apis.unsupported_api_versions_response(header.correlation_id, self._versions)
                )
                return True
            self._fail("unsupported_version", str(error))
            return False
        except apis.ProtocolError as error:
            self._fail("malformed", str(error))
            return False
        api_name = apis.ApiKey(request.header.api_key).name
        try:
            response = await self._dispatch(request, self.peer_host)
        except closing.CloseConnection as error:
            self._fail("closed_by_handler", str(error))
            return False
        self._metrics.requests.labels(
            api_name, str(request.header.api_version), self._listener
        ).inc()
        if response is not None:
            parts = apis.encode_response(request.header.correlation_id, response)
            try:
                await self._send(parts)
            except ShortRead as error:
                self._fail("short_read", str(error))
                return False
            except PeerGone as error:
                # A client may close whenever it likes (a consumer shutting down mid-fetch).
                log.debug("connection from %s closed while sending: %s", self.peer, error)
                self._closing = True
                self._queue.clear()
                self._close_transport()
                return False
        self._metrics.request_latency.labels(api_name, self._listener).observe(
            time.perf_counter() - started
        )
        return True

    async def _send(self, parts: list[bytes | apis.FileRegion]) -> None:
        transport = self._transport
        if transport is None:
            return
        await self._flow.can_write.wait()
        loop = asyncio.get_running_loop()
        pending = bytearray()
        for part in parts:
            if isinstance(part, bytes):
                pending += part
                continue
            assert isinstance(part, regions.RecordRegions)
            self._metrics.bytes_out.labels(part.topic).inc(part.size)
            for file_range in part.ranges:
                # Held for the whole read or send: storage's handle cache may evict (and
                # later close) a file nobody holds.
                file = file_range.file
                if file_range.length < SENDFILE_MIN_BYTES or not _can_sendfile(transport):
                    data = os.pread(file.fileno(), file_range.length, file_range.position)
                    if len(data) != file_range.length:
                        raise ShortRead(f"{len(data)} of {file_range.length} bytes read")
                    pending += data
                    self._metrics.fetch_bytes_sent.labels("copy").inc(file_range.length)
                    continue
                if pending:
                    transport.write(pending)
                    pending = bytearray()
                try:
                    sent = await loop.sendfile(
                        transport, file, file_range.position, file_range.length
                    )
                except (ConnectionError, RuntimeError) as error:
                    # RuntimeError("Transport is closing") when the peer went first.
                    if isinstance(error, RuntimeError) and not transport.is_closing():
                        raise
                    raise PeerGone(str(error) or type(error).__name__) from error
                if sent != file_range.length:
                    raise ShortRead(f"{sent} of {file_range.length} bytes sent")
                self._metrics.fetch_bytes_sent.labels("sendfile").inc(sent)
                if self._transport is None:
                    return
        if pending:
            transport.write(pending)

    def _fail(self, reason: str, message: str) -> None:
        log.warning("closing connection from %s: %s", self.peer, message)
        self._metrics.protocol_errors.labels(reason).inc()
        self._closing = True
        self._queue.clear()
        self._close_transport()

    def _close_transport(self) -> None:
        if self._transport is not None:
            self._transport.close()

    # Shutdown ------------------------------------------------------------------------

    async def drain_and_close(self) -> None:
        """Graceful shutdown: answer the requests already read, then close."""
        self._closing = True
        if self._transport is not None:
            self._flow.pause_reading("closing")
        self._queue_changed.set()
        if self._worker is not None:
            await asyncio.wait([self._worker], timeout=5)
            if not self._worker.done():
                self._worker.cancel()
        self._close_transport()


def _can_sendfile(transport: asyncio.Transport) -> bool:
    # TLS transports can't hand the kernel a file; only plain sockets can.
    return transport.get_extra_info("sslcontext") is None and (
        transport.get_extra_info("socket") is not None
    )
