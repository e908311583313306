"""The single node's metadata log: durable appends, replay in order, corruption refused."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kio.static.primitive import i32
from strom.cluster import metadata_log, records
from strom.records import batches

NOW = 1_700_000_000_000


def topic(name: str) -> records.TopicRecord:
    return records.TopicRecord(name=name, topic_id=uuid.uuid4())


def append_junk(log: metadata_log.LocalMetadataLog) -> None:
    """A batch with a valid CRC whose record is not a metadata record."""
    data = bytearray(batches.build_batch([(None, b"\x01\x63\x00junk", [], NOW)]))
    headers = batches.validate_produce_batches(memoryview(data), len(data))
    log._log.append(data, headers, leader_epoch=0, now_ms=NOW)


async def test_appended_records_replay_in_order_after_a_reopen(tmp_path: Path) -> None:
    log = metadata_log.LocalMetadataLog(tmp_path, lambda: NOW)
    first = [topic("a"), topic("b")]
    assert await log.append(first) == 1
    second = [records.RemoveTopicRecord(topic_id=first[0].topic_id)]
    assert await log.append(second) == 2
    log.close()
    reopened = metadata_log.LocalMetadataLog(tmp_path, lambda: NOW)
    try:
        assert list(reopened.read_committed()) == list(enumerate([*first, *second]))
    finally:
        reopened.close()


async def test_ten_thousand_partition_records_fit_one_operation(tmp_path: Path) -> None:
    log = metadata_log.LocalMetadataLog(tmp_path, lambda: NOW)
    topic_id = uuid.uuid4()
    many = [
        records.PartitionRecord(
            partition_id=i32(index),
            topic_id=topic_id,
            replicas=(i32(1),),
            isr=(i32(1),),
            leader=i32(1),
            leader_epoch=i32(0),
            partition_epoch=i32(0),
        )
        for index in range(10_000)
    ]
    try:
        assert await log.append(many) == 9_999
        assert sum(1 for _ in log.read_committed()) == 10_000
    finally:
        log.close()


async def test_bytes_that_are_not_metadata_records_stop_the_start_naming_the_file(
    tmp_path: Path,
) -> None:
    log = metadata_log.LocalMetadataLog(tmp_path, lambda: NOW)
    await log.append([topic("a")])
    append_junk(log)
    log._log.update_high_watermark(log._log.log_end_offset)
    with pytest.raises(
        metadata_log.CorruptMetadataLogError, match=r"__cluster_metadata-0.*offset 1"
    ):
        list(log.read_committed())
    log.close()


async def test_a_broker_refuses_a_metadata_log_whose_records_do_not_apply(tmp_path: Path) -> None:
    from strom.config import broker as broker_config
    from strom.server import broker as broker_module

    log = metadata_log.LocalMetadataLog(tmp_path, lambda: NOW)
    # A partition of a topic that was never created.
    await log.append([records.RemoveTopicRecord(topic_id=uuid.uuid4())])
    log.close()
    broker = broker_module.Broker(broker_config.BrokerConfig({"log.dirs": str(tmp_path)}))
    try:
        with pytest.raises(metadata_log.CorruptMetadataLogError, match="__cluster_metadata-0"):
            await broker.load()
    finally:
        broker.close()


async def test_a_broker_refuses_bytes_that_are_not_metadata_records_naming_the_offset(
    tmp_path: Path,
) -> None:
    from strom.config import broker as broker_config
    from strom.server import broker as broker_module

    log = metadata_log.LocalMetadataLog(tmp_path, lambda: NOW)
    await log.append([topic("a")])
    append_junk(log)
    log._log.flush()
    log.close()
    broker = broker_module.Broker(broker_config.BrokerConfig({"log.dirs": str(tmp_path)}))
    try:
        with pytest.raises(
            metadata_log.CorruptMetadataLogError, match=r"__cluster_metadata-0.*offset 1"
        ):
            await broker.load()
    finally:
        broker.close()
