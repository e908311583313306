"""What /metrics reads from a running broker, at each scrape.

The broker's parts keep their own state; these readings turn it into the rows and counts
`server.metrics` collects (a scrape, not an event, is when they are computed). They
read only: nothing here changes a partition, a group or a transaction.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from strom.cluster import config_cache, loader, metadata_quorum
from strom.coordinator import groups as group_coordinator
from strom.coordinator import transactions
from strom.replication import fetcher, log_dirs, quotas, replica_manager
from strom.server import fetch_session_cache
from strom.server import metrics as broker_metrics


@dataclass
class MetricReadings:
    node_id: int
    metadata: loader.MetadataLoader
    metadata_log: metadata_quorum.MetadataQuorum
    configs: config_cache.ConfigCache
    replicas: replica_manager.ReplicaManager
    fetchers: fetcher.Fetchers
    replication_quotas: quotas.ReplicationQuotas
    groups: group_coordinator.GroupCoordinator
    fetch_sessions: fetch_session_cache.FetchSessionCache
    transactions: transactions.TransactionCoordinator

    def watch(self, metrics: broker_metrics.BrokerMetrics) -> None:
        metrics.watch_logs(self.log_rows)
        metrics.watch_log_dirs(self.log_dir_rows)
        metrics.watch_groups(self.group_rows)
        metrics.watch_replication(self.replication_counts)
        metrics.watch_replication_quotas(self.quota_readings)
        metrics.watch_fetch_sessions(self.fetch_session_counts)
        metrics.watch_transactions(self.transaction_counts)

    def log_rows(self) -> list[tuple[str, int, int, int, int, int]]:
        return [
            (
                p.topic,
                p.index,
                p.log.size_bytes,
                p.log.log_start_offset,
                p.log.log_end_offset,
                p.log.segment_count,
            )
            for p in self.replicas
        ]

    def log_dir_rows(self) -> list[tuple[str, int, int, bool]]:
        return [
            (d.path, d.total_bytes, d.usable_bytes, d.error is not None)
            for d in log_dirs.describe_log_dirs(self.replicas, ())
        ]

    def group_rows(self) -> list[broker_metrics.GroupRow]:
        rows: list[broker_metrics.GroupRow] = []
        for group in list(self.groups.groups.values()):
            offsets = []
            for (topic, index), committed in group.offsets.items():
                partition = self.replicas.partition(topic, index)
                if partition is not None:
                    behind = max(partition.high_watermark - committed.offset, 0)
                    offsets.append((topic, index, committed.offset, behind))
            rows.append((group.group_id, group.state_name(), group.member_count(), offsets))
        return rows

    def replication_counts(self) -> broker_metrics.ReplicationCounts:
        image = self.metadata.image
        active = self.metadata_log.is_active_controller()
        leaders = under_replicated = under_min_isr = offline = 0
        for topic in image.topics.values():
            min_isr: int | None = None
            for partition in topic.partitions.values():
                if partition.leader < 0:
                    offline += active
                if partition.leader != self.node_id:
                    continue
                leaders += 1
                under_replicated += len(partition.isr) < len(partition.replicas)
                if min_isr is None:
                    min_isr = self.configs.topic(topic.name).min_insync_replicas
                under_min_isr += len(partition.isr) < min_isr
        updates = self.replicas.isr_updates
        return broker_metrics.ReplicationCounts(
            leaders,
            under_replicated,
            under_min_isr,
            offline,
            active,
            isr_shrinks=0 if updates is None else updates.shrinks,
            isr_expands=0 if updates is None else updates.expands,
            max_follower_lag=self.fetchers.max_lag(),
        )

    def fetch_session_counts(self) -> broker_metrics.FetchSessionCounts:
        cache = self.fetch_sessions
        return broker_metrics.FetchSessionCounts(
            len(cache), cache.partitions_cached, cache.created, cache.evictions
        )

    def transaction_counts(self) -> broker_metrics.TransactionCounts:
        coordinator = self.transactions
        by_state = collections.Counter(m.state.kafka_name for m in coordinator.transactions())
        held = coordinator.held
        return broker_metrics.TransactionCounts(
            dict(by_state), held.held, held.ran_out, held.seconds
        )

    def quota_readings(self) -> list[broker_metrics.QuotaReading]:
        return [
            broker_metrics.QuotaReading(quota.side, quota.byte_rate(), quota.bytes_total)
            for quota in (self.replication_quotas.leader, self.replication_quotas.follower)
        ]
