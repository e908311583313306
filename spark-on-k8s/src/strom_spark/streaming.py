"""What the pipelines in spark-on-k8s/jobs share: their common options (the cluster's
address and Kafka client settings, the checkpoint, the trigger), the page-view stream
they read, how a query is started, and how the job waits for its queries.

A job is a script spark-submit runs; this module is installed with strom (the `spark`
extra) wherever the job's Python runs: this machine's venv, the Spark image.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter
from pyspark.sql.types import LongType, StringType, StructField, StructType

# the value of a page-views record (strom_spark.events.PageView)
PAGE_VIEW = StructType(
    [
        StructField("event_id", StringType()),
        StructField("user_id", StringType()),
        StructField("page", StringType()),
        StructField("referrer", StringType()),
        StructField("ts", LongType()),
    ]
)
EXIT_USAGE = 2


def job_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A job's parser with the options every pipeline takes; the job adds its own."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("STROM_BOOTSTRAP_SERVERS"),
        help="the cluster's bootstrap address (default: $STROM_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka client setting for every read and write (security, timeouts); repeat",
    )
    parser.add_argument("--input-topic", default="page-views")
    parser.add_argument(
        "--checkpoint-dir",
        default=os.environ.get("STROM_CHECKPOINT_DIR"),
        help="where the queries keep offsets and state (default: $STROM_CHECKPOINT_DIR)",
    )
    parser.add_argument(
        "--trigger",
        default="10 seconds",
        help="a micro-batch interval, or 'available-now' to process what is there and stop",
    )
    parser.add_argument("--starting-offsets", default="earliest", help="for a new checkpoint")
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument(
        "--progress-file", help="write each query's micro-batch progress here (JSON lines)"
    )
    return parser


def parse_job_args(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> argparse.Namespace:
    """The arguments, checked before Spark starts: a usage error ends the job with 2."""
    args = parser.parse_args(argv)
    if not args.bootstrap_servers or not args.checkpoint_dir:
        parser.exit(
            EXIT_USAGE,
            f"{parser.prog}: --bootstrap-servers and --checkpoint-dir are required "
            "(or STROM_BOOTSTRAP_SERVERS and STROM_CHECKPOINT_DIR)\n",
        )
    for setting in args.kafka_option:
        key, equals, _ = setting.partition("=")
        if not equals or not key:
            parser.exit(EXIT_USAGE, f"{parser.prog}: --kafka-option {setting!r} is not KEY=VALUE\n")
    return args


def kafka_options(args: argparse.Namespace) -> dict[str, str]:
    """The Kafka source's and sink's client settings (Spark's `kafka.` prefix)."""
    options = {"kafka.bootstrap.servers": args.bootstrap_servers}
    for setting in args.kafka_option:
        key, _, value = setting.partition("=")
        options[f"kafka.{key}"] = value
    return options


def session(app_name: str) -> SparkSession:
    # event-time windows in UTC whatever the machine's zone
    return (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def page_views(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    """The input topic's page views (event_id, user_id, page, referrer, ts ms, event_time);
    a record that is not such JSON is skipped (it counts as input in the progress)."""
    reader = (
        spark.readStream.format("kafka")
        .options(**kafka_options(args))
        .option("subscribe", args.input_topic)
        .option("startingOffsets", args.starting_offsets)
    )
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    parsed = reader.load().select(F.from_json(F.col("value").cast("string"), PAGE_VIEW).alias("v"))
    complete = (
        F.col("v.event_id").isNotNull()
        & F.col("v.user_id").isNotNull()
        & F.col("v.page").isNotNull()
        & F.col("v.ts").isNotNull()
    )
    return parsed.where(complete).select(
        "v.*", F.timestamp_millis(F.col("v.ts")).alias("event_time")
    )


def start(writer: DataStreamWriter, args: argparse.Namespace, name: str) -> StreamingQuery:
    """Start a query named `name`, checkpointed under --checkpoint-dir/<name>."""
    writer = writer.queryName(name).option(
        "checkpointLocation", str(Path(args.checkpoint_dir) / name)
    )
    if args.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.trigger)
    return writer.start()


def run(spark: SparkSession, queries: Sequence[StreamingQuery], progress_file: str | None) -> int:
    """Until every query has stopped (available-now) or one fails: a failed query fails
    the job, and a SparkJob's restartPolicy decides what follows."""
    try:
        while any(query.isActive for query in queries):
            spark.streams.awaitAnyTermination()
            spark.streams.resetTerminated()
    finally:
        if progress_file:
            with open(progress_file, "a") as out:
                for query in queries:
                    for progress in query.recentProgress:
                        out.write(json.dumps({"query": query.name, **json.loads(progress.json)}))
                        out.write("\n")
        spark.stop()
    return 0
