"""The replica fetcher's pacing after a leader's refusal: a leader behind on the epoch
(a failover under way) is asked again within moments, one that is not the leader only
after replica.fetch.backoff.ms."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode
from strom import clock
from strom.cluster import image as images
from strom.replication import fetcher
from strom.replication import partition as partitions
from strom.storage import log_config, partition_log


class RefusingLeader:
    def __init__(self, error: ErrorCode) -> None:
        self.error = error
        self.fetches = 0

    async def send(self, node_id: int, request: Any, **_: Any) -> Any:
        await asyncio.sleep(0)
        self.fetches += 1
        (topic,) = request.fields["topics"]
        (wanted,) = topic["partitions"]
        answer = SimpleNamespace(partition_index=wanted["partition"], error_code=self.error)
        return SimpleNamespace(
            error_code=0,
            responses=[SimpleNamespace(topic=topic["topic"], partitions=[answer])],
        )

    async def close(self) -> None:
        pass


async def fetches_within(error: ErrorCode, seconds: float, tmp_path: Path) -> int:
    leader = RefusingLeader(error)
    settings = fetcher.FetchSettings(backoff_ms=1000)
    fetchers = fetcher.Fetchers(2, lambda: 1, leader, settings, clock.SystemClock())
    log = partition_log.PartitionLog.open(tmp_path / "t-0", log_config.LogConfig(), lambda: 0)
    try:
        at = images.PartitionImage(0, (1, 2), (1, 2), leader=1, leader_epoch=3, partition_epoch=0)
        fetchers.follow(partitions.Partition("t", 0, log, 2, at))
        await asyncio.sleep(seconds)
        return leader.fetches
    finally:
        await fetchers.close()
        log.close()


async def test_a_leader_behind_on_the_epoch_is_asked_again_within_moments(
    tmp_path: Path,
) -> None:
    assert await fetches_within(ErrorCode.unknown_leader_epoch, 0.4, tmp_path) >= 3


async def test_a_replica_that_is_not_the_leader_is_asked_again_after_the_backoff(
    tmp_path: Path,
) -> None:
    assert await fetches_within(ErrorCode.not_leader_or_follower, 0.4, tmp_path) == 1
