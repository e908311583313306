"""What replication costs when nothing is produced: a 3-node Strom cluster with one topic
of many partitions at replication factor 3, idle, its followers fetching from its leaders.
`python -m strom_bench.idle_replication [--partitions 500] [--seconds 30]` (bench/ on
PYTHONPATH) prints, over the window: CPU seconds of the three processes, the Fetch
requests they answered, and the partitions those answers held (with fetch sessions,
KIP-227, an idle follower's fetches are answered with almost none).
Strom only (no Kafka side): a figure to compare Strom builds by, quoted in bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from strom_bench import brokers, clusters, process_groups

SEGMENT_BYTES = 1 << 26
READY_TIMEOUT_S = 180.0
TOPIC = "idle"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def metric_sum(metrics_port: int, name: str, label: str = "") -> float | None:
    """The sum of a metric's samples whose labels include `label`; None: no such metric
    (a build without it)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    pattern = rf"^{name}(\{{[^}}]*\}})? (\S+)$"
    values = [
        float(m.group(2))
        for m in re.finditer(pattern, text, re.MULTILINE)
        if label in (m.group(1) or "")
    ]
    return sum(values) if values else None


def wait_in_sync(admin: AdminClient, partitions: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        described = admin.describe_topics(TopicCollection([TOPIC]))[TOPIC].result(30)
        if len(described.partitions) == partitions and all(
            len(p.isr) == 3 for p in described.partitions
        ):
            return
        time.sleep(1)
    raise RuntimeError(f"{TOPIC}: not every partition has a whole ISR")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    with process_groups.ProcessGroups() as groups, tempfile.TemporaryDirectory() as work:
        cluster = clusters.strom_cluster(groups, Path(work), SEGMENT_BYTES)
        cluster.start()
        nodes = [cluster.node(n) for n in (1, 2, 3)]
        for node in nodes:
            assert isinstance(node, brokers.StromBroker)
            node.wait_ready(None)  # type: ignore[arg-type]  # /readyz: no Java tool needed
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, args.partitions, 3)])[TOPIC].result(120)
        wait_in_sync(admin, args.partitions)
        time.sleep(5)  # let the catch-up fetches of the new partitions settle

        ports = [node.metrics_port for node in nodes if isinstance(node, brokers.StromBroker)]

        def total(name: str, label: str = "") -> float | None:
            values = [metric_sum(port, name, label) for port in ports]
            return None if None in values else sum(v for v in values if v is not None)

        def sample() -> tuple[float, float | None, float | None]:
            return (
                sum(cpu_seconds(node.pid) for node in nodes),
                total("strom_requests_total", 'api="FETCH"'),
                total("strom_fetch_response_partitions_total", 'fetcher="follower"'),
            )

        cpu0, fetches0, answered0 = sample()
        time.sleep(args.seconds)
        cpu1, fetches1, answered1 = sample()
        fetches = (fetches1 or 0) - (fetches0 or 0)
        per_answer = (
            "n/a (not measured by this build)"
            if answered0 is None or answered1 is None
            else f"{(answered1 - answered0) / max(fetches, 1):.1f}"
        )
        print(
            f"idle 3-node cluster, {args.partitions} partitions x RF 3, {args.seconds:.0f} s: "
            f"CPU {cpu1 - cpu0:.1f} s ({(cpu1 - cpu0) / args.seconds * 100:.0f}% of a core), "
            f"{fetches:.0f} Fetch requests ({fetches / args.seconds:.1f}/s), "
            f"partitions per follower fetch answer: {per_answer}"
        )
        cluster.stop()


if __name__ == "__main__":
    main()
