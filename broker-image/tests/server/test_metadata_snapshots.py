"""The metadata log of a broker is snapshotted and truncated once enough was committed
(metadata.log.max.record.bytes.between.snapshots), and a restarted broker rebuilds the
same image from the snapshot and the log after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_calls import create_topic, loaded
from strom.cluster import metadata_log


async def test_a_snapshot_replaces_the_log_before_it_and_a_restart_reads_it(
    tmp_path: Path,
) -> None:
    settings = {"metadata.log.max.record.bytes.between.snapshots": "2000"}
    broker = await loaded(tmp_path, **settings)
    try:
        for n in range(20):
            await create_topic(broker, f"snap-{n}", 4, {"retention.ms": str(1000 + n)})
        before = broker.metadata.image
        directory = tmp_path / metadata_log.METADATA_DIR
        written = sorted(directory.glob("*.checkpoint"))
        assert written, "no snapshot was written"
        assert broker.metadata_log.client.log.log_start_offset > 0
    finally:
        await broker.metadata_log.stop()
        broker.close()

    restarted = await loaded(tmp_path, **settings)
    try:
        after = restarted.metadata.image
        assert set(after.topics) == set(before.topics)
        for name, topic in before.topics.items():
            assert after.topics[name].topic_id == topic.topic_id
            assert after.topics[name] == topic  # partitions, configs and all
        assert len(restarted.replicas) == 80
    finally:
        await restarted.metadata_log.stop()
        restarted.close()


async def test_a_corrupt_snapshot_stops_the_start_naming_the_file(tmp_path: Path) -> None:
    settings = {"metadata.log.max.record.bytes.between.snapshots": "2000"}
    broker = await loaded(tmp_path, **settings)
    try:
        for n in range(20):
            await create_topic(broker, f"snap-{n}", 4)
    finally:
        await broker.metadata_log.stop()
        broker.close()
    latest = max((tmp_path / metadata_log.METADATA_DIR).glob("*.checkpoint"))
    data = bytearray(latest.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped byte: the batch's CRC no longer matches
    latest.write_bytes(bytes(data))
    with pytest.raises(metadata_log.CorruptMetadataLogError, match=latest.name):
        await loaded(tmp_path, **settings)
