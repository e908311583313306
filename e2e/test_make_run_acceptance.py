"""The README's acceptance checks.

A plain librdkafka producer with nothing but bootstrap.servers writes to a topic that does
not exist yet (auto-created on Metadata with the default num.partitions=1), and a consumer
group reads the records back.

`make run` from a fresh clone (git clone of this repository into a temporary directory,
its own virtualenv; pip uses its usual cache) installs the broker's runtime only (no
pytest, mypy, ruff, no clients), says where the Kafka and Strom tools are, and starts
config/server.properties. The shipped file's ports and log directory are moved to free
ones with STROM_* environment variables, since other tests run in parallel.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from strom_process import StromProcess, free_port
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
# a fresh virtualenv, the runtime packages (from pip's cache when warm) and the broker
MAKE_RUN_READY_TIMEOUT_S = 300


@pytest.mark.timeout(120)
def test_plain_producer_auto_created_topic(strom: StromProcess, topic: str) -> None:
    producer = Producer({"bootstrap.servers": strom.bootstrap})
    delivered: list[tuple[int, int]] = []
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))

    for i in range(10):
        producer.produce(topic, value=f"hello {i}".encode(), on_delivery=report)
    assert producer.flush(60) == 0, "records still undelivered after 60s"
    assert not errors, errors
    assert sorted(delivered) == [(0, i) for i in range(10)], delivered

    # As in the README: a consumer group with the broker's default settings (so the
    # first rebalance waits group.initial.rebalance.delay.ms = 3 s).
    consumer = Consumer(
        {
            "bootstrap.servers": strom.bootstrap,
            "group.id": f"readers-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        md = consumer.list_topics(topic, timeout=10)
        assert list(md.topics[topic].partitions) == [0], "auto-created with num.partitions=1"
        consumer.subscribe([topic])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
        assert values == [f"hello {i}".encode() for i in range(10)]
    finally:
        consumer.close()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.mark.timeout(MAKE_RUN_READY_TIMEOUT_S + 60)
def test_make_run_from_a_fresh_clone_installs_the_runtime_only(tmp_path: Path) -> None:
    clone = tmp_path / "strom"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    port, controller_port, metrics_port = free_port(), free_port(), free_port()
    environ = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "VIRTUAL_ENV") and not key.startswith("STROM_")
    }
    environ |= {
        "STROM_LISTENERS": f"PLAINTEXT://localhost:{port},CONTROLLER://localhost:{controller_port}",
        "STROM_CONTROLLER_QUORUM_VOTERS": f"0@localhost:{controller_port}",
        "STROM_LOG_DIR": str(tmp_path / "strom-logs"),
        "STROM_METRICS_LISTENER": f"http://127.0.0.1:{metrics_port}",
    }
    output = tmp_path / "make-run.out"
    with output.open("wb") as out:
        make = subprocess.Popen(
            ["make", "run"],
            cwd=clone,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(
            lambda: _ready(f"http://127.0.0.1:{metrics_port}/readyz") or make.poll() is not None,
            timeout=MAKE_RUN_READY_TIMEOUT_S,
            what=lambda: f"make run serving; its output:\n{output.read_text()[-4000:]}",
        )
        assert make.poll() is None, output.read_text()[-4000:]
        printed = output.read_text()
        assert "make kafka-tools puts them in .venv/bin" in printed
        assert "Strom's tools (strom-topics" in printed and "make tools" in printed
        assert "strom-server config/server.properties" in printed
        bin_dir = clone / ".venv" / "bin"
        for tool in ("pytest", "mypy", "ruff", "lint-imports"):
            assert not (bin_dir / tool).exists(), f"make run installed {tool}"
        assert (bin_dir / "strom-server").exists()
        assert (bin_dir / "kafka-server-start.sh").exists()
        installed = subprocess.run(
            [str(bin_dir / "python"), "-m", "pip", "list", "--format=freeze"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.lower()
        for package in ("pytest", "mypy", "ruff", "confluent-kafka", "kafka-python", "aiokafka"):
            assert f"{package}==" not in installed.replace("_", "-"), package
        assert "aiohttp==" in installed and "kio==" in installed
    finally:
        # make and the broker it started: this test's own process group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(make.pid, signal.SIGTERM)
        try:
            make.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(make.pid, signal.SIGKILL)
            make.wait(10)
