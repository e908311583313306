"""Running the pipelines of spark-on-k8s/jobs as a user does: strom-spark-submit with a
local master (pyspark from PyPI, the connector jars `make spark-jars` resolved), against
a broker's bootstrap address; and the records around them (produce the input, read the
output topic as a table, follow a query through its checkpoint).

A job run is a JVM: 20-30 s on this machine, most of it starting Spark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import e2e_records

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "spark-on-k8s" / "jobs"
RUN_TIMEOUT_S = 300.0
# small and quiet: two local cores (this machine's), no UI, few shuffle partitions (state
# stores per partition cost more than the work at these sizes)
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "768m",
}


def submit_command(job: str, args: Sequence[str], conf: dict[str, str] | None = None) -> list[str]:
    settings = {**LOCAL_CONF, **(conf or {})}
    confs = [part for key, value in settings.items() for part in ("--conf", f"{key}={value}")]
    return [
        sys.executable,
        "-c",
        "from strom_spark.submit import main; main()",
        "--master",
        "local[2]",
        *confs,
        str(JOBS / job),
        *args,
    ]


class JobEnded(AssertionError):
    """The job's process ended while a test waited for it to read something."""


class SparkRun:
    """One spark-submit of a job, in its own process group (killable as a whole)."""

    def __init__(self, job: str, args: Sequence[str], log_path: Path) -> None:
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                submit_command(job, args),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait(self, timeout: float = RUN_TIMEOUT_S) -> None:
        """Until the job ends; it must end with status 0."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"the Spark job ran over {timeout:.0f}s\n{self.log_tail()}"
            ) from None
        assert rc == 0, f"the Spark job exited with {rc}\n{self.log_tail()}"

    def kill(self) -> None:
        """SIGKILL the driver JVM and its Python workers: a crash, nothing flushed."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def log_tail(self, chars: int = 6000) -> str:
        """Why the job failed, first (Spark's ERROR lines and their causes, which its
        INFO chatter at the end buries), then the end of the log."""
        text = self.log_path.read_text(errors="replace")
        causes = [
            line
            for line in text.splitlines()
            if " ERROR " in line or line.startswith(("Caused by:", "java.", "org.apache."))
        ]
        return "\n".join(causes[:40]) + "\n--- the log's end ---\n" + text[-chars:]


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes, bytes]]) -> int:
    """Every (key, value), acks=all and idempotent; fails on any delivery error."""
    from confluent_kafka import KafkaError, Message, Producer

    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    sent = 0
    for key, value in records:
        producer.produce(topic, value, key, on_delivery=delivered)
        producer.poll(0)
        sent += 1
    remaining = producer.flush(60)
    assert remaining == 0 and not failures, f"{remaining} undelivered: {failures[:3]}"
    return sent


def read_table(bootstrap: str, topic: str, partitions: int) -> dict[bytes, bytes]:
    """A topic read as a table: the latest value of each key, across its partitions."""
    table: dict[bytes, bytes] = {}
    for partition in range(partitions):
        for _offset, key, value in e2e_records.read_partition(bootstrap, topic, partition):
            assert key is not None, f"a record without a key in {topic}-{partition}"
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
    return table


def read_progress(path: Path) -> list[dict[str, object]]:
    """A job's --progress-file: each query's micro-batch progress, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def batches(checkpoint: Path, *, committed: bool) -> list[tuple[int, int, dict[str, Any]]]:
    """(batch id, the batch's watermark ms, its end offsets per topic) of a query's
    checkpoint: batches planned (offsets/N written) or also committed (commits/N)."""
    out = []
    for path in sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name)):
        if committed and not (checkpoint / "commits" / path.name).exists():
            continue
        lines = path.read_text().splitlines()
        if len(lines) < 3:
            continue  # being written
        metadata = json.loads(lines[1])
        out.append((int(path.name), int(metadata["batchWatermarkMs"]), json.loads(lines[2])))
    return out


def has_read(checkpoint: Path, topic: str, ends: dict[int, int], *, committed: bool = True) -> bool:
    return any(
        all(int(offsets.get(topic, {}).get(str(p), -1)) >= end for p, end in ends.items())
        for _, _, offsets in batches(checkpoint, committed=committed)
    )


def wait_until_read(
    run: SparkRun,
    checkpoint: Path,
    topic: str,
    ends: dict[int, int],
    *,
    committed: bool = True,
    watermark: int | None = None,
    timeout: float = RUN_TIMEOUT_S,
) -> None:
    """Until a batch of the query has read every partition up to `ends` (and, if given,
    one has run with `watermark`: the no-data batch that closes windows)."""
    deadline = time.monotonic() + timeout

    def done() -> bool:
        if not has_read(checkpoint, topic, ends, committed=committed):
            return False
        marks = [mark for _, mark, _ in batches(checkpoint, committed=committed)]
        return watermark is None or watermark in marks

    while not done():
        if run.proc.poll() is not None:
            raise JobEnded(
                f"the job ended ({run.proc.returncode}) before reading {ends}\n{run.log_tail()}"
            )
        if time.monotonic() >= deadline:
            run.kill()
            raise AssertionError(
                f"{checkpoint} did not read {topic} to {ends} (watermark {watermark}) in "
                f"{timeout:.0f}s: {batches(checkpoint, committed=committed)[-2:]}\n"
                + run.log_tail()
            )
        time.sleep(0.2)
