"""A full disk under a real broker: a fixed-size tmpfs holds its log.dirs; a producer
writes until the filesystem is full. The broker answers KAFKA_STORAGE_ERROR, stays up,
and once space is freed every acknowledged record is readable and producing resumes.

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
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
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
