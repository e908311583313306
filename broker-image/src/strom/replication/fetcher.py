"""Followers fetching from leaders: Kafka's ReplicaFetcherThread, one per source broker.

A `ReplicaFetcher` copies every partition this broker follows from one leader with one
Fetch request at a time (the Fetch API with this broker's id as the replica, each
partition's leader epoch, its log end offset as the fetch offset and the epoch of its
last batch), appends what comes verbatim, takes the leader's high watermark, truncates
where the leader says our log diverges, and starts over at the leader's log start when
ours ends below it. The leader learns from each fetch where our log ends: that is what
moves its high watermark and keeps us in its ISR.

The fetches run in a fetch session with the leader (KIP-227, fetch_session_builder.py):
after the first, full, fetch each one sends only the partitions whose fetch offset or
epochs changed and is answered only for partitions with something new, so a follower of
many quiet partitions does not send and read them all twice a second.

A partition the follower replication quota throttles (quotas.py) is left out of the
fetches while the quota is exceeded, unless it has caught up (Kafka's
shouldFollowerThrottle); its bytes count against the quota as they arrive.

`Fetchers` keeps one fetcher per leader and moves partitions between them as leaders
change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from strom import tasks
from strom.clock import Clock
from strom.network import channel as channels
from strom.network import errors as network_errors
from strom.protocol import outbound
from strom.records import batches
from strom.replication import fetch_session_builder as sessions
from strom.replication import partition as partitions
from strom.replication import quotas

log = logging.getLogger(__name__)

FETCH = 1
# How soon a partition is fetched again from a leader that is behind on its epoch.
SOON_MS = 50
PartitionKey = sessions.PartitionKey
# Answered by a full fetch at once, without the backoff of other errors.
SESSION_ERRORS = frozenset(
    {
        ErrorCode.fetch_session_id_not_found,
        ErrorCode.invalid_fetch_session_epoch,
        ErrorCode.fetch_session_topic_id_error,
    }
)


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """Kafka's replica.fetch.* settings."""

    max_bytes: int = 1_048_576  # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    min_bytes: int = 1  # replica.fetch.min.bytes
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    backoff_ms: int = 1_000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms


@dataclass(slots=True)
class _Followed:
    partition: partitions.Partition
    delayed_until: float = 0.0  # after an error: not fetched before
    lag: int = 0  # offsets behind the leader's high watermark, at the last fetch
    caught_up: bool = False  # no lag at the last fetch: never held back by the quota


class ReplicaFetcher:
    """Fetches the partitions this broker follows from one leader, in one task."""

    def __init__(
        self,
        node_id: int,
        broker_epoch: Callable[[], int],
        source: int,
        channel: channels.Channel,
        settings: FetchSettings,
        clock: Clock,
        quota: quotas.ReplicationQuota | None = None,
    ) -> None:
        self.node_id = node_id
        self._broker_epoch = broker_epoch
        self.source = source
        self._channel = channel
        self._settings = settings
        self._clock = clock
        self._quota = quota
        self._partitions: dict[PartitionKey, _Followed] = {}
        self._session = sessions.FetchSessionBuilder()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def add(self, partition: partitions.Partition) -> None:
        key = (partition.topic, partition.index)
        followed = self._partitions.get(key)
        if followed is None or followed.partition is not partition:
            self._partitions[key] = _Followed(partition)
        else:
            followed.delayed_until = 0.0  # a new leader epoch: try at once
        self._changed.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"replica-fetcher-{self.source}"
            )

    def remove(self, key: PartitionKey) -> None:
        self._partitions.pop(key, None)

    def max_lag(self) -> int:
        return max((f.lag for f in self._partitions.values()), default=0)

    async def stop(self) -> None:
        task, self._task = self._task, None
        await tasks.cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            try:
                await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for broker %d failed; retrying", self.source)
                await self._clock.sleep(self._settings.backoff_ms / 1000)

    async def _fetch_once(self) -> None:
        now = self._clock.monotonic()
        due = [f for f in self._partitions.values() if f.delayed_until <= now]
        ready = [f for f in due if not self._held_back(f)]
        if not ready:
            self._changed.clear()
            wake_at = min(
                (f.delayed_until for f in self._partitions.values() if f.delayed_until > now),
                default=None,
            )
            if due:  # all held back by the quota: look again after a backoff, as Kafka does
                retry_at = now + self._settings.backoff_ms / 1000
                wake_at = retry_at if wake_at is None else min(wake_at, retry_at)
            timeout = None if wake_at is None else max(wake_at - now, 0.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)
            return
        sent = {(f.partition.topic, f.partition.index): f.partition.leader_epoch for f in ready}
        plan = self._session.build({self._key(f): self._partition_fetch(f) for f in ready})
        timeout_s = (self._settings.max_wait_ms + self._settings.socket_timeout_ms) / 1000
        try:
            response = await self._channel.send(
                self.source, self._request(plan), timeout_s=timeout_s
            )
        except network_errors.NetworkError as failure:
            log.info("fetch from broker %d failed: %s", self.source, failure)
            self._session.handle_error()
            await self._clock.sleep(self._settings.backoff_ms / 1000)
            return
        names = {f.partition.topic_id: f.partition.topic for f in ready}
        answers: list[tuple[PartitionKey, Any]] = []
        for topic in response.responses:
            # v13+ answers by topic id only
            name = str(getattr(topic, "topic", None) or names.get(topic.topic_id, ""))
            answers.extend(((name, int(p.partition_index)), p) for p in topic.partitions)
        error = ErrorCode(response.error_code)
        if not self._session.handle_response(
            error, int(response.session_id), (key for key, _ in answers)
        ):
            if error in SESSION_ERRORS:
                log.info(
                    "fetch session with broker %d: %s; fetching in full", self.source, error.name
                )
            else:
                log.warning("fetch from broker %d: %s", self.source, error.name)
                await self._clock.sleep(self._settings.backoff_ms / 1000)
            return
        for key, answer in answers:
            followed = self._partitions.get(key)
            if followed is None or followed.partition.leader_epoch != sent.get(key):
                continue  # moved to another leader, or a new epoch, meanwhile
            self._handle(followed, answer)

    def _partition_fetch(self, followed: _Followed) -> sessions.PartitionFetch:
        partition = followed.partition
        return sessions.PartitionFetch(
            topic_id=partition.topic_id,
            fetch_offset=partition.log_end_offset,
            current_leader_epoch=partition.leader_epoch,
            last_fetched_epoch=partition.last_fetched_epoch,
            log_start_offset=partition.log_start_offset,
            max_bytes=self._settings.max_bytes,
        )

    def _request(self, plan: sessions.FetchPlan) -> outbound.Draft:
        topics: dict[str, dict[str, Any]] = {}
        for (topic, index), fetch in plan.to_send.items():
            entry = topics.setdefault(
                topic, {"topic": topic, "topic_id": fetch.topic_id, "partitions": []}
            )
            entry["partitions"].append(
                {
                    "partition": index,
                    "current_leader_epoch": fetch.current_leader_epoch,
                    "fetch_offset": fetch.fetch_offset,
                    "last_fetched_epoch": fetch.last_fetched_epoch,
                    "log_start_offset": fetch.log_start_offset,
                    "partition_max_bytes": fetch.max_bytes,
                }
            )
        forgotten: dict[str, dict[str, Any]] = {}
        for (topic, index), topic_id in plan.to_forget:
            forgotten.setdefault(topic, {"topic": topic, "topic_id": topic_id, "partitions": []})[
                "partitions"
            ].append(index)
        return outbound.Draft(
            FETCH,
            {
                "cluster_id": None,
                "replica_id": self.node_id,
                "replica_state": {
                    "replica_id": self.node_id,
                    "replica_epoch": self._broker_epoch(),
                },
                "max_wait": self._settings.max_wait_ms,
                "min_bytes": self._settings.min_bytes,
                "max_bytes": self._settings.response_max_bytes,
                "isolation_level": 0,
                "session_id": plan.metadata.session_id,
                "session_epoch": plan.metadata.epoch,
                "topics": list(topics.values()),
                "forgotten_topics_data": list(forgotten.values()),
                "rack_id": "",
            },
        )

    def _handle(self, followed: _Followed, answer: Any) -> None:
        partition = followed.partition
        error = ErrorCode(answer.error_code)
        if error == ErrorCode.none:
            diverging = getattr(answer, "diverging_epoch", None)
            if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
                partition.truncate_diverging(int(diverging.epoch), int(diverging.end_offset))
                return
            records = answer.records or b""
            try:
                partition.append_as_follower(records, int(answer.high_watermark))
                followed.lag = max(int(answer.high_watermark) - partition.log_end_offset, 0)
                followed.caught_up = followed.lag == 0
                quota = self._quota
                if records and quota is not None and quota.is_throttled(*self._key(followed)):
                    quota.record(len(records))
            except (batches.RecordsError, OSError) as failure:
                log.error(
                    "%s: cannot append what leader %d sent: %s", partition, self.source, failure
                )
                self._delay(followed)
            return
        if error == ErrorCode.offset_out_of_range:
            self._out_of_range(partition, int(answer.log_start_offset), int(answer.high_watermark))
            return
        # Not the leader (yet), an epoch one of us has not seen yet, an unknown topic: the
        # metadata will catch up; until then fetch this partition less often. A leader that
        # has not seen our newer epoch yet (a failover under way) learns it within moments,
        # and the producers waiting on its high watermark wait for this fetch: soon again.
        log.debug("%s: leader %d answered %s", partition, self.source, error.name)
        self._delay(followed, soon=error == ErrorCode.unknown_leader_epoch)

    def _out_of_range(
        self, partition: partitions.Partition, leader_start: int, leader_high_watermark: int
    ) -> None:
        if partition.log_end_offset < leader_start:
            log.info(
                "%s: our log ends at %d, below leader %d's start %d: starting there",
                partition,
                partition.log_end_offset,
                self.source,
                leader_start,
            )
            partition.restart_at(leader_start)
        else:
            # Ours runs past the leader's end (an unclean election): back to what it has
            # committed, then on from there.
            partition.truncate_to(leader_high_watermark)

    def _held_back(self, followed: _Followed) -> bool:
        return self._quota is not None and self._quota.should_throttle(
            *self._key(followed), in_sync=followed.caught_up
        )

    @staticmethod
    def _key(followed: _Followed) -> PartitionKey:
        return followed.partition.topic, followed.partition.index

    def _delay(self, followed: _Followed, *, soon: bool = False) -> None:
        backoff_ms = min(self._settings.backoff_ms, SOON_MS) if soon else self._settings.backoff_ms
        followed.delayed_until = self._clock.monotonic() + backoff_ms / 1000


class Fetchers:
    """One ReplicaFetcher per leader this broker follows partitions from."""

    def __init__(
        self,
        node_id: int,
        broker_epoch: Callable[[], int],
        channel: channels.Channel,
        settings: FetchSettings,
        clock: Clock,
        quota: quotas.ReplicationQuota | None = None,
    ) -> None:
        self._node_id = node_id
        self._broker_epoch = broker_epoch
        self._channel = channel
        self._settings = settings
        self._clock = clock
        self._quota = quota
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._source_of: dict[PartitionKey, int] = {}

    def follow(self, partition: partitions.Partition) -> None:
        """Fetch `partition` from its leader (from no one while it has none)."""
        key = (partition.topic, partition.index)
        leader = partition.leader
        previous = self._source_of.get(key)
        if previous is not None and previous != leader:
            self._fetchers[previous].remove(key)
            del self._source_of[key]
        if leader < 0 or leader == self._node_id:
            return
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self._node_id,
                self._broker_epoch,
                leader,
                self._channel,
                self._settings,
                self._clock,
                self._quota,
            )
            self._fetchers[leader] = fetcher
        fetcher.add(partition)
        self._source_of[key] = leader

    def unfollow(self, key: PartitionKey) -> None:
        source = self._source_of.pop(key, None)
        if source is not None:
            self._fetchers[source].remove(key)

    def max_lag(self) -> int:
        """Kafka's MaxLag: the most a followed partition is behind its leader."""
        return max((f.max_lag() for f in self._fetchers.values()), default=0)

    async def stop(self) -> None:
        """Stop fetching (a stopping broker); `close` then drops the connections."""
        for fetcher in self._fetchers.values():
            await fetcher.stop()
        self._fetchers.clear()
        self._source_of.clear()

    async def close(self) -> None:
        await self.stop()
        await self._channel.close()
