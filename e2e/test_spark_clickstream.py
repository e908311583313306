"""The clickstream pipeline (spark-on-k8s/jobs/clickstream.py) run with spark-submit on a
local master against a 3-broker Strom cluster and against Apache Kafka: the per-page,
per-window counts it writes are exactly those a plain Python computation gives over the
same input, late views included or dropped per the watermark, and the two brokers'
outputs are byte for byte the same.

The input comes in phases, each read by the running query before the next is produced,
so that which views are late does not depend on where Spark cuts its micro-batches
(strom_spark.windows refuses an input where it would). On Strom a broker is SIGKILLed
while the query reads, and later the Spark job itself is SIGKILLed and started again
from its checkpoint. (Spark 4.1.1's Kafka source may itself die around a broker's loss
and return: its offset lookup fails with "Timed out waiting for a node assignment. Call:
listOffsets" after default.api.timeout.ms, then the query's progress report fails with a
NullPointerException in KafkaMicroBatchStream.metrics; Strom's Metadata was checked to
name only listed brokers as leaders meanwhile. The test restarts the job from its
checkpoint then, as a SparkJob's OnFailure policy does, up to MAX_RESTARTS times.)

The output stays exact because the topic output is read as a table (latest count per
window key: a batch re-sent after the crash carries the same counts) and the Parquet
output is read through the file sink's log (_spark_metadata), which lists only the files
of committed batches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import spark_runs
from apache_kafka import ApacheKafka
from confluent_kafka.admin import AdminClient, NewTopic
from group_checks import log_end_offsets
from strom_cluster import StromCluster
from strom_spark.events import PageView, Traffic, page_views
from strom_spark.windows import Expected, WindowCount, expected_counts

INPUT = "page-views"
OUTPUT = "page-view-counts"
PARTITIONS = 3
WINDOW_MS = 10_000
WATERMARK_MS = 20_000
PHASE_MS = 15_000  # shorter than the watermark delay: a phase's own views are never late
RATE = 40  # views per second of event time
T0 = 1_700_000_000_000
TIMEOUT_S = 240.0
# a SparkJob's onFailureRetries: the job may die more than once around a broker's loss and
# return (Spark's offset lookups fail until the metadata settles), more on a loaded machine
MAX_RESTARTS = 8


def phases() -> list[list[PageView]]:
    """Four phases of skewed traffic with a tenth of the views a few seconds late (still
    counted), from the second on twenty views a minute late (dropped), and a closing view
    two minutes on that moves the watermark past every earlier window."""
    traffic = Traffic(RATE, users=300, pages=8, late_fraction=0.1, lateness_ms=(0, 4_000))
    out = []
    for number in range(4):
        start = T0 + number * PHASE_MS
        views = [v for v in page_views(100 + number, 2 * RATE * 15, start, traffic)]
        views = [v for v in views if v.ts < start + PHASE_MS]
        if number:
            views += [
                PageView(f"late-{number}-{n}", f"u{n:04d}", "/page/1", "direct", start - 60_000 - n)
                for n in range(20)
            ]
        out.append(views)
    out.append([PageView("closing", "u0000", "/page/closing", "direct", T0 + 6 * 60_000)])
    return out


def expected() -> Expected:
    return expected_counts(phases(), WINDOW_MS, WATERMARK_MS)


def as_records(views: Sequence[PageView]) -> list[tuple[bytes, bytes]]:
    return [(view.key(), view.to_json()) for view in views]


def create_topics(bootstrap: str, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(INPUT, PARTITIONS, replication),
        NewTopic(OUTPUT, PARTITIONS, replication, config={"cleanup.policy": "compact"}),
    ]
    for future in admin.create_topics(topics, request_timeout=30).values():
        future.result(60)


def job_args(work: Path, bootstrap: str) -> list[str]:
    return [
        *("--bootstrap-servers", bootstrap),
        *("--input-topic", INPUT, "--output-topic", OUTPUT),
        *("--checkpoint-dir", str(work / "checkpoint")),
        *("--parquet-path", str(work / "parquet")),
        *("--window", "10 seconds", "--watermark", "20 seconds", "--trigger", "1 second"),
        # Spark's offset lookups give up on a dead leader after this (60 s by default)
        *("--kafka-option", "default.api.timeout.ms=30000"),
        *("--kafka-option", "request.timeout.ms=20000"),
    ]


def run_phases(
    work: Path,
    bootstrap: str,
    faults: dict[int, Callable[[spark_runs.SparkRun], spark_runs.SparkRun]],
) -> int:
    """Produce each phase and wait until both queries have committed it; `faults[n]` runs
    after phase n is produced and returns the run that goes on (a restarted one, say).
    A job that dies is started again from its checkpoint, as a SparkJob's OnFailure
    policy does; returns how many times."""
    checkpoints = [work / "checkpoint" / "topic", work / "checkpoint" / "parquet"]

    def start() -> spark_runs.SparkRun:
        return spark_runs.SparkRun("clickstream.py", job_args(work, bootstrap), work / "spark.log")

    run = start()
    restarts = 0
    try:
        all_phases = phases()
        for number, views in enumerate(all_phases, start=1):
            spark_runs.produce(bootstrap, INPUT, as_records(views))
            ends = log_end_offsets(bootstrap, INPUT, PARTITIONS)
            if number in faults:
                run = faults[number](run)
            closing = number == len(all_phases)
            for checkpoint in checkpoints:
                while True:
                    try:
                        spark_runs.wait_until_read(
                            run,
                            checkpoint,
                            INPUT,
                            ends,
                            # the last phase: until the no-data batch has run with the final
                            # watermark (the one that writes the closed windows to Parquet)
                            watermark=expected().watermark if closing else None,
                            timeout=TIMEOUT_S,
                        )
                        break
                    except spark_runs.JobEnded as ended:
                        restarts += 1
                        print(f"phase {number}: the job died, restart {restarts}:\n{ended}")
                        assert restarts <= MAX_RESTARTS, f"the job died {restarts} times"
                        run = start()
    finally:
        run.kill()
    return restarts


def topic_output(bootstrap: str) -> dict[bytes, bytes]:
    return spark_runs.read_table(bootstrap, OUTPUT, PARTITIONS)


def parquet_output(path: Path) -> list[WindowCount]:
    """The rows of the files the sink's log lists (a crashed batch's files are not)."""
    files: set[str] = set()
    for log in (path / "_spark_metadata").iterdir():
        if log.name.startswith("."):
            continue
        for line in log.read_text().splitlines()[1:]:
            entry = json.loads(line)
            if entry.get("action", "add") == "add":
                files.add(entry["path"].removeprefix("file://"))
    rows: list[WindowCount] = []
    for file in sorted(files):
        table = pq.read_table(file).to_pylist()
        rows += [
            WindowCount(
                row["page"],
                int(row["window_start"].timestamp() * 1000),
                int(row["window_end"].timestamp() * 1000),
                row["count"],
            )
            for row in table
        ]
    return sorted(rows)


@pytest.fixture(scope="module")
def reference() -> Expected:
    got = expected()
    assert got.dropped == 60 and len(got.counts) > 30
    return got


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[StromCluster]:
    made = StromCluster(tmp_path / "cluster")
    made.start()
    try:
        yield made
    finally:
        made.stop()


def test_clickstream_on_strom_is_exact_through_a_broker_kill_and_a_job_crash(
    cluster: StromCluster, tmp_path: Path, reference: Expected
) -> None:
    create_topics(cluster.bootstrap, 3)
    work = tmp_path / "job"

    def kill_broker(run: spark_runs.SparkRun) -> spark_runs.SparkRun:
        cluster.nodes[1].kill()  # while the query reads phase 2 and writes its counts
        return run

    def crash_and_resume(run: spark_runs.SparkRun) -> spark_runs.SparkRun:
        # once a batch reading phase 3 is planned, kill the job before or while it runs
        ends = log_end_offsets(cluster.bootstrap, INPUT, PARTITIONS)
        spark_runs.wait_until_read(
            run, work / "checkpoint" / "topic", INPUT, ends, committed=False, timeout=TIMEOUT_S
        )
        run.kill()
        cluster.nodes[1].start()
        return spark_runs.SparkRun(
            "clickstream.py", job_args(work, cluster.bootstrap), work / "spark.log"
        )

    restarts = run_phases(work, cluster.bootstrap, {2: kill_broker, 3: crash_and_resume})
    print(f"the job was restarted {restarts} time(s) after it died")

    assert topic_output(cluster.bootstrap) == dict(window.record() for window in reference.counts)
    assert parquet_output(work / "parquet") == list(reference.final())
    assert len(reference.final()) == len(reference.counts) - 1  # all but the closing one


def test_clickstream_on_apache_kafka_gives_the_same_output(
    kafka: ApacheKafka, tmp_path: Path, reference: Expected
) -> None:
    create_topics(kafka.bootstrap, 1)
    assert run_phases(tmp_path / "job", kafka.bootstrap, {}) == 0
    assert topic_output(kafka.bootstrap) == dict(window.record() for window in reference.counts)
    assert parquet_output(tmp_path / "job" / "parquet") == list(reference.final())
