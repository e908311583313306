"""Shared fixtures: an injected clock and a small producer driving real logs in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from strom.records import batches
from strom.storage import log_config, partition_log

START_MS = 1_700_000_000_000


class FakeClock:
    def __init__(self, now_ms: int = START_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


class Harness:
    """Opens logs under one directory and appends the way the produce handler will."""

    def __init__(self, root: Path, clock: FakeClock) -> None:
        self.root = root
        self.clock = clock
        self.directory = root / "topic-0"
        self.opened: list[partition_log.PartitionLog] = []

    def open(self, config: log_config.LogConfig | None = None) -> partition_log.PartitionLog:
        log = partition_log.PartitionLog.open(
            self.directory, config or log_config.LogConfig(), self.clock
        )
        log.update_high_watermark(log.log_end_offset)
        self.opened.append(log)
        return log

    @staticmethod
    def crash(log: partition_log.PartitionLog) -> None:
        """Like a killed process: handles vanish, nothing is flushed or marked clean."""
        log.close_handles()

    def append(
        self,
        log: partition_log.PartitionLog,
        values: Sequence[bytes] = (b"value",),
        *,
        timestamp: int | None = None,
        leader_epoch: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
    ) -> partition_log.AppendResult:
        """Append one batch holding ``values`` and advance the high watermark (single node)."""
        ts = self.clock.now_ms if timestamp is None else timestamp
        batch = bytearray(
            batches.build_batch(
                [(None, value, [], ts) for value in values],
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
            )
        )
        headers = batches.validate_produce_batches(memoryview(batch), log.config.max_message_bytes)
        result = log.append(batch, headers, leader_epoch, self.clock.now_ms)
        log.update_high_watermark(log.log_end_offset)
        return result

    def fill(self, log: partition_log.PartitionLog, batch_count: int, size: int = 100) -> None:
        for number in range(batch_count):
            self.append(log, [str(number).encode().ljust(size, b".")])

    @staticmethod
    def decoded(result: partition_log.ReadResult) -> list[batches.Record]:
        """The records of a read, checking the ranges hold whole batches."""
        data = result.read_into_bytes()
        assert len(data) == result.total_bytes
        return [
            record
            for header in batches.iter_batches(data)
            for record in batches.iter_records(
                data[header.position : header.position + header.size]
            )
        ]

    def offsets_read(
        self, log: partition_log.PartitionLog, start: int, max_bytes: int = 1 << 30
    ) -> list[int]:
        return [r.offset for r in self.decoded(log.read(start, max_bytes, log.high_watermark))]

    @staticmethod
    def batch_bases_read(log: partition_log.PartitionLog, start: int, max_bytes: int) -> list[int]:
        data = log.read(start, max_bytes, log.high_watermark).read_into_bytes()
        return [header.base_offset for header in batches.iter_batches(data)]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def harness(tmp_path: Path, clock: FakeClock) -> Iterator[Harness]:
    harness = Harness(tmp_path, clock)
    yield harness
    for log in harness.opened:
        log.close()
