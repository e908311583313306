"""A full disk under a real broker: a fixed-size tmpfs holds its log.dirs; a producer
writes until the filesystem is full. The broker answers KAFKA_STORAGE_ERROR, stays up,
and once space is freed every acknowledged record is readable and producing resumes.
Metadata changes on a full disk (CreateTopics, the first FindCoordinator) fail with
retriable errors and leave no half-made topic behind.

Needs root to mount the tmpfs (CI and the dev machines run as root); skipped otherwise.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import e2e_records
import pytest
import wire_requests
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from strom.protocol import apis, outbound
from strom_process import StromProcess

FILESYSTEM_BYTES = 24 * 1024 * 1024
BALLAST_BYTES = 4 * 1024 * 1024
VALUE_BYTES = 8 * 1024


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FILESYSTEM_BYTES}", "strom-e2e", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def healthy(broker: StromProcess) -> bool:
    with (
        contextlib.suppress(OSError),
        urllib.request.urlopen(f"{broker.metrics_url}/healthz", timeout=5) as response,
    ):
        return bool(response.status == 200)
    return False


def read_all(bootstrap: str, topic: str) -> dict[int, bytes | None]:
    return {o: v for o, _, v in e2e_records.read_partition(bootstrap, topic)}


@pytest.mark.timeout(300)
def test_full_disk_refuses_writes_keeps_acknowledged_records_and_recovers(
    small_filesystem: Path, strom_factory: Callable[..., StromProcess], topic: str
) -> None:
    # small_filesystem comes first so it is unmounted after the broker has stopped.
    ballast = small_filesystem / "ballast"
    ballast.write_bytes(b"\0" * BALLAST_BYTES)
    log_dir = small_filesystem / "log"
    broker = strom_factory(overrides={"log.dirs": str(log_dir)})
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)

    acked: dict[int, bytes] = {}
    failures: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failures.append(err)
        else:
            acked[msg.offset()] = msg.value()

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 4000,
        }
    )
    # More than fits: the filesystem fills up part way.
    attempts = FILESYSTEM_BYTES // VALUE_BYTES + 200
    for number in range(attempts):
        producer.produce(
            topic, value=f"{number:08d}".encode().ljust(VALUE_BYTES, b"."), on_delivery=report
        )
        producer.poll(0)
        if failures:
            break
    producer.flush(30)
    assert failures, "the filesystem never filled up"
    assert {f.code() for f in failures} <= {
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError._MSG_TIMED_OUT,
    }, failures[:3]
    assert acked, "nothing was acknowledged before the disk filled"
    assert healthy(broker) and broker.running, "the broker stays up on a full disk"
    with urllib.request.urlopen(f"{broker.metrics_url}/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert 'strom_storage_errors_total{error="No space left on device"}' in metrics

    # What was acknowledged is readable right away, at contiguous offsets from 0.
    assert sorted(acked) == list(range(len(acked)))
    assert read_all(broker.bootstrap, topic) == acked

    # Space comes back: producing resumes and nothing acknowledged is lost.
    ballast.unlink()
    more: dict[int, bytes] = {}

    def report_more(err: KafkaError | None, msg: Message) -> None:
        assert err is None, err
        more[msg.offset()] = msg.value()

    for number in range(20):
        producer.produce(topic, value=f"after-{number}".encode(), on_delivery=report_more)
    assert producer.flush(60) == 0
    assert len(more) == 20
    everything = {**acked, **more}
    assert read_all(broker.bootstrap, topic) == everything

    # And a restart finds the same log.
    broker.stop()
    broker.start()
    assert read_all(broker.bootstrap, topic) == everything


def fill(filesystem: Path) -> Path:
    """A file that takes every free byte of `filesystem`."""
    ballast = filesystem / "everything"
    chunk = b"\0" * (256 * 1024)
    with ballast.open("wb") as handle:
        try:
            while True:
                handle.write(chunk)
                handle.flush()
        except OSError:
            pass
    with contextlib.suppress(OSError), ballast.open("ab") as handle:
        while True:  # the last partial chunk
            handle.write(b"\0" * 4096)
            handle.flush()
    return ballast


async def find_coordinator_error(port: int, group: str) -> ErrorCode:
    request = outbound.Draft(
        apis.ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group], "key": group}
    )
    answer = await wire_requests.send(port, request, api_version=4)
    return ErrorCode(answer.coordinators[0].error_code)


@pytest.mark.timeout(300)
async def test_metadata_changes_on_a_full_disk_fail_cleanly_and_leave_nothing_behind(
    small_filesystem: Path, strom_factory: Callable[..., StromProcess]
) -> None:
    log_dir = small_filesystem / "log"
    broker = strom_factory(
        overrides={"log.dirs": str(log_dir), "offsets.topic.num.partitions": "5"}
    )
    broker.start()
    ballast = fill(small_filesystem)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    # CreateTopics: a retriable storage error, and no topic listed afterwards.
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("made-on-a-full-disk", 3, 1)])["made-on-a-full-disk"].result(
            60
        )
    assert refused.value.args[0].code() == KafkaError.KAFKA_STORAGE_ERROR
    listed = admin.list_topics(timeout=30).topics
    assert "made-on-a-full-disk" not in listed
    assert not list(log_dir.glob("made-on-a-full-disk-*"))

    # FindCoordinator: __consumer_offsets cannot be created; the client is told to retry.
    assert await find_coordinator_error(broker.port, "g") == ErrorCode.coordinator_not_available
    assert "__consumer_offsets" not in admin.list_topics(timeout=30).topics
    assert healthy(broker) and broker.running

    # Space comes back: the same requests succeed, without a restart.
    ballast.unlink()
    admin.create_topics([NewTopic("made-on-a-full-disk", 3, 1)])["made-on-a-full-disk"].result(60)
    assert await find_coordinator_error(broker.port, "g") == ErrorCode.none
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
    try:
        consumer.commit(offsets=[TopicPartition("made-on-a-full-disk", 0, 0)], asynchronous=False)
        (stored,) = consumer.committed([TopicPartition("made-on-a-full-disk", 0)], timeout=30)
        assert stored.offset == 0
    finally:
        consumer.close()
    assert len(admin.list_topics(timeout=30).topics["__consumer_offsets"].partitions) == 5
