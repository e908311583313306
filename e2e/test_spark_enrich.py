"""The enrich pipeline (spark-on-k8s/jobs/enrich.py) run with spark-submit on a local
master against a Strom broker and against Apache Kafka: the views it writes are exactly
those a plain Python computation gives (each view joined with its user's latest profile
on the compacted profiles topic, deleted users and other plans left out), and the two
brokers' outputs are byte for byte the same.

The profiles come from ``strom-spark-demo profiles``: a profile per user, then new plans
for some (so a first-seen profile would be the wrong one), then tombstones for others,
all before the views; so every micro-batch sees the same, final table. The output is read
as the pipeline's docstring says to read it: the latest record per event id.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import spark_runs
from apache_kafka import ApacheKafka
from confluent_kafka.admin import AdminClient, NewTopic
from group_checks import log_end_offsets
from strom_process import StromProcess
from strom_spark.events import PageView, Traffic, page_views
from strom_spark.profiles import (
    ProfileChange,
    enriched_views,
    latest_profiles,
    profile_changes,
)

VIEWS = "page-views"
PROFILES = "user-profiles"
OUTPUT = "page-views-enriched"
PARTITIONS = 3
PLAN = "paid"
# profiles for u0000-u0199; views from u0000-u0249, so some users never had one
PROFILED_USERS = 200
VIEWED_USERS = 250
PROFILE_SEED = 11
UPDATES = 0.2
TOMBSTONES = 0.1
T0 = 1_700_000_000_000
TIMEOUT_S = 240.0


def views() -> list[PageView]:
    return list(page_views(21, 1500, T0, Traffic(50, users=VIEWED_USERS, pages=10)))


def changes() -> list[ProfileChange]:
    return list(profile_changes(PROFILE_SEED, PROFILED_USERS, UPDATES, TOMBSTONES))


def expected_output() -> dict[bytes, bytes]:
    enriched = enriched_views(views(), latest_profiles(changes()), PLAN)
    return {view.key(): view.to_json() for view in enriched.values()}


@pytest.fixture(scope="module")
def outputs() -> dict[str, dict[bytes, bytes]]:
    """Each broker's output, so that the last test can compare them."""
    return {}


def test_the_input_exercises_updates_deletions_and_the_plan_filter() -> None:
    history = changes()
    first_seen = latest_profiles(c for c in history[:PROFILED_USERS])
    expected = expected_output()
    assert len(expected) > 150
    # a first-seen profile table gives another output: the updates matter
    first_output = enriched_views(views(), first_seen, PLAN)
    assert {v.key() for v in first_output.values()} != set(expected)
    # without the tombstones too
    undeleted = latest_profiles(c for c in history if c.profile is not None)
    assert set(enriched_views(views(), undeleted, PLAN)) > {k.decode() for k in expected}
    # and without the filter
    assert len(enriched_views(views(), latest_profiles(history))) > len(expected)


def run_enrich(bootstrap: str, replication: int, work: Path) -> dict[bytes, bytes]:
    """Topics, then the profiles (the demo), then the views, then one available-now run;
    the output read as a table."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(VIEWS, PARTITIONS, replication),
        NewTopic(PROFILES, PARTITIONS, replication, config={"cleanup.policy": "compact"}),
        NewTopic(OUTPUT, PARTITIONS, replication),
    ]
    for future in admin.create_topics(topics, request_timeout=30).values():
        future.result(60)

    demo = subprocess.run(
        [
            *(sys.executable, "-c", "from strom_spark.demo import main; main()", "profiles"),
            *("--bootstrap-server", bootstrap, "--topic", PROFILES),
            *("--users", str(PROFILED_USERS), "--seed", str(PROFILE_SEED)),
            *("--updates", str(UPDATES), "--tombstones", str(TOMBSTONES)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stderr
    assert f"sent {len(changes())} profile records to {PROFILES}" in demo.stdout

    input_views = views()
    records = [(view.key(), view.to_json()) for view in input_views]
    # not a page view: skipped by the job
    records.append((b"u0001", b"not json"))
    spark_runs.produce(bootstrap, VIEWS, records)
    ends = log_end_offsets(bootstrap, VIEWS, PARTITIONS)

    progress = work / "progress.jsonl"
    job_args = [
        *("--bootstrap-servers", bootstrap, "--plan", PLAN),
        *("--input-topic", VIEWS, "--profiles-topic", PROFILES, "--output-topic", OUTPUT),
        *("--checkpoint-dir", str(work / "checkpoint"), "--progress-file", str(progress)),
        *("--trigger", "available-now", "--max-offsets-per-trigger", "600"),
    ]
    spark_runs.SparkRun("enrich.py", job_args, work / "spark.log").wait(TIMEOUT_S)

    # every view read, over more than one micro-batch, and committed in the checkpoint (a
    # restarted job starts after them)
    batches = spark_runs.read_progress(progress)
    assert len(batches) > 1
    assert sum(int(str(b["numInputRows"])) for b in batches) == len(records)
    assert spark_runs.has_read(work / "checkpoint" / "enrich", VIEWS, ends)
    return spark_runs.read_table(bootstrap, OUTPUT, PARTITIONS)


def test_enrich_on_strom_is_exact(
    strom: StromProcess, tmp_path: Path, outputs: dict[str, dict[bytes, bytes]]
) -> None:
    outputs["strom"] = run_enrich(strom.bootstrap, 1, tmp_path)
    assert outputs["strom"] == expected_output()


def test_enrich_on_apache_kafka_gives_the_same_output(
    kafka: ApacheKafka, tmp_path: Path, outputs: dict[str, dict[bytes, bytes]]
) -> None:
    outputs["kafka"] = run_enrich(kafka.bootstrap, 1, tmp_path)
    assert outputs["kafka"] == expected_output()
    if "strom" in outputs:
        assert outputs["kafka"] == outputs["strom"]
