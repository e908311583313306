"""SP1: how fast the clickstream pipeline (spark-on-k8s/jobs/clickstream.py) consumes its
input from each broker, in records per second.

Each side's turn (first ``sp1_rounds`` rounds): a fresh single broker (as P1's), the
``page-views`` topic (``sp1_partitions`` partitions) and the output topic created, then
``sp1_records`` page views (strom_spark.events, one fixed seed: the same records on both
sides) produced at once with confluent-kafka (acks=all, idempotent). Then one
``strom-spark-submit`` of the pipeline on a local master, ``--trigger available-now`` with
``--max-offsets-per-trigger``, so that it reads the backlog in several micro-batches and
stops; its ``--progress-file`` gives each batch's input rows and duration.

SP1 = the rows of the counted batches over their summed ``durationMs.triggerExecution``
(the whole micro-batch: offset lookup, fetch, parse, aggregate, write the changed windows
to the output topic, commit), that is their rows per second weighted by their rows, not a
mean of each batch's processedRowsPerSecond (which would let a short batch count as much as
a long one). Left out:

- the first batch with input: it carries the warm-up (JIT, the Kafka consumer's
  connections and metadata, code generation, the state store's creation), 4-6 times a
  later batch's time on this machine;
- a tail batch that read less than half of the largest batch: Spark splits
  maxOffsetsPerTrigger over the partitions rounding down, so the backlog can end with a
  batch of a few rows, which is all fixed cost (~0.5 s for 9 rows in one run);
- batches with no input: available-now ends with a no-data batch that only moves the
  watermark.

JVM and Spark start-up are outside every batch, so they never count.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from strom_bench import brokers, java_tools, process_groups
from strom_bench.workloads import Turn, progress

INPUT_TOPIC = "page-views"
OUTPUT_TOPIC = "page-view-counts"
QUERY = "topic"  # clickstream.py's query writing to the output topic
JOB = Path(__file__).resolve().parents[2] / "spark-on-k8s" / "jobs" / "clickstream.py"
SEED = 16
START_MS = 1_700_000_000_000
PRODUCE_TIMEOUT_S = 120.0
ADMIN_TIMEOUT_S = 60.0
SPARK_TIMEOUT_S = 900.0
# Spark on a local master sized for this machine, as the e2e runs: two cores, no UI, few
# shuffle partitions (a state store per partition costs more than the work at this size)
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "1g",
}
SPARK_MASTER = "local[2]"


class PipelineFailed(RuntimeError):
    """The Spark job failed, ran over its time, or did not read the whole input."""


@dataclass(frozen=True)
class PipelineThroughput:
    """What the counted micro-batches read and how long they took."""

    records: int  # input rows of the counted batches
    seconds: float  # their summed triggerExecution
    batches: int  # batches counted
    batch_seconds: tuple[float, ...]  # each counted batch's triggerExecution, in order
    total_records: int  # input rows of every batch of the query, the first included
    first_batch_s: float  # the left-out first batch's triggerExecution

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds


def pipeline_throughput(
    progress_events: Iterable[Mapping[str, Any]], query: str = QUERY
) -> PipelineThroughput:
    """SP1 from a job's --progress-file lines (see the module): the batches of `query` that
    read rows, without the first and a short tail; ValueError if none is left or one has
    no duration."""
    batches = sorted(
        (event for event in progress_events if event.get("name", event.get("query")) == query),
        key=lambda event: int(event["batchId"]),
    )
    with_input = [event for event in batches if int(event.get("numInputRows", 0)) > 0]
    if len(with_input) < 2:
        raise ValueError(
            f"query {query!r} read rows in {len(with_input)} micro-batch(es): need at least 2 "
            "(the first is warm-up): lower --max-offsets-per-trigger or produce more"
        )

    def seconds(event: Mapping[str, Any]) -> float:
        duration = event.get("durationMs", {}).get("triggerExecution")
        if duration is None:
            raise ValueError(f"batch {event['batchId']} has no durationMs.triggerExecution")
        return float(duration) / 1000.0

    largest = max(int(event["numInputRows"]) for event in with_input)
    counted = [event for event in with_input[1:] if 2 * int(event["numInputRows"]) >= largest]
    if not counted:
        raise ValueError(f"query {query!r} has no full micro-batch after the first")
    batch_seconds = tuple(seconds(event) for event in counted)
    if sum(batch_seconds) <= 0:
        raise ValueError("the counted micro-batches took no time")
    return PipelineThroughput(
        records=sum(int(event["numInputRows"]) for event in counted),
        seconds=sum(batch_seconds),
        batches=len(counted),
        batch_seconds=batch_seconds,
        total_records=sum(int(event["numInputRows"]) for event in with_input),
        first_batch_s=seconds(with_input[0]),
    )


@cache
def page_view_records(count: int, seed: int = SEED) -> tuple[tuple[bytes, bytes], ...]:
    """(key, value) of `count` page views, the same on every call (made once per run)."""
    from strom_spark.events import Traffic, page_views

    # a busy site: 500 views/s of event time over 200 pages and 20,000 users, 2% of the
    # views up to 45 s late (the pipeline's default watermark is 30 s: some are dropped)
    traffic = Traffic(
        events_per_second=500.0,
        users=20_000,
        pages=200,
        late_fraction=0.02,
        lateness_ms=(0, 45_000),
    )
    return tuple(
        (view.key(), view.to_json()) for view in page_views(seed, count, START_MS, traffic)
    )


def create_topics(bootstrap: str, partitions: int) -> None:
    """The input topic, and the output topic compacted as the pipeline means it to be."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(INPUT_TOPIC, partitions, 1),
        NewTopic(OUTPUT_TOPIC, partitions, 1, config={"cleanup.policy": "compact"}),
    ]
    try:
        for future in admin.create_topics(topics, request_timeout=ADMIN_TIMEOUT_S).values():
            future.result(ADMIN_TIMEOUT_S)
    except KafkaException as e:
        raise PipelineFailed(f"creating the topics failed: {e}") from e


def produce(bootstrap: str, records: Sequence[tuple[bytes, bytes]]) -> None:
    """Every record to the input topic, acks=all and idempotent; PipelineFailed on any
    delivery error or if the producer has not delivered all within PRODUCE_TIMEOUT_S."""
    from confluent_kafka import KafkaError, Message, Producer

    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    deadline = time.monotonic() + PRODUCE_TIMEOUT_S
    for key, value in records:
        while True:
            try:
                producer.produce(INPUT_TOPIC, value, key, on_delivery=delivered)
                break
            except BufferError:  # the client's queue is full: let deliveries drain it
                if time.monotonic() >= deadline:
                    raise PipelineFailed("producing page views timed out") from None
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(max(deadline - time.monotonic(), 1.0))
    if remaining or failures:
        raise PipelineFailed(f"{remaining} page views undelivered, errors: {failures[:3]}")


def submit_argv(bootstrap: str, work_dir: Path, max_offsets_per_trigger: int) -> list[str]:
    """strom-spark-submit (as this Python's module: the venv's pyspark and the connector
    jars of `make spark-jars`) of clickstream.py, reading the backlog and stopping."""
    confs = [part for key, value in SPARK_CONF.items() for part in ("--conf", f"{key}={value}")]
    return [
        sys.executable,
        "-c",
        "from strom_spark.submit import main; main()",
        *("--master", SPARK_MASTER),
        *confs,
        str(JOB),
        *("--bootstrap-servers", bootstrap),
        *("--input-topic", INPUT_TOPIC, "--output-topic", OUTPUT_TOPIC),
        *("--checkpoint-dir", str(work_dir / "checkpoint")),
        *("--trigger", "available-now"),
        *("--max-offsets-per-trigger", str(max_offsets_per_trigger)),
        *("--progress-file", str(progress_path(work_dir))),
    ]


def progress_path(work_dir: Path) -> Path:
    return work_dir / "progress.jsonl"


def read_progress(path: Path) -> list[dict[str, Any]]:
    import json

    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_pipeline(
    groups: process_groups.ProcessGroups,
    broker: brokers.Broker,
    work_dir: Path,
    max_offsets_per_trigger: int,
    expected_records: int,
) -> PipelineThroughput:
    """One run of the pipeline over the topic's backlog; its throughput. PipelineFailed if
    the job fails, outlives SPARK_TIMEOUT_S, or read other than `expected_records` rows."""
    log = work_dir / "spark.log"
    proc = groups.spawn(
        submit_argv(broker.bootstrap, work_dir, max_offsets_per_trigger), stdout=log
    )
    rc = groups.wait(proc, SPARK_TIMEOUT_S, alive=[broker.process])
    if rc != 0:
        reason = f"ran over {SPARK_TIMEOUT_S:.0f}s" if rc is None else f"exited with {rc}"
        raise PipelineFailed(f"the Spark job {reason}\n{process_groups.log_tail(log)}")
    try:
        result = pipeline_throughput(read_progress(progress_path(work_dir)))
    except ValueError as e:
        raise PipelineFailed(f"{e}\n{process_groups.log_tail(log)}") from e
    if result.total_records != expected_records:
        raise PipelineFailed(
            f"the pipeline read {result.total_records:,} rows, not the {expected_records:,} "
            "produced (progress lost, or batches beyond spark.sql.streaming."
            "numRecentProgressUpdates?)"
        )
    return result


def run_sp1(turn: Turn) -> None:
    """SP1 on a fresh broker of this side (see the module), in the plan's SP1 rounds."""
    plan = turn.plan
    if turn.round_no > plan.sp1_rounds:
        return
    broker = turn.new_broker("-sp1")
    tools = java_tools.JavaTools(turn.groups, broker.work_dir / "tools")
    try:
        records = page_view_records(plan.sp1_records)
        broker.start()
        broker.wait_ready(tools)
        create_topics(broker.bootstrap, plan.sp1_partitions)
        started = time.monotonic()
        produce(broker.bootstrap, records)
        produced_s = time.monotonic() - started
        started = time.monotonic()
        result = run_pipeline(
            turn.groups,
            broker,
            broker.work_dir / "spark",
            plan.sp1_max_offsets_per_trigger,
            len(records),
        )
        turn.record("SP1", result.records_per_s, "records/s")
        progress(
            f"{turn.label} SP1: {result.records:,} rows in {result.batches} micro-batches, "
            f"{result.seconds:.1f} s (each {', '.join(f'{s:.1f}' for s in result.batch_seconds)}"
            f"; the first, left out: {result.first_batch_s:.1f} s); "
            f"produced in {produced_s:.1f} s; spark-submit ran {time.monotonic() - started:.0f} s"
        )
    except (
        brokers.BrokerFailed,
        process_groups.BrokerExited,
        java_tools.ToolFailed,
        PipelineFailed,
    ) as e:
        turn.errors.append(f"{turn.label} SP1: {e}\n{broker.log_excerpt()}")
        progress(f"{turn.label} SP1 FAILED: {str(e).splitlines()[0]}")
    finally:
        broker.stop()
