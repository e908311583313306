"""The client direction of the codec: encode requests, decode responses, negotiate versions.

The broker is a client of other brokers (Raft, replica fetchers, forwarding). This module
is the mirror of `apis`' request decoding and response encoding, sans-I/O like the rest
of `protocol`: bytes in, kio objects out. The request header is v1 for a non-flexible API
version and v2 for a flexible one, and the response header v0 or v1 likewise, except that
an ApiVersions response always has header v0 (KIP-511) — kio's classes carry the right
header class for each, so nothing here is written per version.
"""

from __future__ import annotations

import functools
import importlib.metadata
import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer

from strom.protocol import apis, guard, shaping

_SIZE = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_CORRELATION = struct.Struct(">i")


class MalformedResponse(Exception):
    """The bytes cannot be the response to the request they answer."""


@dataclass(frozen=True, slots=True)
class Draft:
    """A request described once, independent of version: `shaping.build` gives it a class.

    `fields` is the union of the fields any version has (nested dicts and lists); the
    version chosen when it is sent keeps those its class declares.
    """

    api_key: int
    fields: Mapping[str, Any]

    def at(self, api_version: int) -> Any:
        return shaping.build(request_class(self.api_key, api_version), self.fields)


def request_class(api_key: int, api_version: int) -> type[Any]:
    return load_request_schema(api_key, api_version)


@functools.cache
def client_versions(api_key: int) -> tuple[int, int] | None:
    """The (min, max) versions of `api_key` we can encode (those kio has), or None."""
    name = api_key_map.get(api_key)
    if name is None:
        return None
    versions = sorted(schema_name_map[name])
    return versions[0], versions[-1]


def api_key_of(request: Any) -> int:
    return int(type(request).__api_key__)


def api_version_of(request: Any) -> int:
    return int(type(request).__version__)


_REQUEST_WRITERS: dict[type[Any], tuple[type[Any], Any, Any]] = {}


def _request_writers(request_type: type[Any]) -> tuple[type[Any], Any, Any]:
    writers = _REQUEST_WRITERS.get(request_type)
    if writers is None:
        header_type = request_type.__header_schema__
        writers = _REQUEST_WRITERS[request_type] = (
            header_type,
            entity_writer(header_type),
            entity_writer(request_type),
        )
    return writers


def encode_request(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """A whole request frame, size prefix included, for a kio request object.

    The API key and version are the object's class's; the header version follows from it.
    """
    request_type = type(request)
    header_type, header_writer, body_writer = _request_writers(request_type)
    buffer = io.BytesIO()
    buffer.write(_SIZE.pack(0))  # patched below once the size is known
    header_writer(
        buffer,
        header_type(
            request_api_key=request_type.__api_key__,
            request_api_version=request_type.__version__,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )
    body_writer(buffer, request)
    view = buffer.getbuffer()
    _SIZE.pack_into(view, 0, len(view) - _SIZE.size)
    del view
    return buffer.getvalue()


def response_correlation_id(frame: bytes | memoryview) -> int:
    """The correlation id every response header starts with, whatever its version."""
    if len(frame) < _CORRELATION.size:
        raise MalformedResponse(f"response of {len(frame)} bytes is shorter than a header")
    (correlation_id,) = _CORRELATION.unpack_from(frame)
    return int(correlation_id)


@functools.cache
def _response_codec(api_key: int, api_version: int) -> tuple[type[Any], type[Any], Any, Any]:
    schema = load_response_schema(api_key, api_version)
    header_schema = schema.__header_schema__
    return header_schema, schema, entity_reader(header_schema), entity_reader(schema)


def decode_response(frame: bytes | memoryview, api_key: int, api_version: int) -> tuple[int, Any]:
    """Decode a whole response frame (without its size prefix) to (correlation id, body).

    The caller knows the API and version from the request it sent. An ApiVersions
    request at a version the peer does not know is answered with error 35 in a v0 body
    (KIP-511); that body is decoded as v0, as Kafka's clients do.
    """
    view = memoryview(frame)
    if api_key == apis.ApiKey.API_VERSIONS and api_version > 0 and _is_kip511_fallback(view):
        api_version = 0
    header_type, body_type, header_reader, body_reader = _response_codec(api_key, api_version)
    name = api_key_map.get(api_key, str(api_key))
    try:
        end = guard.skip_entity(view, 0, len(view), header_type)
        guard.skip_entity(view, end, len(view), body_type)
    except guard.LengthError as error:
        raise MalformedResponse(f"malformed {name} v{api_version} response: {error}") from error
    try:
        header, header_size = header_reader(view, 0)
        body, _ = body_reader(view, header_size)
    except Exception as error:  # the native decoder raises several types on garbage
        raise MalformedResponse(f"malformed {name} v{api_version} response: {error}") from error
    return int(header.correlation_id), body


def _is_kip511_fallback(view: memoryview) -> bool:
    # Header v0 is the correlation id alone; every ApiVersions body starts with error_code.
    if len(view) < _CORRELATION.size + _INT16.size:
        return False
    (error_code,) = _INT16.unpack_from(view, _CORRELATION.size)
    return bool(error_code == ErrorCode.unsupported_version.value)


def peer_versions(response: Any) -> dict[int, tuple[int, int]]:
    """The (min, max) version per API key that a peer's ApiVersions response lists."""
    return {
        int(entry.api_key): (int(entry.min_version), int(entry.max_version))
        for entry in response.api_keys
    }


def highest_common_version(
    api_key: int,
    peer: Mapping[int, tuple[int, int]],
    ours: Mapping[int, tuple[int, int]] | None = None,
) -> int | None:
    """The highest version of `api_key` both sides support, or None if there is none.

    `ours` defaults to every version we can encode (`client_versions`).
    """
    theirs = peer.get(api_key)
    mine = client_versions(api_key) if ours is None else ours.get(api_key)
    if theirs is None or mine is None:
        return None
    low = max(theirs[0], mine[0])
    high = min(theirs[1], mine[1])
    return high if low <= high else None


def negotiate(
    peer: Mapping[int, tuple[int, int]], ours: Mapping[int, tuple[int, int]] | None = None
) -> dict[int, int]:
    """The highest common version of every API both sides know (APIs without one left out)."""
    keys = peer.keys() if ours is None else peer.keys() & ours.keys()
    chosen = {}
    for api_key in keys:
        version = highest_common_version(api_key, peer, ours)
        if version is not None:
            chosen[api_key] = version
    return chosen


def api_versions_request(api_version: int = 4) -> Any:
    """The ApiVersions request a Strom broker opens its connections to peers with."""
    return shaping.build(
        request_class(apis.ApiKey.API_VERSIONS, api_version),
        {"client_software_name": "strom", "client_software_version": _software_version()},
    )


@functools.cache
def _software_version() -> str:
    try:
        return importlib.metadata.version("strom")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree
        return "0"
