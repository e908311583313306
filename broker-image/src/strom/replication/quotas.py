"""Replication quotas: Kafka's ReplicationQuotaManager, one for each side of a fetch.

A reassignment's throttle (`kafka-reassign-partitions.sh --throttle`) names, per topic,
the replicas it throttles (`leader.replication.throttled.replicas` and
`follower.replication.throttled.replicas`: `partition:broker` entries, or `*` for all)
and, per broker, the bytes per second they may replicate
(`leader.replication.throttled.rate`, `follower.replication.throttled.rate`). Each
broker keeps one quota per side: the bytes of the partitions throttled here (the entries
naming this broker) are recorded in a rate over Kafka's quota window
(`replication.quota.window.num` samples of `replication.quota.window.size.seconds`), and
while that rate is above the configured one a leader sends a throttled partition's
follower no records (the follower fetches them later) and a follower leaves its
throttled partitions out of its fetches. Replicas in sync are never held back (Kafka's
rule, which keeps the ISR from thrashing); unthrottled partitions never wait.

Everything is read from the config cache when it is used, so kafka-configs.sh changes
apply at once.
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass

from strom.clock import Clock
from strom.cluster import config_cache
from strom.config import definitions

ALL_REPLICAS = "*"
LEADER = "leader"
FOLLOWER = "follower"


class RateWindow:
    """Kafka's SimpleRate: the total of the samples still in the window divided by the
    time since the oldest began (at least one sample's length, so that a first burst
    does not read as an absurd rate). A sample is `sample_s` long; the window holds
    `samples` of them, older ones are forgotten."""

    def __init__(self, samples: int, sample_s: float) -> None:
        self._samples = samples
        self._sample_s = sample_s
        self._window: deque[list[float]] = deque()  # [start, total] per sample

    def record(self, value: float, now: float) -> None:
        self._purge(now)
        if not self._window or now - self._window[-1][0] >= self._sample_s:
            self._window.append([now, 0.0])
            if len(self._window) > self._samples:
                self._window.popleft()
        self._window[-1][1] += value

    def rate(self, now: float) -> float:
        self._purge(now)
        if not self._window:
            return 0.0
        total = sum(sample[1] for sample in self._window)
        elapsed = now - self._window[0][0]
        return total / max(elapsed, self._sample_s)

    def _purge(self, now: float) -> None:
        expiry = self._samples * self._sample_s
        while self._window and now - self._window[0][0] >= expiry:
            self._window.popleft()


@functools.lru_cache(maxsize=1024)
def throttled_partitions(replicas: tuple[str, ...], node_id: int) -> frozenset[int] | None:
    """The partitions a `*.replication.throttled.replicas` value throttles on broker
    `node_id`: None for all of them (`*`), else those of the entries naming this broker.
    The value has passed `definitions.check_throttled_replicas`."""
    entries = [entry.strip() for entry in replicas if entry.strip()]
    if entries == [ALL_REPLICAS]:
        return None
    partitions = set()
    for entry in entries:
        partition, _, broker = entry.partition(":")
        if int(broker) == node_id:
            partitions.add(int(partition))
    return frozenset(partitions)


class ReplicationQuota:
    """One side's quota on this broker: which partitions it throttles, and whether the
    bytes they replicated lately are over the configured rate."""

    def __init__(
        self,
        side: str,
        node_id: int,
        configs: config_cache.ConfigCache,
        clock: Clock,
        window: RateWindow,
    ) -> None:
        self.side = side
        self._node_id = node_id
        self._configs = configs
        self._clock = clock
        self._window = window
        self._rate_config = f"{side}.replication.throttled.rate"
        self._replicas_config = f"{side}.replication.throttled.replicas"
        self.bytes_total = 0  # recorded against the quota since start

    @property
    def bound(self) -> int:
        """Bytes per second allowed (Long.MAX_VALUE: unthrottled)."""
        return self._configs.broker.get_int(self._rate_config)

    def is_throttled(self, topic: str, index: int) -> bool:
        value = self._configs.topic(topic).value(self._replicas_config)
        if not value:
            return False
        assert isinstance(value, tuple)
        partitions = throttled_partitions(value, self._node_id)
        return partitions is None or index in partitions

    @property
    def limited(self) -> bool:
        """Whether a rate is set at all (without one nothing is held back)."""
        return self.bound < definitions.LONG_MAX

    def is_exceeded(self) -> bool:
        return self.limited and self.byte_rate() > self.bound

    def should_throttle(self, topic: str, index: int, in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle."""
        return (
            not in_sync
            and self.limited
            and self.is_throttled(topic, index)
            and self.byte_rate() > self.bound
        )

    def record(self, size: int) -> None:
        """Bytes of throttled partitions replicated (in sync or not: all of them count)."""
        if size > 0:
            self.bytes_total += size
            self._window.record(size, self._clock.monotonic())

    def byte_rate(self) -> float:
        return self._window.rate(self._clock.monotonic())


@dataclass(frozen=True, slots=True)
class ReplicationQuotas:
    leader: ReplicationQuota
    follower: ReplicationQuota

    @classmethod
    def from_configs(
        cls, node_id: int, configs: config_cache.ConfigCache, clock: Clock
    ) -> ReplicationQuotas:
        # The window is static in Kafka too (replication.quota.window.*).
        samples = configs.broker.get_int("replication.quota.window.num")
        sample_s = configs.broker.get_int("replication.quota.window.size.seconds")
        return cls(
            *(
                ReplicationQuota(side, node_id, configs, clock, RateWindow(samples, sample_s))
                for side in (LEADER, FOLLOWER)
            )
        )
