"""The partition's transactional doors: markers appended as leader, read_committed reads
bounded by the last stable offset with the aborted transactions, ListOffsets under
read_committed (Kafka's Partition and ReplicaManager rules)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from strom.cluster import image as images
from strom.records import batches, control
from strom.replication import outcomes
from strom.replication import partition as partitions
from strom.storage import log_config, partition_log

NOW = 1_700_000_000_000
A, B = 501, 502
COMMITTED = outcomes.Isolation.READ_COMMITTED


@pytest.fixture
def partition(tmp_path: Path) -> Iterator[partitions.Partition]:
    log = partition_log.PartitionLog.open(tmp_path / "t-0", log_config.LogConfig(), lambda: NOW)
    state = images.PartitionImage(0, (1,), (1,), leader=1, leader_epoch=2, partition_epoch=0)
    yield partitions.Partition("t", 0, log, 1, state)
    log.close()


async def send(partition: partitions.Partition, producer_id: int, sequence: int) -> int:
    data = bytearray(
        batches.build_batch(
            [(b"k", f"{producer_id}/{sequence}".encode(), [], NOW)],
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=sequence,
            is_transactional=True,
        )
    )
    outcome = await partition.append_records(data, list(batches.iter_batches(data)), NOW)
    assert outcome.error is None, outcome
    return outcome.base_offset


async def end(
    partition: partitions.Partition, producer_id: int, commit: bool, coordinator_epoch: int = 0
) -> outcomes.AppendOutcome:
    return await partition.append_marker(
        producer_id, 0, control.EndTxnMarker(commit, coordinator_epoch), NOW
    )


def read_offsets(partition: partitions.Partition, read: outcomes.ReadOutcome) -> list[int]:
    if read.records is None:
        return []
    data = partition_log.ReadResult(list(read.records.ranges), read.size).read_into_bytes()
    return [header.base_offset for header in batches.iter_batches(data)]


async def test_read_committed_stops_at_the_lso_and_names_aborted_transactions(
    partition: partitions.Partition,
) -> None:
    await send(partition, A, 0)  # 0
    await send(partition, B, 0)  # 1
    assert (await end(partition, A, commit=False)).base_offset == 2
    uncommitted = partition.read(0, 1 << 20)
    assert read_offsets(partition, uncommitted) == [0, 1, 2]
    assert uncommitted.aborted_transactions is None
    committed = partition.read(0, 1 << 20, isolation=COMMITTED)
    assert committed.last_stable_offset == 1 and committed.high_watermark == 3
    assert read_offsets(partition, committed) == [0]  # B's open transaction stops it
    assert committed.aborted_transactions == ((A, 0),)
    assert partition.read(1, 1 << 20, isolation=COMMITTED).records is None
    await end(partition, B, commit=True)  # 3
    done = partition.read(1, 1 << 20, isolation=COMMITTED)
    assert read_offsets(partition, done) == [1, 2, 3]
    assert done.last_stable_offset == 4 and done.aborted_transactions == ((A, 0),)
    assert partition.read(3, 1 << 20, isolation=COMMITTED).aborted_transactions == ()


async def test_list_offsets_latest_is_the_lso_under_read_committed(
    partition: partitions.Partition,
) -> None:
    await send(partition, A, 0)
    assert partition.list_offset(outcomes.LATEST).offset == 1
    assert partition.list_offset(outcomes.LATEST, isolation=COMMITTED).offset == 0
    assert partition.list_offset(NOW, isolation=COMMITTED).offset == -1  # not decided yet
    assert partition.list_offset(NOW).offset == 0
    await end(partition, A, commit=True)
    assert partition.list_offset(outcomes.LATEST, isolation=COMMITTED).offset == 2


async def test_markers_from_a_fenced_coordinator_are_refused(
    partition: partitions.Partition,
) -> None:
    await send(partition, A, 0)
    assert (await end(partition, A, commit=True, coordinator_epoch=4)).error is None
    await send(partition, A, 1)
    stale = await end(partition, A, commit=False, coordinator_epoch=3)
    assert stale.error is outcomes.AppendError.TRANSACTION_COORDINATOR_FENCED
    assert partition.log_end_offset == 3


async def test_markers_honour_min_insync_replicas(partition: partitions.Partition) -> None:
    await send(partition, A, 0)
    refused = await partition.append_marker(A, 0, control.EndTxnMarker(True, 0), NOW, 2)
    assert refused.error is outcomes.AppendError.NOT_ENOUGH_REPLICAS
    assert partition.log_end_offset == 1
