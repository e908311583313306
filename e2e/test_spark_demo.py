"""strom-spark-demo produces the generator's page views to a real broker: every event,
keyed by user, the same stream for the same seed."""

from __future__ import annotations

import subprocess
import sys

import e2e_records
from strom_process import StromProcess
from strom_spark.events import PageView, Traffic, page_views


def test_the_demo_sends_the_seeded_stream(strom: StromProcess, topic: str) -> None:
    command = [
        sys.executable,
        "-c",
        "from strom_spark.demo import main; main()",
        "page-views",
        "--bootstrap-server",
        strom.bootstrap,
        "--topic",
        topic,
        "--count",
        "500",
        "--rate",
        "50",
        "--seed",
        "3",
        "--start-ms",
        "1700000000000",
        "--late-fraction",
        "0.1",
        "--max-lateness-s",
        "30",
        "--no-pacing",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"sent 500 page views to {topic}" in done.stdout

    expected = list(
        page_views(
            3, 500, 1_700_000_000_000, Traffic(50, late_fraction=0.1, lateness_ms=(0, 30_000))
        )
    )
    # the topic was created on first use with the broker's num.partitions=1: all of it
    records = e2e_records.read_partition(strom.bootstrap, topic)
    received = [PageView.from_json(value) for _, _, value in records if value is not None]
    assert all(key == PageView.from_json(value).key() for _, key, value in records if value)
    assert sorted(received, key=lambda v: v.event_id) == sorted(expected, key=lambda v: v.event_id)

    refused = subprocess.run(
        [
            *command[:3],
            "page-views",
            "--bootstrap-server",
            strom.bootstrap,
            "--count",
            "1",
            "--late-fraction",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0
    assert "late_fraction must be within [0, 1]" in refused.stderr
