"""The HTTP side: /metrics for Prometheus, /healthz (the process serves) and /readyz
(logs recovered and listeners open) for Kubernetes probes."""

from __future__ import annotations

import errno
import logging
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from strom.server.broker import Broker

log = logging.getLogger(__name__)


class HttpServer:
    def __init__(
        self, broker: Broker, host: str, port: int, *, port_may_move: bool = False
    ) -> None:
        """`port_may_move`: the port is metrics.listener's default, so when it is taken the
        endpoint moves to a free port with a warning instead of stopping the broker."""
        self._broker = broker
        self._host = host
        self._port = port
        self._port_may_move = port_may_move
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host or None, self._port, reuse_address=True)
        try:
            await site.start()
        except OSError as error:
            if not (self._port_may_move and error.errno == errno.EADDRINUSE):
                raise OSError(
                    f"metrics.listener: cannot listen on http://{self._host}:{self._port}: "
                    f"{error.strerror or error}"
                ) from error
            # The default port taken, most likely by another broker on this machine: a
            # second broker must still start (Kafka has no such port to collide on).
            site = web.TCPSite(self._runner, self._host or None, 0, reuse_address=True)
            await site.start()
            moved = True
        else:
            moved = False
        server = site._server  # aiohttp keeps the asyncio server private
        sockets = getattr(server, "sockets", None)
        if sockets:
            self.bound_port = sockets[0].getsockname()[1]
        if moved:
            log.warning(
                "metrics.listener: the default port %d is in use (another broker on this"
                " machine?); serving /metrics, /healthz and /readyz on http://%s:%s instead."
                " Set metrics.listener to choose the port",
                self._port,
                self._host,
                self.bound_port,
            )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self._broker.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self._broker.ready:
            return web.Response(text="ready\n")
        return web.Response(status=503, text="starting\n")
