"""raft_wire: every core quorum message survives core → kio → bytes → kio → core, and
what cannot be a quorum message raises RaftWireError, never anything else."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from strom.cluster import raft_wire
from strom.cluster.raft import log as raft_log
from strom.cluster.raft import messages
from strom.protocol import apis, outbound, shaping
from strom.records import batches

ERRORS = [
    ErrorCode.none,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.not_leader_or_follower,
    ErrorCode.inconsistent_voter_set,
    ErrorCode.offset_out_of_range,
]


def _decode_request(frame: bytes) -> Any:
    """The controller listener's decoding of a request frame (size prefix included)."""
    return apis.decode_request(memoryview(frame)[4:], apis.CONTROLLER_VERSIONS).body


def _request_round_trip(request: messages.Request, version: int | None = None) -> Any:
    kio_request = raft_wire.request_to_kio(request, cluster_id="cluster-1", version=version)
    frame = outbound.encode_request(kio_request, 7, "strom-raft")
    body = _decode_request(frame)
    assert body.cluster_id == "cluster-1"
    return raft_wire.request_from_kio(body)


def _response_round_trip(response: messages.Response, version: int | None = None) -> Any:
    api_key = raft_wire.api_key_of(response)
    chosen = raft_wire.VERSIONS[api_key] if version is None else version
    frame = apis.joined(apis.encode_response(9, raft_wire.response_to_kio(response, chosen)))
    correlation_id, body = outbound.decode_response(frame[4:], api_key, chosen)
    assert correlation_id == 9
    return raft_wire.response_from_kio(body)


def _snapshot_id(rng: random.Random) -> raft_log.SnapshotId:
    return raft_log.SnapshotId(rng.randrange(0, 1 << 40), rng.randrange(0, 1 << 20))


def _entries(rng: random.Random) -> tuple[raft_log.Entry, ...]:
    offset = rng.randrange(0, 1 << 30)
    epoch = rng.randrange(0, 100)
    entries = []
    for _ in range(rng.randrange(0, 12)):
        if rng.random() < 0.3:
            epoch += rng.randrange(1, 3)
        control = rng.random() < 0.15
        data = rng.randbytes(rng.randrange(0, 40))
        entries.append(raft_log.Entry(offset, epoch, data, control))
        offset += 1
    return tuple(entries)


def random_request(rng: random.Random) -> messages.Request:
    node = lambda: rng.randrange(0, 1000)  # noqa: E731
    epoch = lambda: rng.randrange(0, 1 << 30)  # noqa: E731
    offset = lambda: rng.randrange(0, 1 << 50)  # noqa: E731
    kind = rng.randrange(5)
    if kind == 0:
        return messages.VoteRequest(
            epoch(), node(), node(), epoch(), offset(), pre_vote=rng.random() < 0.5
        )
    if kind == 1:
        return messages.BeginQuorumEpochRequest(node(), epoch(), node())
    if kind == 2:
        return messages.EndQuorumEpochRequest(
            node(), epoch(), tuple(node() for _ in range(rng.randrange(0, 5)))
        )
    if kind == 3:
        leader_epoch = epoch()
        return messages.FetchRequest(
            node(),
            leader_epoch,
            offset(),
            rng.randrange(0, leader_epoch + 1),
            offset(),
            rng.randrange(1, 1 << 31),
            rng.randrange(0, 60_000),
            high_watermark=rng.choice([messages.UNKNOWN, offset()]),
        )
    return messages.FetchSnapshotRequest(
        node(), epoch(), _snapshot_id(rng), offset(), rng.randrange(1, 1 << 31)
    )


def random_response(rng: random.Random) -> messages.Response:
    error = rng.choice(ERRORS)
    leader = rng.choice([messages.UNKNOWN, rng.randrange(0, 1000)])
    epoch = rng.randrange(0, 1 << 30)
    kind = rng.randrange(5)
    if kind == 0:
        return messages.VoteResponse(error, leader, epoch, rng.random() < 0.5)
    if kind == 1:
        return messages.BeginQuorumEpochResponse(error, leader, epoch)
    if kind == 2:
        return messages.EndQuorumEpochResponse(error, leader, epoch)
    if kind == 3:
        return messages.FetchResponse(
            error,
            leader,
            epoch,
            high_watermark=rng.choice([messages.UNKNOWN, rng.randrange(0, 1 << 40)]),
            log_start_offset=rng.randrange(0, 1 << 40),
            diverging_epoch=rng.choice(
                [None, messages.EpochEndOffset(rng.randrange(0, 1000), rng.randrange(0, 1 << 40))]
            ),
            snapshot_id=rng.choice([None, _snapshot_id(rng)]),
            records=_entries(rng),
        )
    return messages.FetchSnapshotResponse(
        error,
        leader,
        epoch,
        snapshot_id=rng.choice([None, _snapshot_id(rng)]),
        size=rng.randrange(0, 1 << 40),
        position=rng.randrange(0, 1 << 40),
        unaligned_records=rng.randbytes(rng.randrange(0, 64)),
    )


def test_requests_round_trip() -> None:
    rng = random.Random(20261123)
    for _ in range(400):
        request = random_request(rng)
        assert _request_round_trip(request) == request


def test_responses_round_trip() -> None:
    rng = random.Random(5301)
    for _ in range(400):
        response = random_response(rng)
        assert _response_round_trip(response) == response


def test_fetch_response_with_several_epochs_and_control_entries() -> None:
    entries = (
        raft_log.Entry(100, 3, b"a"),
        raft_log.Entry(101, 3, b"b"),
        raft_log.Entry(102, 4, b"\x00\x00leader", control=True),
        raft_log.Entry(103, 4, b"c"),
        raft_log.Entry(104, 4, b""),
        raft_log.Entry(105, 7, b"\x00\x00leader", control=True),
        raft_log.Entry(106, 7, b"d"),
    )
    response = messages.FetchResponse(ErrorCode.none, 2, 7, 104, 50, records=entries)
    assert _response_round_trip(response) == response
    data = raft_wire.encode_entries(entries)
    headers = list(batches.iter_batches(data))
    assert [(h.base_offset, h.partition_leader_epoch, h.is_control) for h in headers] == [
        (100, 3, False),
        (102, 4, True),
        (103, 4, False),
        (105, 7, True),
        (106, 7, False),
    ]
    for header in headers:
        batch = data[header.position : header.position + header.size]
        assert batches.has_valid_crc(batch, batches.BatchHeader.parse(batch, 0))
        if header.is_control:
            assert {r.key for r in batches.iter_records(batch)} == {raft_wire.LEADER_CHANGE_KEY}


def test_older_versions_decode_with_the_cores_defaults() -> None:
    vote = messages.VoteRequest(4, 1, 2, 3, 40, pre_vote=True)
    assert _request_round_trip(vote, version=1) == dataclasses.replace(vote, pre_vote=False)
    assert _request_round_trip(vote, version=0) == dataclasses.replace(
        vote, pre_vote=False, voter_id=messages.UNKNOWN
    )
    end = messages.EndQuorumEpochRequest(1, 5, (3, 2))
    assert _request_round_trip(end, version=0) == end
    fetch = messages.FetchRequest(3, 5, 10, 4, 0, 1000, 500, high_watermark=9)
    for version in (12, 13, 15, 17):
        assert _request_round_trip(fetch, version=version) == dataclasses.replace(
            fetch, high_watermark=messages.UNKNOWN
        )
    response = messages.FetchResponse(
        ErrorCode.none, 1, 5, 12, 0, records=(raft_log.Entry(10, 5, b"x"),)
    )
    for version in (12, 13, 17):
        assert _response_round_trip(response, version=version) == response


def test_a_trailing_cut_batch_is_dropped() -> None:
    entries = (raft_log.Entry(0, 1, b"a"), raft_log.Entry(1, 2, b"b"))
    data = raft_wire.encode_entries(entries)
    assert raft_wire.decode_entries(data[:-3]) == entries[:1]
    assert raft_wire.decode_entries(data[: batches.LOG_OVERHEAD - 1]) == ()


# Malformed input -----------------------------------------------------------------------


def _vote_body(**changes: Any) -> Any:
    request = messages.VoteRequest(4, 1, 2, 3, 40)
    fields: dict[str, Any] = {
        "cluster_id": None,
        "voter_id": 2,
        "topics": [
            {
                "topic_name": "__cluster_metadata",
                "partitions": [
                    {
                        "partition_index": 0,
                        "replica_epoch": request.candidate_epoch,
                        "replica_id": request.candidate_id,
                        "replica_directory_id": None,
                        "voter_directory_id": None,
                        "last_offset_epoch": 3,
                        "last_offset": 40,
                        "pre_vote": False,
                    }
                ],
            }
        ],
    }
    fields.update(changes)
    return shaping.build(load_request_schema(raft_wire.VOTE, 2), fields)


def test_requests_outside_the_metadata_partition_are_rejected() -> None:
    good = _vote_body()
    assert raft_wire.request_from_kio(good) == messages.VoteRequest(4, 1, 2, 3, 40)
    topic = good.topics[0]
    partition = topic.partitions[0]
    cases = [
        dataclasses.replace(good, topics=()),
        dataclasses.replace(good, topics=(topic, topic)),
        dataclasses.replace(good, topics=(dataclasses.replace(topic, topic_name="other"),)),
        dataclasses.replace(good, topics=(dataclasses.replace(topic, partitions=()),)),
        dataclasses.replace(
            good,
            topics=(
                dataclasses.replace(
                    topic, partitions=(dataclasses.replace(partition, partition_index=1),)
                ),
            ),
        ),
    ]
    for body in cases:
        with pytest.raises(raft_wire.RaftWireError):
            raft_wire.request_from_kio(body)


def test_fetch_of_another_topic_id_is_rejected() -> None:
    body = raft_wire.request_to_kio(
        messages.FetchRequest(3, 5, 10, 4, 0, 1000, 500), cluster_id=None
    )
    topic = dataclasses.replace(body.topics[0], topic_id=uuid.uuid4())
    with pytest.raises(raft_wire.RaftWireError):
        raft_wire.request_from_kio(dataclasses.replace(body, topics=(topic,)))


def test_not_a_quorum_message() -> None:
    with pytest.raises(raft_wire.RaftWireError):
        raft_wire.request_from_kio(outbound.api_versions_request())
    with pytest.raises(raft_wire.RaftWireError):
        raft_wire.request_from_kio(object())
    with pytest.raises(raft_wire.RaftWireError):
        raft_wire.response_from_kio("nonsense")


def test_top_level_error_response() -> None:
    response = raft_wire.response_to_kio(messages.VoteResponse(ErrorCode.none, 1, 2, True), 2)
    failed = dataclasses.replace(response, error_code=ErrorCode.inconsistent_cluster_id, topics=())
    with pytest.raises(raft_wire.TopLevelError) as raised:
        raft_wire.response_from_kio(failed)
    assert raised.value.error == ErrorCode.inconsistent_cluster_id


def _fetch_response_with(records: bytes) -> Any:
    response = raft_wire.response_to_kio(messages.FetchResponse(ErrorCode.none, 1, 2), 18)
    topic = response.responses[0]
    partition = dataclasses.replace(topic.partitions[0], records=records)
    topic = dataclasses.replace(topic, partitions=(partition,))
    return dataclasses.replace(response, responses=(topic,))


def test_corrupt_records_are_rejected() -> None:
    rng = random.Random(77)
    entries = (raft_log.Entry(5, 1, b"abc"), raft_log.Entry(6, 1, b"def"))
    good = raft_wire.encode_entries(entries)
    assert raft_wire.response_from_kio(_fetch_response_with(good)).records == entries
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    bad_length = bytearray(good)
    bad_length[8:12] = (3).to_bytes(4, "big")
    backwards = raft_wire.encode_entries(entries[1:]) + raft_wire.encode_entries(entries[:1])
    for data in (bytes(bad_crc), bytes(bad_magic), bytes(bad_length), backwards):
        with pytest.raises(raft_wire.RaftWireError):
            raft_wire.response_from_kio(_fetch_response_with(data))
    # Random damage: either decodes or raises RaftWireError, nothing else.
    for _ in range(300):
        damaged = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        with contextlib.suppress(raft_wire.RaftWireError):
            raft_wire.decode_entries(bytes(damaged))


def test_random_request_bytes_never_crash_the_server_side() -> None:
    rng = random.Random(99)
    for _ in range(300):
        request = random_request(rng)
        frame = bytearray(
            outbound.encode_request(raft_wire.request_to_kio(request, cluster_id="c"), 1, None)
        )
        for _ in range(rng.randrange(1, 4)):
            position = rng.randrange(12, len(frame))  # past the size and the api key/version
            frame[position] = rng.randrange(256)
        try:
            body = _decode_request(bytes(frame))
        except Exception:  # the decoder's to reject (kio's reader raises several types)
            continue
        with contextlib.suppress(raft_wire.RaftWireError):
            raft_wire.request_from_kio(body)


def test_requests_no_correct_peer_sends_are_rejected() -> None:
    fetch = messages.FetchRequest(3, 5, 10, 4, 0, 1000, 500)
    vote = messages.VoteRequest(4, 1, 2, 3, 40)
    invalid = [
        dataclasses.replace(fetch, fetch_offset=-1),
        dataclasses.replace(fetch, last_fetched_epoch=-1),
        dataclasses.replace(fetch, last_fetched_epoch=6),
        dataclasses.replace(fetch, max_wait_ms=-5),
        dataclasses.replace(fetch, high_watermark=-2),
        dataclasses.replace(vote, last_offset=-1),
        dataclasses.replace(vote, last_offset_epoch=-1),
        dataclasses.replace(vote, candidate_id=-1),
        messages.BeginQuorumEpochRequest(-1, 5, 2),
        messages.EndQuorumEpochRequest(1, -5, (2,)),
        messages.EndQuorumEpochRequest(1, 5, (2, -1)),
        messages.FetchSnapshotRequest(3, 5, raft_log.SnapshotId(10, 2), -1, 100),
        messages.FetchSnapshotRequest(3, 5, raft_log.SnapshotId(-1, 2), 0, 100),
    ]
    for request in invalid:
        body = raft_wire.request_to_kio(request, cluster_id=None)
        with pytest.raises(raft_wire.RaftWireError):
            raft_wire.request_from_kio(body)


@pytest.mark.parametrize("api_key", sorted(raft_wire.VERSIONS))
def test_error_response_round_trips_as_a_top_level_error(api_key: int) -> None:
    rng = random.Random(api_key)
    request = random_request(rng)
    while raft_wire.api_key_of(request) != api_key:
        request = random_request(rng)
    body = raft_wire.request_to_kio(request, cluster_id="other")
    response = raft_wire.error_response(body, ErrorCode.inconsistent_cluster_id)
    version = raft_wire.VERSIONS[api_key]
    frame = apis.joined(apis.encode_response(3, response))
    _, decoded = outbound.decode_response(frame[4:], api_key, version)
    with pytest.raises(raft_wire.TopLevelError) as raised:
        raft_wire.response_from_kio(decoded)
    assert raised.value.error == ErrorCode.inconsistent_cluster_id
    assert raised.value.api_key == api_key


def test_fetches_carry_the_senders_log_directory_id() -> None:
    directory = uuid.uuid4()
    fetch = messages.FetchRequest(
        replica_id=2,
        current_leader_epoch=1,
        fetch_offset=5,
        last_fetched_epoch=1,
        log_start_offset=0,
        max_bytes=1024,
        max_wait_ms=500,
    )
    snapshot = messages.FetchSnapshotRequest(
        replica_id=2,
        current_leader_epoch=1,
        snapshot_id=raft_log.SnapshotId(10, 1),
        position=0,
        max_bytes=1024,
    )
    for request in (fetch, snapshot):
        frame = outbound.encode_request(
            raft_wire.request_to_kio(request, cluster_id="c", directory_id=directory), 1, None
        )
        assert raft_wire.replica_directory_id(_decode_request(frame)) == directory
        plain = outbound.encode_request(raft_wire.request_to_kio(request, cluster_id="c"), 1, None)
        assert raft_wire.replica_directory_id(_decode_request(plain)) is None
