"""Enrich: page views joined with user profiles (a compacted topic read as a table),
filtered by plan, from a Kafka topic to a Kafka topic. A PySpark Structured Streaming job,
run with spark-submit:

    strom-spark-submit spark-on-k8s/jobs/enrich.py \\
        --bootstrap-servers localhost:9092 --checkpoint-dir /tmp/enrich --plan paid

Input: the ``page-views`` records of ``strom-spark-demo page-views`` (JSON values with
``event_id``, ``user_id``, ``page`` and ``ts``; records that are not such JSON are
skipped) and the ``user-profiles`` topic of ``strom-spark-demo profiles``: key the user
id, value ``{"user_id", "country", "plan"}``, or a tombstone (no value) when the user is
deleted. Output: for each view whose user has a profile (with ``--plan``, if given), a
record keyed by the view's ``event_id``, valued
``{"event_id", "user_id", "page", "ts", "country", "plan"}``.

The table as of the batch: every micro-batch of views reads the profiles topic anew,
from its start to its end at that moment, keeps the latest record of each key (the
highest offset: a key always goes to one partition, so its offsets are its history) and
drops the deleted ones. A view therefore sees the profile its user had when its batch
ran, not when the view happened: a profile produced before a batch starts is seen by
all of that batch's views. Reading the whole topic each batch is what a compacted topic
is for (about one record per live user); the stream's offsets and progress are in the
query's checkpoint under ``--checkpoint-dir``, so a restarted job resumes after the last
committed batch.

Delivery: Spark's Kafka sink is at-least-once. A batch that crashed before its commit is
run again from the same view offsets after the restart and sends its views again, so the
output topic may hold an event id twice. It is made exact by its key: read it as a table
(the latest record per ``event_id``; consumers dedupe on read, or the topic is
compacted). A re-run reads the profiles as they are then: its records, the later ones,
carry the newer profile; a view whose user was deleted (or left ``--plan``) between the
crash and the re-run keeps the record the first run sent.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType
from strom_spark import streaming

PROFILE = StructType(
    [
        StructField("user_id", StringType()),
        StructField("country", StringType()),
        StructField("plan", StringType()),
    ]
)


def _parser() -> argparse.ArgumentParser:
    parser = streaming.job_parser("enrich.py", (__doc__ or "").split("\n")[0])
    parser.add_argument("--profiles-topic", default="user-profiles")
    parser.add_argument("--output-topic", default="page-views-enriched")
    parser.add_argument("--plan", help="keep only the views of users on this plan (e.g. paid)")
    return parser


def profile_table(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    """The profiles topic as it is now, as a table: (user_id, country, plan) per live user."""
    records = (
        spark.read.format("kafka")
        .options(**streaming.kafka_options(args))
        .option("subscribe", args.profiles_topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    # the struct's order is offset first: its max is the key's latest record, tombstone or not
    latest = (
        records.where(F.col("key").isNotNull())
        .groupBy(F.col("key").cast("string").alias("user_id"))
        .agg(F.max(F.struct("offset", "value")).alias("latest"))
    )
    profiles = latest.where(F.col("latest.value").isNotNull()).select(
        "user_id", F.from_json(F.col("latest.value").cast("string"), PROFILE).alias("p")
    )
    table = profiles.where(F.col("p.plan").isNotNull()).select(
        "user_id", F.col("p.country").alias("country"), F.col("p.plan").alias("plan")
    )
    if args.plan:
        table = table.where(F.col("plan") == args.plan)
    return table


def enrich(views: DataFrame, table: DataFrame) -> DataFrame:
    """The output records: the views of users in the table, keyed by event id."""
    joined = views.join(table, "user_id")
    return joined.select(
        F.col("event_id").alias("key"),
        F.to_json(F.struct("event_id", "user_id", "page", "ts", "country", "plan")).alias("value"),
    )


def _write_batch(args: argparse.Namespace) -> Callable[[DataFrame, int], None]:
    def write(views: DataFrame, _batch_id: int) -> None:
        records = enrich(views, profile_table(views.sparkSession, args))
        (
            records.write.format("kafka")
            .option("kafka.acks", "all")
            .options(**streaming.kafka_options(args))
            .option("topic", args.output_topic)
            .save()
        )

    return write


def main(argv: Sequence[str] | None = None) -> int:
    args = streaming.parse_job_args(_parser(), argv)
    spark = streaming.session("strom-enrich")
    views = streaming.page_views(spark, args).select("event_id", "user_id", "page", "ts")
    query = streaming.start(views.writeStream.foreachBatch(_write_batch(args)), args, "enrich")
    return streaming.run(spark, [query], args.progress_file)


if __name__ == "__main__":
    sys.exit(main())
