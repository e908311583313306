"""The Raft core's quorum messages to and from kio's Kafka messages: sans-I/O translation.

`strom.cluster.raft.messages` mirrors the single partition ``__cluster_metadata-0`` of
Kafka's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot; this module adds
what the wire has around it (cluster id, topic name or id, partition 0, endpoints,
directory ids) and takes it away again. The driver sends what ``request_to_kio`` gives
with ``strom.network`` and turns the kio response back with ``response_from_kio``; on the
controller listener it turns a decoded request into the core's with ``request_from_kio``
and the core's answer into kio with ``response_to_kio`` at the request's version.

Versions sent (``VERSIONS``), the highest kio has that Strom fills correctly:

- Vote v2 (KIP-996 pre-vote; directory ids null, no endpoints),
- BeginQuorumEpoch v1 and EndQuorumEpoch v1 (KIP-853; leader endpoints empty,
  directory ids null: Strom has a static voter set without directories),
- Fetch v18 (KIP-1166: the follower's high watermark; the topic by id, Kafka's
  ``METADATA_TOPIC_ID``; ``replica_state.replica_id`` the follower's node id),
- FetchSnapshot v1.

Decoding accepts every version kio has: a field that a version lacks takes the core's
default (Vote before v2 is no pre-vote; Fetch before v18 knows no high watermark).

Fetch records are Kafka record batches: one uncompressed batch per run of entries of one
epoch and kind, the epoch as the batch's partition leader epoch, the core's control
entries as control batches keyed LEADER_CHANGE (as `replicated_log` writes them). A
trailing batch cut short is dropped, as Kafka's readers do (a leader may cut its last
batch at max_bytes); entries before the fetch offset are left for the core to skip.

Anything that cannot be one of the core's messages raises `RaftWireError` (never anything
else): a peer's bytes must not crash the server. That includes requests no correct peer
sends (a negative fetch offset, a last fetched epoch above the leader epoch, ...: Kafka
answers those INVALID_REQUEST); the server answers them with ``error_response``. A
response whose top-level error is set (the request failed as a whole: inconsistent
cluster id, invalid request, ...) raises `TopLevelError`, which the driver treats as a
failed request. Checking the cluster id is the driver's (``body.cluster_id``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from strom.cluster.raft import log as raft_log
from strom.cluster.raft import messages
from strom.protocol import shaping
from strom.records import batches

VOTE = 52
BEGIN_QUORUM_EPOCH = 53
END_QUORUM_EPOCH = 54
FETCH = 1
FETCH_SNAPSHOT = 59

# The version each request is sent at (and so each response is read at).
VERSIONS: dict[int, int] = {
    VOTE: 2,
    BEGIN_QUORUM_EPOCH: 1,
    END_QUORUM_EPOCH: 1,
    FETCH: 18,
    FETCH_SNAPSHOT: 1,
}

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
# Kafka's Uuid.METADATA_TOPIC_ID: Uuid(0, 1), what Fetch v13+ names the metadata topic by.
METADATA_TOPIC_ID = uuid.UUID(int=1)
_ZERO_UUID = uuid.UUID(int=0)
# Kafka's control record key: version 0, type 2 (LEADER_CHANGE), as replicated_log writes.
LEADER_CHANGE_KEY = b"\x00\x00\x00\x02"
# Fetch v18's high watermark from a replica that does not send one.
_HIGH_WATERMARK_UNSUPPORTED = (1 << 63) - 1
_NO_FETCH_EPOCH = -1  # Fetch's diverging epoch and snapshot id when absent


_T = TypeVar("_T")


class RaftWireError(Exception):
    """A Kafka message that cannot be the quorum message it should be."""


class TopLevelError(RaftWireError):
    """A quorum response that failed as a whole: its top-level error code is set."""

    def __init__(self, api_key: int, error: ErrorCode) -> None:
        super().__init__(f"API {api_key} response with top-level error {error.name}")
        self.api_key = api_key
        self.error = error


# Core → kio ----------------------------------------------------------------------------


def api_key_of(message: messages.Message) -> int:
    """The Kafka API key of a core request or response."""
    for types, key in _API_KEYS:
        if isinstance(message, types):
            return key
    raise RaftWireError(f"not a quorum message: {message!r}")


_API_KEYS: tuple[tuple[tuple[type[Any], ...], int], ...] = (
    ((messages.VoteRequest, messages.VoteResponse), VOTE),
    ((messages.BeginQuorumEpochRequest, messages.BeginQuorumEpochResponse), BEGIN_QUORUM_EPOCH),
    ((messages.EndQuorumEpochRequest, messages.EndQuorumEpochResponse), END_QUORUM_EPOCH),
    ((messages.FetchRequest, messages.FetchResponse), FETCH),
    ((messages.FetchSnapshotRequest, messages.FetchSnapshotResponse), FETCH_SNAPSHOT),
)


def request_to_kio(
    request: messages.Request,
    *,
    cluster_id: str | None,
    version: int | None = None,
    directory_id: uuid.UUID | None = None,
) -> Any:
    """The kio request for ``request`` at ``version`` (by default ``VERSIONS``');
    ``directory_id`` is the sender's log directory id (Kafka's ReplicaDirectoryId, KIP-853),
    carried by Fetch and FetchSnapshot."""
    api_key = api_key_of(request)
    fields: dict[str, Any]
    if isinstance(request, messages.VoteRequest):
        fields = _vote_request(request)
    elif isinstance(request, messages.BeginQuorumEpochRequest):
        fields = _begin_quorum_epoch_request(request)
    elif isinstance(request, messages.EndQuorumEpochRequest):
        fields = _end_quorum_epoch_request(request)
    elif isinstance(request, messages.FetchRequest):
        fields = _fetch_request(request)
    else:
        fields = _fetch_snapshot_request(request)
    fields["cluster_id"] = cluster_id
    if directory_id is not None:
        for topic in fields.get("topics", ()):
            for partition in topic["partitions"]:
                if "replica_directory_id" in partition:
                    partition["replica_directory_id"] = directory_id
    chosen = VERSIONS[api_key] if version is None else version
    return shaping.build(load_request_schema(api_key, chosen), fields)


def _topics(name_key: str, partition: dict[str, Any]) -> list[dict[str, Any]]:
    return [{name_key: METADATA_TOPIC, "partitions": [partition]}]


def _vote_request(request: messages.VoteRequest) -> dict[str, Any]:
    return {
        "voter_id": request.voter_id,
        "topics": _topics(
            "topic_name",
            {
                "partition_index": METADATA_PARTITION,
                "replica_epoch": request.candidate_epoch,
                "replica_id": request.candidate_id,
                "replica_directory_id": None,
                "voter_directory_id": None,
                "last_offset_epoch": request.last_offset_epoch,
                "last_offset": request.last_offset,
                "pre_vote": request.pre_vote,
            },
        ),
    }


def _begin_quorum_epoch_request(request: messages.BeginQuorumEpochRequest) -> dict[str, Any]:
    return {
        "voter_id": request.voter_id,
        "topics": _topics(
            "topic_name",
            {
                "partition_index": METADATA_PARTITION,
                "voter_directory_id": None,
                "leader_id": request.leader_id,
                "leader_epoch": request.leader_epoch,
            },
        ),
        "leader_endpoints": [],
    }


def _end_quorum_epoch_request(request: messages.EndQuorumEpochRequest) -> dict[str, Any]:
    return {
        "topics": _topics(
            "topic_name",
            {
                "partition_index": METADATA_PARTITION,
                "leader_id": request.leader_id,
                "leader_epoch": request.leader_epoch,
                # v0 has the ids, v1 the ids with directories: build keeps the version's
                "preferred_successors": list(request.preferred_successors),
                "preferred_candidates": [
                    {"candidate_id": voter, "candidate_directory_id": None}
                    for voter in request.preferred_successors
                ],
            },
        ),
        "leader_endpoints": [],
    }


def _fetch_request(request: messages.FetchRequest) -> dict[str, Any]:
    return {
        "replica_id": request.replica_id,  # before v15
        "replica_state": {"replica_id": request.replica_id, "replica_epoch": -1},
        "max_wait": request.max_wait_ms,
        "min_bytes": 0,
        "max_bytes": request.max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": METADATA_TOPIC,  # before v13
                "topic_id": METADATA_TOPIC_ID,
                "partitions": [
                    {
                        "partition": METADATA_PARTITION,
                        "current_leader_epoch": request.current_leader_epoch,
                        "fetch_offset": request.fetch_offset,
                        "last_fetched_epoch": request.last_fetched_epoch,
                        "log_start_offset": request.log_start_offset,
                        "partition_max_bytes": request.max_bytes,
                        "replica_directory_id": None,
                        "high_watermark": request.high_watermark,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def _fetch_snapshot_request(request: messages.FetchSnapshotRequest) -> dict[str, Any]:
    return {
        "replica_id": request.replica_id,
        "max_bytes": request.max_bytes,
        "topics": _topics(
            "name",
            {
                "partition": METADATA_PARTITION,
                "current_leader_epoch": request.current_leader_epoch,
                "snapshot_id": {
                    "end_offset": request.snapshot_id.offset,
                    "epoch": request.snapshot_id.epoch,
                },
                "position": request.position,
                "replica_directory_id": None,
            },
        ),
    }


def response_to_kio(response: messages.Response, version: int) -> Any:
    """The kio response for ``response`` at ``version`` (the request's)."""
    api_key = api_key_of(response)
    leader = {"leader_id": response.leader_id, "leader_epoch": response.leader_epoch}
    fields: dict[str, Any] = {"error_code": ErrorCode.none, "throttle_time": 0}
    partition: dict[str, Any]
    if isinstance(response, messages.VoteResponse):
        partition = {"error_code": response.error, **leader, "vote_granted": response.vote_granted}
        fields["topics"] = _topics("topic_name", {"partition_index": 0, **partition})
    elif isinstance(response, messages.BeginQuorumEpochResponse | messages.EndQuorumEpochResponse):
        partition = {"partition_index": 0, "error_code": response.error, **leader}
        fields["topics"] = _topics("topic_name", partition)
    elif isinstance(response, messages.FetchResponse):
        fields["responses"] = [
            {
                "topic": METADATA_TOPIC,
                "topic_id": METADATA_TOPIC_ID,
                "partitions": [_fetch_partition(response)],
            }
        ]
    else:
        snapshot = response.snapshot_id or raft_log.SnapshotId(_NO_FETCH_EPOCH, _NO_FETCH_EPOCH)
        partition = {
            "index": METADATA_PARTITION,
            "error_code": response.error,
            "snapshot_id": {"end_offset": snapshot.offset, "epoch": snapshot.epoch},
            "current_leader": leader,
            "size": response.size,
            "position": response.position,
            "unaligned_records": response.unaligned_records,
        }
        fields["topics"] = _topics("name", partition)
    return shaping.build(load_response_schema(api_key, version), fields)


def _fetch_partition(response: messages.FetchResponse) -> dict[str, Any]:
    diverging = response.diverging_epoch
    snapshot = response.snapshot_id
    return {
        "partition_index": METADATA_PARTITION,
        "error_code": response.error,
        "high_watermark": response.high_watermark,
        "last_stable_offset": response.high_watermark,
        "log_start_offset": response.log_start_offset,
        "diverging_epoch": {
            "epoch": _NO_FETCH_EPOCH if diverging is None else diverging.epoch,
            "end_offset": _NO_FETCH_EPOCH if diverging is None else diverging.end_offset,
        },
        "current_leader": {"leader_id": response.leader_id, "leader_epoch": response.leader_epoch},
        "snapshot_id": {
            "end_offset": _NO_FETCH_EPOCH if snapshot is None else snapshot.offset,
            "epoch": _NO_FETCH_EPOCH if snapshot is None else snapshot.epoch,
        },
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": encode_entries(response.records),
    }


def encode_entries(entries: Sequence[raft_log.Entry]) -> bytes:
    """Entries as record batches: one per run of one epoch and kind (control or not)."""
    out = bytearray()
    run: list[raft_log.Entry] = []
    for entry in [*entries, None]:
        if run and (
            entry is None
            or (entry.epoch, entry.control) != (run[0].epoch, run[0].control)
            or entry.offset != run[-1].offset + 1
        ):
            key = LEADER_CHANGE_KEY if run[0].control else None
            out += batches.build_batch(
                [(key, item.data, [], 0) for item in run],
                base_offset=run[0].offset,
                partition_leader_epoch=run[0].epoch,
                is_control=run[0].control,
            )
            run = []
        if entry is not None:
            run.append(entry)
    return bytes(out)


# kio → core ----------------------------------------------------------------------------


def request_from_kio(body: Any) -> messages.Request:
    """The core request a decoded kio request carries (the server side).

    The cluster id is the driver's to check (``body.cluster_id``)."""
    try:
        api_key = int(type(body).__api_key__)
        decode = _REQUEST_DECODERS[api_key]
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise RaftWireError(f"not a quorum request: {type(body).__name__}") from error
    request = _guarded(decode, body)
    problem = _invalid(request)
    if problem is not None:
        raise RaftWireError(f"invalid {type(request).__name__}: {problem}")
    return request


def _invalid(request: messages.Request) -> str | None:
    """What no correct peer sends (Kafka answers these INVALID_REQUEST), or None."""
    if isinstance(request, messages.VoteRequest):
        if min(request.candidate_id, request.candidate_epoch) < 0:
            return "a negative candidate id or epoch"
        if min(request.last_offset, request.last_offset_epoch) < 0:
            return "a negative last offset or epoch"
    elif isinstance(request, messages.BeginQuorumEpochRequest | messages.EndQuorumEpochRequest):
        if min(request.leader_id, request.leader_epoch) < 0:
            return "a negative leader id or epoch"
        successors = getattr(request, "preferred_successors", ())
        if any(voter < 0 for voter in successors):
            return "a negative preferred successor"
    elif isinstance(request, messages.FetchRequest):
        if min(request.fetch_offset, request.last_fetched_epoch) < 0:
            return "a negative fetch offset or last fetched epoch"
        if request.last_fetched_epoch > request.current_leader_epoch:
            return "a last fetched epoch above the current leader epoch"
        if min(request.max_bytes, request.max_wait_ms) < 0:
            return "negative max bytes or max wait"
        if request.high_watermark < messages.UNKNOWN:
            return "a high watermark below -1"
    else:
        if min(request.snapshot_id.offset, request.snapshot_id.epoch, request.position) < 0:
            return "a negative snapshot id or position"
        if request.max_bytes < 0:
            return "negative max bytes"
    return None


def error_response(request: Any, error: ErrorCode) -> Any:
    """The kio response to a decoded kio quorum ``request`` that failed as a whole
    (``error`` as its top-level error: INVALID_REQUEST for a `RaftWireError`,
    INCONSISTENT_CLUSTER_ID, ...), at the request's version."""
    schema = load_response_schema(int(type(request).__api_key__), int(type(request).__version__))
    return shaping.build(
        schema, {"error_code": error, "throttle_time": 0, "topics": [], "responses": []}
    )


def replica_directory_id(body: Any) -> uuid.UUID | None:
    """The log directory id a decoded kio Fetch or FetchSnapshot names for its sender, if
    any (older versions, and a zero id, name none)."""
    for topic in getattr(body, "topics", ()):
        for partition in getattr(topic, "partitions", ()):
            found = getattr(partition, "replica_directory_id", None)
            if isinstance(found, uuid.UUID) and found != _ZERO_UUID:
                return found
    return None


def response_from_kio(body: Any) -> messages.Response:
    """The core response a decoded kio response carries (the client side)."""
    try:
        api_key = int(type(body).__api_key__)
        decode = _RESPONSE_DECODERS[api_key]
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise RaftWireError(f"not a quorum response: {type(body).__name__}") from error
    error_code = getattr(body, "error_code", ErrorCode.none)
    if error_code != ErrorCode.none:
        raise TopLevelError(api_key, ErrorCode(error_code))
    return _guarded(decode, body)


def _guarded(decode: Callable[[Any], _T], body: Any) -> _T:
    try:
        return decode(body)
    except RaftWireError:
        raise
    except (AttributeError, TypeError, ValueError) as error:
        raise RaftWireError(f"malformed {type(body).__name__}: {error}") from error


def _only_partition(topics: Any, name_key: str, index_key: str) -> Any:
    """The one partition of ``__cluster_metadata`` (index 0) in ``topics``."""
    if len(topics) != 1:
        raise RaftWireError(f"{len(topics)} topics where the metadata topic alone belongs")
    (topic,) = topics
    if name_key == "topic_id":
        if topic.topic_id != METADATA_TOPIC_ID:
            raise RaftWireError(f"topic id {topic.topic_id} is not the metadata topic's")
    elif getattr(topic, name_key) != METADATA_TOPIC:
        raise RaftWireError(f"topic {getattr(topic, name_key)!r} is not {METADATA_TOPIC}")
    if len(topic.partitions) != 1:
        raise RaftWireError(f"{len(topic.partitions)} partitions where partition 0 belongs")
    (partition,) = topic.partitions
    if int(getattr(partition, index_key)) != METADATA_PARTITION:
        raise RaftWireError(f"partition {getattr(partition, index_key)} is not 0")
    return partition


def _fetch_topics_key(topics: Any) -> str:
    return "topic_id" if topics and hasattr(topics[0], "topic_id") else "topic"


def _vote_request_from(body: Any) -> messages.VoteRequest:
    partition = _only_partition(body.topics, "topic_name", "partition_index")
    return messages.VoteRequest(
        candidate_epoch=int(partition.replica_epoch),
        candidate_id=int(partition.replica_id),
        voter_id=int(getattr(body, "voter_id", messages.UNKNOWN)),
        last_offset_epoch=int(partition.last_offset_epoch),
        last_offset=int(partition.last_offset),
        pre_vote=bool(getattr(partition, "pre_vote", False)),
    )


def _begin_quorum_epoch_request_from(body: Any) -> messages.BeginQuorumEpochRequest:
    partition = _only_partition(body.topics, "topic_name", "partition_index")
    return messages.BeginQuorumEpochRequest(
        leader_id=int(partition.leader_id),
        leader_epoch=int(partition.leader_epoch),
        voter_id=int(getattr(body, "voter_id", messages.UNKNOWN)),
    )


def _end_quorum_epoch_request_from(body: Any) -> messages.EndQuorumEpochRequest:
    partition = _only_partition(body.topics, "topic_name", "partition_index")
    candidates = getattr(partition, "preferred_candidates", None)
    if candidates is not None:
        successors = tuple(int(candidate.candidate_id) for candidate in candidates)
    else:
        successors = tuple(int(voter) for voter in partition.preferred_successors)
    return messages.EndQuorumEpochRequest(
        leader_id=int(partition.leader_id),
        leader_epoch=int(partition.leader_epoch),
        preferred_successors=successors,
    )


def _fetch_request_from(body: Any) -> messages.FetchRequest:
    partition = _only_partition(body.topics, _fetch_topics_key(body.topics), "partition")
    state = getattr(body, "replica_state", None)
    replica_id = int(state.replica_id) if state is not None else int(body.replica_id)
    high_watermark = int(getattr(partition, "high_watermark", messages.UNKNOWN))
    if high_watermark == _HIGH_WATERMARK_UNSUPPORTED:
        high_watermark = messages.UNKNOWN
    return messages.FetchRequest(
        replica_id=replica_id,
        current_leader_epoch=int(partition.current_leader_epoch),
        fetch_offset=int(partition.fetch_offset),
        last_fetched_epoch=int(partition.last_fetched_epoch),
        log_start_offset=int(partition.log_start_offset),
        max_bytes=min(int(body.max_bytes), int(partition.partition_max_bytes)),
        max_wait_ms=_milliseconds(body.max_wait),
        high_watermark=high_watermark,
    )


def _milliseconds(value: Any) -> int:
    if hasattr(value, "total_seconds"):
        return round(float(value.total_seconds()) * 1000)
    return int(value)


def _fetch_snapshot_request_from(body: Any) -> messages.FetchSnapshotRequest:
    partition = _only_partition(body.topics, "name", "partition")
    return messages.FetchSnapshotRequest(
        replica_id=int(body.replica_id),
        current_leader_epoch=int(partition.current_leader_epoch),
        snapshot_id=raft_log.SnapshotId(
            int(partition.snapshot_id.end_offset), int(partition.snapshot_id.epoch)
        ),
        position=int(partition.position),
        max_bytes=int(body.max_bytes),
    )


def _vote_response_from(body: Any) -> messages.VoteResponse:
    partition = _only_partition(body.topics, "topic_name", "partition_index")
    return messages.VoteResponse(
        error=ErrorCode(partition.error_code),
        leader_id=int(partition.leader_id),
        leader_epoch=int(partition.leader_epoch),
        vote_granted=bool(partition.vote_granted),
    )


def _begin_quorum_epoch_response_from(body: Any) -> messages.BeginQuorumEpochResponse:
    partition = _only_partition(body.topics, "topic_name", "partition_index")
    return messages.BeginQuorumEpochResponse(
        ErrorCode(partition.error_code), int(partition.leader_id), int(partition.leader_epoch)
    )


def _end_quorum_epoch_response_from(body: Any) -> messages.EndQuorumEpochResponse:
    partition = _only_partition(body.topics, "topic_name", "partition_index")
    return messages.EndQuorumEpochResponse(
        ErrorCode(partition.error_code), int(partition.leader_id), int(partition.leader_epoch)
    )


def _fetch_response_from(body: Any) -> messages.FetchResponse:
    partition = _only_partition(
        body.responses, _fetch_topics_key(body.responses), "partition_index"
    )
    diverging = partition.diverging_epoch
    snapshot = partition.snapshot_id
    return messages.FetchResponse(
        error=ErrorCode(partition.error_code),
        leader_id=int(partition.current_leader.leader_id),
        leader_epoch=int(partition.current_leader.leader_epoch),
        high_watermark=int(partition.high_watermark),
        log_start_offset=int(partition.log_start_offset),
        diverging_epoch=(
            None
            if int(diverging.epoch) < 0 or int(diverging.end_offset) < 0
            else messages.EpochEndOffset(int(diverging.epoch), int(diverging.end_offset))
        ),
        snapshot_id=(
            None
            if int(snapshot.epoch) < 0 or int(snapshot.end_offset) < 0
            else raft_log.SnapshotId(int(snapshot.end_offset), int(snapshot.epoch))
        ),
        records=decode_entries(partition.records or b""),
    )


def _fetch_snapshot_response_from(body: Any) -> messages.FetchSnapshotResponse:
    partition = _only_partition(body.topics, "name", "index")
    snapshot = partition.snapshot_id
    return messages.FetchSnapshotResponse(
        error=ErrorCode(partition.error_code),
        leader_id=int(partition.current_leader.leader_id),
        leader_epoch=int(partition.current_leader.leader_epoch),
        snapshot_id=(
            None
            if int(snapshot.epoch) < 0 or int(snapshot.end_offset) < 0
            else raft_log.SnapshotId(int(snapshot.end_offset), int(snapshot.epoch))
        ),
        size=int(partition.size),
        position=int(partition.position),
        unaligned_records=bytes(partition.unaligned_records),
    )


def decode_entries(data: bytes | bytearray | memoryview) -> tuple[raft_log.Entry, ...]:
    """The entries of record batches (their CRCs checked); a trailing cut batch is dropped."""
    entries: list[raft_log.Entry] = []
    try:
        for header, batch in _whole_batches(memoryview(data)):
            if not batches.has_valid_crc(batch, header):
                raise RaftWireError(f"batch at offset {header.base_offset} fails its CRC")
            epoch = int(header.partition_leader_epoch)
            for record in batches.iter_records(batch):
                if entries and record.offset <= entries[-1].offset:
                    raise RaftWireError(f"record offset {record.offset} out of order")
                entries.append(
                    raft_log.Entry(record.offset, epoch, record.value or b"", header.is_control)
                )
    except batches.RecordsError as error:
        raise RaftWireError(f"malformed records: {error}") from error
    return tuple(entries)


def _whole_batches(view: memoryview) -> Iterator[tuple[batches.BatchHeader, memoryview]]:
    position = 0
    while len(view) - position >= batches.LOG_OVERHEAD:
        length = int.from_bytes(view[position + 8 : position + 12], "big", signed=True)
        if length >= batches.MIN_BATCH_LENGTH and position + batches.LOG_OVERHEAD + length > len(
            view
        ):
            return  # cut short at the end, as a leader's max_bytes may leave it
        header = batches.parse_complete_header(view, position)
        batch = view[position : position + header.size]
        yield batches.BatchHeader.parse(batch, 0), batch
        position += header.size


_REQUEST_DECODERS: dict[int, Callable[[Any], messages.Request]] = {
    VOTE: _vote_request_from,
    BEGIN_QUORUM_EPOCH: _begin_quorum_epoch_request_from,
    END_QUORUM_EPOCH: _end_quorum_epoch_request_from,
    FETCH: _fetch_request_from,
    FETCH_SNAPSHOT: _fetch_snapshot_request_from,
}

_RESPONSE_DECODERS: dict[int, Callable[[Any], messages.Response]] = {
    VOTE: _vote_response_from,
    BEGIN_QUORUM_EPOCH: _begin_quorum_epoch_response_from,
    END_QUORUM_EPOCH: _end_quorum_epoch_response_from,
    FETCH: _fetch_response_from,
    FETCH_SNAPSHOT: _fetch_snapshot_response_from,
}
