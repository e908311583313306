"""The replica fetcher's pacing after a leader's refusal: a leader behind on the epoch
(a failover under way) is asked again within moments, one that is not the leader only
after replica.fetch.backoff.ms; and its fetch session with the leader (KIP-227)."""

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


class SessionLeader:
    """A leader that keeps a fetch session (id 7): it answers a full fetch with every
    partition (nothing to copy; partition 1 refused as not the leader, the first time) and
    incremental ones with none, and forgets the session (FETCH_SESSION_ID_NOT_FOUND) at
    its third fetch."""

    SESSION_ID = 7

    def __init__(self) -> None:
        self.fetches: list[tuple[int, int, set[int], set[int], float]] = []
        self.fetched = asyncio.Event()

    async def send(self, node_id: int, request: Any, **_: Any) -> Any:
        await asyncio.sleep(0.01)  # a long poll, shortened
        fields = request.fields
        named = {p["partition"] for t in fields["topics"] for p in t["partitions"]}
        forgotten = {i for t in fields["forgotten_topics_data"] for i in t["partitions"]}
        self.fetches.append(
            (fields["session_id"], fields["session_epoch"], named, forgotten, time.monotonic())
        )
        self.fetched.set()
        if len(self.fetches) == 3:
            error = ErrorCode.fetch_session_id_not_found
            return SimpleNamespace(error_code=error, session_id=0, responses=[])
        refused = len(self.fetches) == 1
        answers = [
            SimpleNamespace(
                partition_index=index,
                error_code=ErrorCode.not_leader_or_follower if refused and index == 1 else 0,
                diverging_epoch=None,
                high_watermark=0,
                records=b"",
            )
            for index in sorted(named)
        ]
        topics = [SimpleNamespace(topic="t", partitions=answers)] if answers else []
        return SimpleNamespace(error_code=0, session_id=self.SESSION_ID, responses=topics)

    async def close(self) -> None:
        pass


async def test_followers_fetch_in_a_session_and_start_over_at_once_when_it_is_lost(
    tmp_path: Path,
) -> None:
    leader = SessionLeader()
    settings = fetcher.FetchSettings(backoff_ms=int(BACKOFF_S * 1000))
    fetchers = fetcher.Fetchers(2, lambda: 1, leader, settings, clock.SystemClock())
    logs = [
        partition_log.PartitionLog.open(tmp_path / f"t-{i}", log_config.LogConfig(), lambda: 0)
        for i in (0, 1)
    ]
    try:
        for index, log in enumerate(logs):
            at = images.PartitionImage(
                index, (1, 2), (1, 2), leader=1, leader_epoch=3, partition_epoch=0
            )
            fetchers.follow(partitions.Partition("t", index, log, 2, at))
        async with asyncio.timeout(BACKOFF_S):  # a session error is no reason to back off
            while len(leader.fetches) < 5:
                leader.fetched.clear()
                await leader.fetched.wait()
    finally:
        await fetchers.close()
        for log in logs:
            log.close()
    asked = [
        (session, epoch, named, forgotten) for session, epoch, named, forgotten, _ in leader.fetches
    ]
    assert asked == [
        (0, 0, {0, 1}, set()),  # full, asking for a session
        # incremental: nothing changed, nothing named; 1 backs off, so it leaves the session
        (7, 1, set(), {1}),
        (7, 2, set(), set()),  # ... answered FETCH_SESSION_ID_NOT_FOUND
        (0, 0, {0}, set()),  # full again at once, for a new session
        (7, 1, set(), set()),
    ]
