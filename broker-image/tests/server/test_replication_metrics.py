"""The replication gauges of /metrics, from the metadata image: partitions led here,
under-replicated and under-min-ISR ones, offline ones (on the active controller)."""

from __future__ import annotations

from pathlib import Path

from broker_calls import create_topic, loaded
from prometheus_client import generate_latest


def gauges(text: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line.startswith("strom_") and " " in line and "{" not in line:
            name, value = line.split(" ", 1)
            found[name] = float(value)
    return found


async def test_a_single_broker_leads_every_partition_and_is_the_controller(
    tmp_path: Path,
) -> None:
    broker = await loaded(tmp_path, **{"min.insync.replicas": "2"})
    try:
        await create_topic(broker, "counted", 5)
        scraped = gauges(generate_latest(broker.metrics.registry).decode())
        assert scraped["strom_leader_partitions"] == 5
        assert scraped["strom_under_replicated_partitions"] == 0  # RF 1: all in sync
        assert scraped["strom_under_min_isr_partitions"] == 5  # 1 in sync, 2 required
        assert scraped["strom_offline_partitions"] == 0
        assert scraped["strom_active_controller"] == 1
    finally:
        await broker.metadata_log.stop()
        broker.close()
