"""The replica fetcher's pacing after a leader's refusal: a leader behind on the epoch
(a failover under way) is asked again within moments, one that is not the leader only
after replica.fetch.backoff.ms."""

from __future__ import annotations

import asyncio
import time
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
        self.fetched_at: list[float] = []
        self.fetched = asyncio.Event()

    async def send(self, node_id: int, request: Any, **_: Any) -> Any:
        await asyncio.sleep(0)
        self.fetched_at.append(time.monotonic())
        self.fetched.set()
        (topic,) = request.fields["topics"]
        (wanted,) = topic["partitions"]
        answer = SimpleNamespace(partition_index=wanted["partition"], error_code=self.error)
        return SimpleNamespace(
            error_code=0,
            session_id=0,  # keeps no fetch session: every fetch is a full one
            responses=[SimpleNamespace(topic=topic["topic"], partitions=[answer])],
        )

    async def close(self) -> None:
        pass


BACKOFF_S = 2.0  # replica.fetch.backoff.ms


async def refetch_gap(error: ErrorCode, tmp_path: Path) -> float:
    """Seconds between a follower's first fetch, refused with `error`, and its next one."""
    leader = RefusingLeader(error)
    settings = fetcher.FetchSettings(backoff_ms=int(BACKOFF_S * 1000))
    fetchers = fetcher.Fetchers(2, lambda: 1, leader, settings, clock.SystemClock())
    log = partition_log.PartitionLog.open(tmp_path / "t-0", log_config.LogConfig(), lambda: 0)
    try:
        at = images.PartitionImage(0, (1, 2), (1, 2), leader=1, leader_epoch=3, partition_epoch=0)
        fetchers.follow(partitions.Partition("t", 0, log, 2, at))
        async with asyncio.timeout(BACKOFF_S + 5):
            while len(leader.fetched_at) < 2:
                leader.fetched.clear()
                await leader.fetched.wait()
        return leader.fetched_at[1] - leader.fetched_at[0]
    finally:
        await fetchers.close()
        log.close()


async def test_a_leader_behind_on_the_epoch_is_asked_again_within_moments(
    tmp_path: Path,
) -> None:
    assert await refetch_gap(ErrorCode.unknown_leader_epoch, tmp_path) < BACKOFF_S / 2


async def test_a_replica_that_is_not_the_leader_is_asked_again_after_the_backoff(
    tmp_path: Path,
) -> None:
    assert await refetch_gap(ErrorCode.not_leader_or_follower, tmp_path) >= BACKOFF_S
