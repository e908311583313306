"""The table of API keys and versions Strom serves, and the request/response codec.

Only what is implemented is advertised: clients pick the highest version both sides
support, so advertising an API we don't handle would break them. Message classes come
from kio (generated from Kafka's JSON specs); nothing here is written per version.
"""

from __future__ import annotations

import enum
import functools
import io
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from strom.protocol import guard, shaping


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75


# (min, max) per API served on a listener.
VersionTable = dict[ApiKey, tuple[int, int]]

# The client listeners' table: the versions kio has schemas for and our handlers serve.
SUPPORTED_VERSIONS: VersionTable = {
    ApiKey.PRODUCE: (3, 13),
    ApiKey.FETCH: (4, 17),
    ApiKey.LIST_OFFSETS: (1, 11),  # v11: -6 (earliest pending upload), -1 without tiering
    ApiKey.METADATA: (0, 13),
    ApiKey.OFFSET_COMMIT: (2, 9),  # v10 names topics by id
    ApiKey.OFFSET_FETCH: (1, 9),  # v10 names topics by id
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),  # kio has no v0-1 (Kafka 4 deprecates them)
    # Transactions. v4+ of AddPartitionsToTxn is the brokers' form (KIP-890 verification);
    # EndTxn v5 and TxnOffsetCommit v5 mean transaction.version 2, not advertised yet.
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),
    ApiKey.DESCRIBE_ACLS: (1, 3),  # the ACL APIs answer SECURITY_DISABLED: no authorizer
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),  # v5: is_cordoned, always false
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),  # v1: allow_replication_factor_change
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_QUORUM: (0, 2),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),  # v2: include_fenced_brokers, is_fenced
    ApiKey.LIST_CONFIG_RESOURCES: (0, 1),  # v0: ListClientMetricsResources
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
}

# Advertised only while group.coordinator.rebalance.protocols includes `consumer`.
CONSUMER_PROTOCOL_APIS = frozenset(
    {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}
)

# What a Kafka 4 controller answers on its controller listener, of what Strom serves there:
# the quorum's own RPCs (Fetch here is the Raft Fetch of `__cluster_metadata`, decoded by
# cluster/raft_wire.py, which reads every version kio has), the broker lifecycle RPCs and
# AlterPartition (a partition leader's ISR changes),
# DescribeQuorum and DescribeCluster (kafka-metadata-quorum.sh --bootstrap-controller and
# the Admin client's bootstrap-controller mode), and the admin APIs a broker forwards to
# the active controller. Those take every version the client listener takes, since a
# broker forwards a client's request unchanged.
CONTROLLER_VERSIONS: VersionTable = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.VOTE: (0, 2),
    ApiKey.BEGIN_QUORUM_EPOCH: (0, 1),
    ApiKey.END_QUORUM_EPOCH: (0, 1),
    ApiKey.FETCH: (4, 18),
    ApiKey.FETCH_SNAPSHOT: (0, 1),
    ApiKey.DESCRIBE_QUORUM: (0, 2),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.BROKER_REGISTRATION: (0, 4),
    ApiKey.BROKER_HEARTBEAT: (0, 1),
    ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
    ApiKey.ALTER_PARTITION: (2, 3),  # v2+ names topics by id, as Kafka 4's brokers send it
    ApiKey.CREATE_TOPICS: SUPPORTED_VERSIONS[ApiKey.CREATE_TOPICS],
    ApiKey.DELETE_TOPICS: SUPPORTED_VERSIONS[ApiKey.DELETE_TOPICS],
    ApiKey.CREATE_PARTITIONS: SUPPORTED_VERSIONS[ApiKey.CREATE_PARTITIONS],
    ApiKey.ALTER_CONFIGS: SUPPORTED_VERSIONS[ApiKey.ALTER_CONFIGS],
    ApiKey.INCREMENTAL_ALTER_CONFIGS: SUPPORTED_VERSIONS[ApiKey.INCREMENTAL_ALTER_CONFIGS],
    ApiKey.DESCRIBE_CONFIGS: SUPPORTED_VERSIONS[ApiKey.DESCRIBE_CONFIGS],
    ApiKey.ELECT_LEADERS: SUPPORTED_VERSIONS[ApiKey.ELECT_LEADERS],
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: SUPPORTED_VERSIONS[ApiKey.ALTER_PARTITION_REASSIGNMENTS],
    ApiKey.LIST_PARTITION_REASSIGNMENTS: SUPPORTED_VERSIONS[ApiKey.LIST_PARTITION_REASSIGNMENTS],
}

_SIZE = struct.Struct(">i")
_HEADER_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id


class ProtocolError(Exception):
    """The bytes cannot be a valid request: the connection is closed."""


class UnsupportedVersionError(ProtocolError):
    """A known API at a version we don't serve (not ApiVersions, which gets a reply)."""


class FileRegion(Protocol):
    """Bytes of a file sent as they are (zero-copy when the transport allows it)."""

    def __len__(self) -> int: ...


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class Request:
    header: RequestHeader
    body: Any  # the kio request object of header.api_version


def is_supported(
    api_key: int, api_version: int, versions: VersionTable = SUPPORTED_VERSIONS
) -> bool:
    try:
        low, high = versions[ApiKey(api_key)]
    except (ValueError, KeyError):
        return False
    return low <= api_version <= high


def peek_header(frame: memoryview) -> RequestHeader:
    """The fixed part of any request header, readable whatever the API and version."""
    if len(frame) < _HEADER_PREFIX.size:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(frame)
    return RequestHeader(api_key, api_version, correlation_id, None)


@functools.cache
def _request_codec(api_key: int, api_version: int) -> tuple[type[Any], type[Any], Any, Any]:
    schema = load_request_schema(api_key, api_version)
    header_schema = schema.__header_schema__
    return header_schema, schema, entity_reader(header_schema), entity_reader(schema)


def decode_request(frame: memoryview, versions: VersionTable = SUPPORTED_VERSIONS) -> Request:
    """Decode a whole request frame (without its size prefix) of an API in `versions`
    (the listener's table: SUPPORTED_VERSIONS or CONTROLLER_VERSIONS).

    Raises ProtocolError for anything that is not a well-formed supported request.
    """
    peeked = peek_header(frame)
    if not is_supported(peeked.api_key, peeked.api_version, versions):
        if peeked.api_key in versions:
            raise UnsupportedVersionError(
                f"{ApiKey(peeked.api_key).name} v{peeked.api_version} is not supported"
            )
        if peeked.api_key in ApiKey.__members__.values():
            # As Kafka: an API not enabled on this listener closes the connection.
            raise ProtocolError(f"{ApiKey(peeked.api_key).name} is not served on this listener")
        raise ProtocolError(f"unknown API key {peeked.api_key}")
    header_type, body_type, header_reader, body_reader = _request_codec(
        peeked.api_key, peeked.api_version
    )
    try:
        guard.check_request(frame, header_type, body_type)
    except guard.LengthError as error:
        raise ProtocolError(
            f"malformed {ApiKey(peeked.api_key).name} v{peeked.api_version}: {error}"
        ) from error
    try:
        header, header_size = header_reader(frame, 0)
        body, _ = body_reader(frame, header_size)
    except Exception as error:  # the native decoder raises several types on garbage
        raise ProtocolError(
            f"malformed {ApiKey(peeked.api_key).name} v{peeked.api_version}: {error}"
        ) from error
    # Bytes after the body are ignored, as Kafka's own parser does: librdkafka 2.x
    # sends Metadata v13 with a leftover field that Kafka brokers never notice.
    return Request(
        RequestHeader(peeked.api_key, peeked.api_version, peeked.correlation_id, header.client_id),
        body,
    )


def response_class(api_key: int, api_version: int) -> type[Any]:
    return load_response_schema(api_key, api_version)


def build_response(request: Request, fields: dict[str, Any]) -> Any:
    """The answer to `request`, at its version, from version-independent `fields` (see
    shaping), never throttled."""
    response_type = response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, **fields})


class _PartsWriter:
    """A kio Writable that keeps file regions apart from the encoded bytes around them."""

    def __init__(self) -> None:
        self.parts: list[bytes | FileRegion] = []
        self._pending = io.BytesIO()
        self.size = 0

    def write(self, data: Any) -> int:
        if isinstance(data, bytes | bytearray | memoryview):
            self._pending.write(data)
        else:
            self._flush_pending()
            self.parts.append(data)
        self.size += len(data)
        return len(data)

    def _flush_pending(self) -> None:
        if self._pending.tell():
            self.parts.append(self._pending.getvalue())
            self._pending = io.BytesIO()

    def finish(self) -> list[bytes | FileRegion]:
        self._flush_pending()
        return self.parts


_RESPONSE_WRITERS: dict[type[Any], tuple[Any, Any]] = {}


def _response_writers(response_type: type[Any]) -> tuple[Any, Any]:
    writers = _RESPONSE_WRITERS.get(response_type)
    if writers is None:
        header_type = response_type.__header_schema__
        writers = _RESPONSE_WRITERS[response_type] = (
            entity_writer(header_type),
            entity_writer(response_type),
        )
    return writers


def encode_response(correlation_id: int, response: Any) -> list[bytes | FileRegion]:
    """Encode a response with its header and size prefix, as parts to send in order.

    Record fields may hold FileRegion objects (anything with __len__ that isn't bytes);
    they come out as separate parts so the server can sendfile them.
    """
    header_writer, body_writer = _response_writers(type(response))
    header_type = type(response).__header_schema__
    writer = _PartsWriter()
    writer.write(_SIZE.pack(0))  # patched below once the size is known
    header_writer(writer, header_type(correlation_id=correlation_id))
    body_writer(writer, response)
    parts = writer.finish()
    first = parts[0]
    assert isinstance(first, bytes)
    parts[0] = _SIZE.pack(writer.size - _SIZE.size) + first[_SIZE.size :]
    return parts


def api_versions_entries(versions: VersionTable = SUPPORTED_VERSIONS) -> list[dict[str, int]]:
    return [
        {"api_key": int(key), "min_version": low, "max_version": high}
        for key, (low, high) in sorted(versions.items())
    ]


def unsupported_api_versions_response(
    correlation_id: int, versions: VersionTable = SUPPORTED_VERSIONS
) -> list[bytes | FileRegion]:
    """KIP-511: an ApiVersions request at a version we don't know gets error 35 in a v0
    body listing what we do support, so the client can retry at a version we serve."""
    v0 = load_response_schema(ApiKey.API_VERSIONS, 0)
    response = shaping.build(
        v0,
        {
            "error_code": ErrorCode.unsupported_version,
            "api_keys": api_versions_entries(versions),
            "throttle_time": 0,
        },
    )
    return encode_response(correlation_id, response)


def frame_size(prefix: bytes | memoryview) -> int:
    (size,) = _SIZE.unpack_from(prefix)
    return int(size)


def joined(parts: Iterable[bytes | FileRegion]) -> bytes:
    """Concatenate parts that are all bytes (tests and small responses)."""
    out = bytearray()
    for part in parts:
        if not isinstance(part, bytes):
            raise TypeError("a file region cannot be joined in memory")
        out += part
    return bytes(out)
