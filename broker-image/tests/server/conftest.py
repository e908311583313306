"""Fixtures of the server tests; their helpers are in broker_calls.py beside this file."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

SERVER_TESTS = Path(__file__).resolve().parent
if str(SERVER_TESTS) not in sys.path:
    sys.path.insert(0, str(SERVER_TESTS))

from broker_calls import create_topic, loaded  # noqa: E402
from strom.server import broker as broker_module  # noqa: E402


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[broker_module.Broker]:
    """A loaded broker with topic "orders" of 2 partitions."""
    server = await loaded(tmp_path, **{"num.partitions": "2"})
    await create_topic(server, "orders", 2)
    yield server
    server.close()
