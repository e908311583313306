"""Noticing, from librdkafka's error callbacks, that the bootstrap servers cannot be reached.

librdkafka retries connections forever and reports trouble only through `error_cb`
(served on poll). A tool should instead stop at once with the reason when none of the
bootstrap servers answers before anything succeeded; a `Watch` is that error callback,
and `Watch.check()` raises ConnectError then (or ClientError on a fatal error).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka

from strom.client import errors

POLL_INTERVAL_S = 0.05  # how often a pending wait serves librdkafka's callbacks

# Error codes that say why a broker connection failed.
_CONNECTION_PROBLEMS = frozenset(
    {
        confluent_kafka.KafkaError._TRANSPORT,
        confluent_kafka.KafkaError._RESOLVE,
        confluent_kafka.KafkaError._SSL,
        confluent_kafka.KafkaError._AUTHENTICATION,
        confluent_kafka.KafkaError.SASL_AUTHENTICATION_FAILED,
    }
)


class Watch:
    """librdkafka's `error_cb`: remembers the last connection problem and whether all
    brokers are down; `connected()` marks that something succeeded since."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.is_connected = False
        self.all_down = False
        self.problem: str | None = None
        self.fatal: confluent_kafka.KafkaError | None = None

    def __call__(self, error: confluent_kafka.KafkaError) -> None:
        code = error.code()
        if code in _CONNECTION_PROBLEMS:
            self.problem = _connection_problem(error.str())
            if code in (
                confluent_kafka.KafkaError._AUTHENTICATION,
                confluent_kafka.KafkaError.SASL_AUTHENTICATION_FAILED,
            ):
                self.all_down = True  # retrying will not help
        elif code == confluent_kafka.KafkaError._ALL_BROKERS_DOWN:
            self.all_down = True
        if error.fatal():
            self.fatal = error

    def connected(self) -> None:
        self.is_connected = True
        self.all_down = False

    def check(self) -> None:
        """Raise if the client cannot get anywhere: a fatal error, or every bootstrap
        server down before the first success."""
        if self.fatal is not None:
            raise errors.ClientError(errors.describe(self.fatal))
        if self.all_down and not self.is_connected:
            servers = "server" if "," not in self.bootstrap else "servers"
            reason = f": {self.problem}" if self.problem else ""
            raise errors.ConnectError(
                f"cannot connect to bootstrap {servers} {self.bootstrap}{reason}"
            )


def wait(
    future: concurrent.futures.Future[Any],
    *,
    poll: Callable[[float], Any],
    watch: Watch,
    timeout: float,
    what: str,
) -> Any:
    """future.result(), serving callbacks (`poll`) while it is pending, so an unreachable
    bootstrap server ends the wait at once; ClientError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = future.result(timeout=POLL_INTERVAL_S)
        except concurrent.futures.TimeoutError:
            poll(0)
            watch.check()
            if time.monotonic() >= deadline:
                raise errors.ClientError(
                    f"timed out after {timeout:g}s waiting for {what}"
                ) from None
            continue
        watch.connected()
        return result


def _connection_problem(text: str) -> str:
    """'host:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused
    (after 0ms in state CONNECT)' -> 'Connect to ipv4#127.0.0.1:9092 failed: Connection
    refused'."""
    text = re.sub(r"^\S+/(?:bootstrap|\d+): ", "", text)
    return re.sub(r" \(after \d+ms in state \w+\)$", "", text).strip()


async def wait_async(
    future: concurrent.futures.Future[Any],
    *,
    poll: Callable[[float], Any],
    watch: Watch,
    timeout: float,
    what: str,
) -> Any:
    """`wait` for asyncio: the future is awaited through asyncio.wrap_future, and between
    short waits librdkafka's callbacks are served with a non-blocking poll(0), so the event
    loop never blocks. A wait given up (timeout, cancellation) cancels the future."""
    wrapped = asyncio.wrap_future(future)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while True:
            done, _ = await asyncio.wait({wrapped}, timeout=POLL_INTERVAL_S)
            if done:
                result = wrapped.result()
                watch.connected()
                return result
            poll(0)
            watch.check()
            if loop.time() >= deadline:
                raise errors.ClientError(f"timed out after {timeout:g}s waiting for {what}")
    finally:
        if not wrapped.done():
            wrapped.cancel()
