"""A data directory written by Strom 0.1 (metadata in one JSON document) opens in this
release with nothing lost: topics with their ids and configs, dynamic broker configs,
records, committed offsets, and producer ids (never handed out twice).

The directory is e2e/fixtures/strom-0.1.0-data-dir.tar.gz, made by the 0.1.0 release
itself (see make_strom_0_1_data_dir.py beside it).
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable
from pathlib import Path

import e2e_records
import wire_requests
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kio.schema.errors import ErrorCode
from strom.protocol import apis, outbound
from strom_process import StromProcess

FIXTURE = Path(__file__).parent / "fixtures" / "strom-0.1.0-data-dir.tar.gz"


def unpacked_into(log_dir: Path) -> dict[str, object]:
    """The 0.1 data directory at `log_dir`; returns its metadata document."""
    log_dir.mkdir(parents=True)
    with tarfile.open(FIXTURE) as archive:
        for member in archive.getmembers():
            member.name = member.name.removeprefix("data/").removeprefix("data")
            if member.name:
                archive.extract(member, log_dir, filter="data")
    document: dict[str, object] = json.loads((log_dir / "strom-metadata.json").read_text())
    return document


async def init_producer_id(port: int) -> int:
    request = outbound.Draft(
        apis.ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout": 60_000}
    )
    answer = await wire_requests.send(port, request)
    assert answer.error_code == ErrorCode.none
    return int(answer.producer_id)


def committed(
    bootstrap: str, group: str, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=30)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in found}


async def test_a_0_1_data_directory_is_migrated_with_nothing_lost(
    strom_factory: Callable[..., StromProcess],
) -> None:
    broker = strom_factory()
    document = unpacked_into(broker.log_dir)
    broker.start()

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    metadata = admin.list_topics(timeout=30)
    stored = {t["name"]: t for t in document["topics"]}  # type: ignore[attr-defined]
    assert {"orders", "events", "__consumer_offsets"} <= set(metadata.topics)
    for name in ("orders", "events"):
        assert len(metadata.topics[name].partitions) == stored[name]["partitions"]

    # Topic ids, as 0.1 handed them out (Metadata v12+ reports them).
    answer = await wire_requests.send(
        broker.port,
        outbound.Draft(
            apis.ApiKey.METADATA,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        ),
    )
    ids = {t.name: str(t.topic_id) for t in answer.topics}
    assert ids["orders"] == stored["orders"]["topic_id"]
    assert ids["events"] == stored["events"]["topic_id"]

    # Topic overrides and this broker's dynamic config.
    (topic_configs,) = admin.describe_configs([ConfigResource("topic", "orders")]).values()
    values = {k: v.value for k, v in topic_configs.result(30).items()}
    assert values["retention.ms"] == "3600000"
    assert values["cleanup.policy"] == "compact,delete"
    (broker_configs,) = admin.describe_configs([ConfigResource("broker", "1")]).values()
    assert broker_configs.result(30)["log.retention.ms"].value == "86400000"

    # Records and committed offsets.
    orders = [
        value
        for index in range(3)
        for _, _, value in e2e_records.read_partition(broker.bootstrap, "orders", index)
    ]
    events = [
        value
        for index in range(2)
        for _, _, value in e2e_records.read_partition(broker.bootstrap, "events", index)
    ]
    assert sorted(orders) == sorted(f"order-{a}-{i}".encode() for a in range(3) for i in range(10))
    assert len(events) == 30
    assert committed(
        broker.bootstrap, "billing", [("orders", 0), ("orders", 1), ("events", 1)]
    ) == {("orders", 0): 4, ("orders", 1): 7, ("events", 1): 9}

    # 0.1 handed out producer ids 0, 1 and 2: none of them again.
    assert await init_producer_id(broker.port) >= 3

    # The document is kept aside; a restart reads the metadata log alone.
    assert not (broker.log_dir / "strom-metadata.json").exists()
    assert (broker.log_dir / "strom-metadata.json.migrated").exists()
    broker.stop()
    broker.start()
    again = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
    assert {"orders", "events"} <= set(again.topics)
    assert committed(broker.bootstrap, "billing", [("orders", 1)]) == {("orders", 1): 7}
    later = await init_producer_id(broker.port)
    assert later >= 3
