"""A second broker on one machine finds metrics.listener's default port (9404) taken: it
serves /metrics on a free port and says so, instead of stopping. A port the user chose
that is taken stays an error naming metrics.listener."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any, cast

import pytest
from strom.server import http


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


async def test_a_taken_default_port_moves_with_a_warning(
    busy_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    server = http.HttpServer(cast(Any, None), "127.0.0.1", busy_port, port_may_move=True)
    with caplog.at_level(logging.WARNING):
        await server.start()
    try:
        assert server.bound_port not in (None, busy_port)
        [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert f"default port {busy_port} is in use" in warning
        assert f"http://127.0.0.1:{server.bound_port}" in warning
    finally:
        await server.stop()


async def test_a_taken_port_the_user_chose_is_an_error(busy_port: int) -> None:
    server = http.HttpServer(cast(Any, None), "127.0.0.1", busy_port)
    with pytest.raises(
        OSError, match=f"metrics.listener: cannot listen on http://127.0.0.1:{busy_port}"
    ):
        await server.start()
    await server.stop()
