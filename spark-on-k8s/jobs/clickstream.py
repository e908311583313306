"""Clickstream: page views per page in event-time windows, from a Kafka topic to a topic
and to Parquet files. A PySpark Structured Streaming job, run with spark-submit:

    strom-spark-submit spark-on-k8s/jobs/clickstream.py \\
        --bootstrap-servers localhost:9092 --checkpoint-dir /tmp/clickstream \\
        --parquet-path /tmp/clickstream-parquet

Input: the ``page-views`` records of ``strom-spark-demo page-views`` (JSON values with
``page`` and ``ts``, the event time in epoch milliseconds). Records that are not such
JSON are skipped (counted in the query's progress as input, never in a window).

Windows are tumbling (``--window``); the watermark (``--watermark``) is the largest event
time seen in earlier micro-batches less the delay: a view whose window ended at or
before it is late beyond repair and dropped, as Spark drops it.

Two queries over the same input, each with its own checkpoint under ``--checkpoint-dir``,
so that a restarted job resumes where it stopped (offsets and window state):

- the output topic, in update mode: every micro-batch sends the windows it changed, keyed
  ``<page>|<window start ms>`` with the running count. Spark's Kafka sink is
  at-least-once (a batch re-run after a crash sends its records again), so the topic is
  meant to be compacted: the latest record of a key is that window's count, and a record
  sent twice carries the same count both times (a re-run batch starts from the same
  checkpointed state and reads the same offsets). Read it as a table, latest per key.
- Parquet files, in append mode: a window is written once, when the watermark passes its
  end (final), and the file sink's own log makes it exactly-once across restarts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from strom_spark import streaming


def _parser() -> argparse.ArgumentParser:
    parser = streaming.job_parser("clickstream.py", (__doc__ or "").split("\n")[0])
    parser.add_argument("--output-topic", default="page-view-counts")
    parser.add_argument("--parquet-path", help="also write final windows as Parquet here")
    parser.add_argument("--window", default="1 minute", help="tumbling window length")
    parser.add_argument("--watermark", default="30 seconds", help="how late a view may be")
    return parser


def counts_per_window(views: DataFrame, window: str, watermark: str) -> DataFrame:
    return (
        views.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window).alias("window"), "page")
        .count()
    )


def to_topic(counts: DataFrame, args: argparse.Namespace) -> StreamingQuery:
    start_ms = F.unix_millis(F.col("window.start"))
    end_ms = F.unix_millis(F.col("window.end"))
    records = counts.select(
        F.concat_ws("|", F.col("page"), start_ms.cast("string")).alias("key"),
        F.to_json(
            F.struct(
                F.col("page"),
                start_ms.alias("window_start"),
                end_ms.alias("window_end"),
                F.col("count"),
            )
        ).alias("value"),
    )
    writer = (
        records.writeStream.format("kafka")
        .outputMode("update")
        .option("kafka.acks", "all")
        .options(**streaming.kafka_options(args))
        .option("topic", args.output_topic)
    )
    return streaming.start(writer, args, "topic")


def to_parquet(counts: DataFrame, args: argparse.Namespace) -> StreamingQuery:
    rows = counts.select(
        "page",
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "count",
    )
    writer = rows.writeStream.format("parquet").outputMode("append")
    return streaming.start(writer.option("path", args.parquet_path), args, "parquet")


def main(argv: Sequence[str] | None = None) -> int:
    args = streaming.parse_job_args(_parser(), argv)
    spark = streaming.session("strom-clickstream")
    views = streaming.page_views(spark, args).select("page", "event_time")
    counts = counts_per_window(views, args.window, args.watermark)
    queries = [to_topic(counts, args)]
    if args.parquet_path:
        queries.append(to_parquet(counts, args))
    return streaming.run(spark, queries, args.progress_file)


if __name__ == "__main__":
    sys.exit(main())
