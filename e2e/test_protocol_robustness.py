"""Thousands of random and mutated frames from a seeded generator hit a real broker while a
well-behaved client keeps producing on its own connection: the broker stays up, the good
client never fails, and nothing it wrote is lost or corrupted."""

from __future__ import annotations

import random
import socket
import struct
import urllib.request

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from strom.protocol import outbound
from strom.records import batches
from strom_process import StromProcess

SEED = 20261121
JUNK_FRAMES = 3000
GOOD_RECORDS_EVERY = 100


def _request(api_key: int, version: int, body: dict, correlation_id: int) -> bytes:
    frame = outbound.encode_request(
        outbound.Draft(api_key, body).at(version), correlation_id, "fuzzer"
    )
    return frame[4:]


def _valid_frames(topic: str) -> list[bytes]:
    batch = batches.build_batch([(b"k", b"v" * 50, [], 1_700_000_000_000)])
    flags = {
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    produce = {
        "acks": 1,
        "timeout": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    fetch = {
        "max_wait": 10,
        "min_bytes": 1,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
        "forgotten_topics_data": [],
    }
    return [
        _request(18, 3, {"client_software_name": "f", "client_software_version": "1"}, 1),
        _request(3, 12, {"topics": [{"name": topic}], **flags}, 2),
        _request(3, 1, {"topics": None, **flags}, 3),
        _request(0, 9, produce, 4),
        _request(0, 3, produce, 5),
        _request(1, 12, fetch, 6),
        _request(1, 4, fetch, 7),
        _request(
            2,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}
                ],
            },
            8,
        ),
        _request(
            19,
            7,
            {
                "topics": [
                    {
                        "name": "fuzz-created",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": 1000,
            },
            9,
        ),
        _request(
            32,
            4,
            {
                "resources": [
                    {"resource_type": 2, "resource_name": topic, "configuration_keys": None}
                ]
            },
            10,
        ),
    ]


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    choice = rng.randrange(6)
    if choice == 0:  # flip bytes anywhere (headers, lengths, CRCs, payload)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif choice == 1:  # truncate
        del data[rng.randrange(len(data)) :]
    elif choice == 2:  # append garbage
        data += rng.randbytes(rng.randint(1, 64))
    elif choice == 3:  # unknown API key or version
        struct.pack_into(
            ">hh", data, 0, rng.choice([rng.randrange(-5, 200), 3]), rng.randrange(-3, 40)
        )
    elif choice == 4:  # absurd length fields inside the body
        if len(data) > 12:
            position = rng.randrange(8, len(data) - 4)
            struct.pack_into(">i", data, position, rng.choice([-2, 0x7FFFFFFF, 1 << 30]))
    else:  # pure noise
        data = bytearray(rng.randbytes(rng.randint(0, 300)))
    return bytes(data)


def _frame_with_size(rng: random.Random, body: bytes) -> bytes:
    roll = rng.random()
    if roll < 0.05:
        return struct.pack(">i", rng.choice([-1, -(1 << 31), 1 << 30, 0x7FFFFFFF])) + body
    if roll < 0.08:
        return struct.pack(">i", len(body) + rng.randint(1, 50)) + body  # shorter than said
    return struct.pack(">i", len(body)) + body


def _send_junk(address: tuple[str, int], payload: bytes) -> None:
    with socket.create_connection(address, timeout=5) as connection:
        connection.settimeout(0.2)
        try:
            connection.sendall(payload)
            connection.recv(65536)  # whatever comes back: a response or a close
        except (TimeoutError, ConnectionError):
            pass


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_broker_survives_random_and_mutated_frames(strom: StromProcess, topic: str) -> None:
    rng = random.Random(SEED)
    good = Producer(
        {"bootstrap.servers": strom.bootstrap, "enable.idempotence": True, "linger.ms": 0}
    )
    delivered: list[tuple[int, int]] = []
    failures: list[str] = []

    def on_delivery(error: object, message: object) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            delivered.append((message.partition(), message.offset()))  # type: ignore[attr-defined]

    good.produce(topic, key=b"start", value=b"0", on_delivery=on_delivery)
    assert good.flush(30) == 0
    seeds = _valid_frames(topic)
    address = ("127.0.0.1", strom.port)
    sent_good = 1
    for number in range(JUNK_FRAMES):
        body = _mutate(rng, rng.choice(seeds))
        _send_junk(address, _frame_with_size(rng, body))
        if number % GOOD_RECORDS_EVERY == 0:
            good.produce(topic, key=b"good", value=str(number).encode(), on_delivery=on_delivery)
            sent_good += 1
            assert good.flush(30) == 0, "the well-behaved producer got stuck"
            assert strom.proc is not None and strom.proc.poll() is None, "the broker died"
    assert not failures
    assert len(delivered) == sent_good
    with urllib.request.urlopen(f"http://127.0.0.1:{strom.metrics_port}/healthz", timeout=5) as r:
        assert r.status == 200

    consumer = Consumer(
        {
            "bootstrap.servers": strom.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "check.crcs": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    good_values = []
    offsets = []
    try:
        while len(good_values) < sent_good:
            message = consumer.poll(10)
            assert message is not None, f"only {len(good_values)} of {sent_good} came back"
            assert message.error() is None, message.error()
            offsets.append(message.offset())
            if message.key() in (b"good", b"start"):
                good_values.append(message.value())
    finally:
        consumer.close()
    assert offsets == list(range(len(offsets))), "offsets are contiguous"
    assert [p for p, _ in delivered] == [0] * sent_good
