"""How a handler says that Kafka's answer is to close the connection (no response)."""

from __future__ import annotations


class CloseConnection(Exception):
    """Raised by a handler when Kafka's answer to a request is to close the connection."""
