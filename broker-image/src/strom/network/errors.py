"""What a request through the channel can fail with: one hierarchy under NetworkError."""

from __future__ import annotations


class NetworkError(Exception):
    """A request to another node did not get an answer (or not a usable one)."""


class Disconnected(NetworkError):
    """No connection to the node, or it closed before the response arrived.

    `retry_after_s` is how long until the channel will try to connect again (0 if now).
    """

    def __init__(self, message: str, *, retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class UnknownNode(Disconnected):
    """The node id resolves to no address (not, or no longer, in the metadata)."""


class RequestTimeout(NetworkError):
    """No response within the request's deadline; the connection it was sent on is closed,
    since what the peer did with it is unknown."""


class BadResponse(NetworkError):
    """The peer sent bytes that are not the response to the request: the connection is closed."""


class UnsupportedVersion(NetworkError):
    """The peer supports no version of the API that we can send (or not the one asked for)."""
