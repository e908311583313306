"""Prometheus metrics of one broker, in a registry of its own (several brokers may share
a process in tests). Names follow Prometheus conventions; the Kafka MBean each one
mirrors is given in its help text so Kafka dashboards translate directly."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, ...
        # (Kafka: java.lang:type=OperatingSystem); the whole process, on Linux
        ProcessCollector(registry=self.registry)
        # `listener`: the listener the connection came in on (PLAINTEXT, CONTROLLER, ...)
        self.requests = Counter(
            "strom_requests",
            "Requests handled, by API, version and listener "
            "(kafka.network:type=RequestMetrics,name=RequestsPerSec)",
            ["api", "version", "listener"],
            registry=self.registry,
        )
        self.request_errors = Counter(
            "strom_request_errors",
            "Partition or topic level error codes returned, by API, error and listener "
            "(kafka.network:type=RequestMetrics,name=ErrorsPerSec)",
            ["api", "error", "listener"],
            registry=self.registry,
        )
        self.request_latency = Histogram(
            "strom_request_latency_seconds",
            "Time from a request's arrival to its response being queued, by API and listener "
            "(kafka.network:type=RequestMetrics,name=TotalTimeMs)",
            ["api", "listener"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.bytes_in = Counter(
            "strom_topic_bytes_in",
            "Record bytes appended, by topic "
            "(kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec)",
            ["topic"],
            registry=self.registry,
        )
        self.messages_in = Counter(
            "strom_topic_messages_in",
            "Records appended, by topic "
            "(kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec)",
            ["topic"],
            registry=self.registry,
        )
        self.bytes_out = Counter(
            "strom_topic_bytes_out",
            "Record bytes sent to fetchers, by topic "
            "(kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec)",
            ["topic"],
            registry=self.registry,
        )
        self.fetch_bytes_sent = Counter(
            "strom_fetch_record_bytes_sent",
            "Record bytes sent in fetch responses, by how: sendfile (zero-copy) or copy",
            ["method"],
            registry=self.registry,
        )
        self.fetch_contexts = Counter(
            "strom_fetch_requests_by_session",
            "Fetch requests by how they use fetch sessions (KIP-227): sessionless, full "
            "(asks for a session), incremental, or error (a session error answered), and "
            "by fetcher (consumer or follower)",
            ["context", "fetcher"],
            registry=self.registry,
        )
        self.fetch_response_partitions = Counter(
            "strom_fetch_response_partitions",
            "Partitions answered in fetch responses, by session context and fetcher: an "
            "incremental response leaves out partitions with nothing new",
            ["context", "fetcher"],
            registry=self.registry,
        )
        self.connections = Gauge(
            "strom_connections",
            "Open client connections "
            "(kafka.server:type=socket-server-metrics,name=connection-count)",
            registry=self.registry,
        )
        self.produce_purgatory = Gauge(
            "strom_produce_purgatory_size",
            "acks=all produce requests waiting for the in-sync replicas "
            "(kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,"
            "delayedOperation=Produce)",
            registry=self.registry,
        )
        self.fetch_purgatory = Gauge(
            "strom_fetch_purgatory_size",
            "Fetch requests waiting for fetch.min.bytes or fetch.max.wait.ms, by fetcher "
            "(consumer or follower) (kafka.server:type=DelayedOperationPurgatory,"
            "name=PurgatorySize,delayedOperation=Fetch)",
            ["fetcher"],
            registry=self.registry,
        )
        self.protocol_errors = Counter(
            "strom_protocol_errors",
            "Connections closed because of bytes that are not a valid request, by reason",
            ["reason"],
            registry=self.registry,
        )

        self.storage_errors = Counter(
            "strom_storage_errors",
            "Appends that failed on a disk error (full disk, I/O error), by error "
            "(kafka.server:type=ReplicaManager KAFKA_STORAGE_ERROR responses)",
            ["error"],
            registry=self.registry,
        )
        self.cleaner_passes = Counter(
            "strom_log_cleaner_passes",
            "Log cleaner passes completed (kafka.log:type=LogCleaner)",
            registry=self.registry,
        )
        self.cleaner_records_removed = Counter(
            "strom_log_cleaner_records_removed",
            "Records the log cleaner removed: superseded values and expired tombstones",
            registry=self.registry,
        )

    def watch_logs(self, rows: Callable[[], Iterable[tuple[str, int, int, int, int, int]]]) -> None:
        """Register a scrape-time view of (topic, partition, size, start, end, segments)."""
        self.registry.register(_LogCollector(rows))

    def watch_log_dirs(self, rows: Callable[[], Iterable[tuple[str, int, int, bool]]]) -> None:
        """Register a scrape-time view of (log dir, total bytes, usable bytes, offline)."""
        self.registry.register(_LogDirCollector(rows))

    def watch_groups(self, rows: Callable[[], Iterable[GroupRow]]) -> None:
        """Register a scrape-time view of consumer groups and their lag."""
        self.registry.register(_GroupCollector(rows))

    def watch_replication(self, counts: Callable[[], ReplicationCounts]) -> None:
        """Register a scrape-time view of this broker's partitions and the cluster's."""
        self.registry.register(_ReplicationCollector(counts))

    def watch_fetch_sessions(self, counts: Callable[[], FetchSessionCounts]) -> None:
        """Register a scrape-time view of the fetch session cache."""
        self.registry.register(_FetchSessionCollector(counts))

    def watch_transactions(self, counts: Callable[[], TransactionCounts]) -> None:
        """Register a scrape-time view of the transaction coordinator."""
        self.registry.register(_TransactionCollector(counts))

    def watch_replication_quotas(self, readings: Callable[[], Iterable[QuotaReading]]) -> None:
        """Register a scrape-time view of the leader and follower replication quotas."""
        self.registry.register(_QuotaCollector(readings))


@dataclass(frozen=True, slots=True)
class TransactionCounts:
    by_state: dict[str, int]  # transactional ids coordinated here, by Kafka's state name
    adds_held: int
    adds_held_ran_out: int
    adds_held_seconds: float


class _TransactionCollector(Collector):
    def __init__(self, counts: Callable[[], TransactionCounts]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        counts = self._counts()
        states = GaugeMetricFamily(
            "strom_transactional_ids",
            "Transactional ids this broker coordinates, by state (what "
            "kafka-transactions.sh list shows; Ongoing ones hold back read_committed readers)",
            labels=["state"],
        )
        for state, count in sorted(counts.by_state.items()):
            states.add_metric([state], count)
        yield states
        yield CounterMetricFamily(
            "strom_txn_adds_held",
            "AddPartitionsToTxn / AddOffsetsToTxn held until the id's last transaction had "
            "ended (its markers written), instead of answered CONCURRENT_TRANSACTIONS",
            value=counts.adds_held,
        )
        yield CounterMetricFamily(
            "strom_txn_adds_held_ran_out",
            "Held AddPartitionsToTxn / AddOffsetsToTxn answered CONCURRENT_TRANSACTIONS after "
            "all: the last transaction took add.partitions.to.txn.retry.backoff.max.ms to end",
            value=counts.adds_held_ran_out,
        )
        yield CounterMetricFamily(
            "strom_txn_adds_held_seconds",
            "Time AddPartitionsToTxn / AddOffsetsToTxn spent held (with strom_txn_adds_held: "
            "the mean time a transaction takes to end once EndTxn answered)",
            value=counts.adds_held_seconds,
        )


@dataclass(frozen=True, slots=True)
class FetchSessionCounts:
    sessions: int
    partitions_cached: int
    created: int
    evictions: int


class _FetchSessionCollector(Collector):
    def __init__(self, counts: Callable[[], FetchSessionCounts]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        counts = self._counts()
        yield GaugeMetricFamily(
            "strom_fetch_sessions",
            "Incremental fetch sessions in the cache "
            "(kafka.server:type=FetchSessionCache,name=NumIncrementalFetchSessions)",
            value=counts.sessions,
        )
        yield GaugeMetricFamily(
            "strom_fetch_session_partitions_cached",
            "Partitions the fetch sessions hold "
            "(kafka.server:type=FetchSessionCache,name=NumIncrementalFetchPartitionsCached)",
            value=counts.partitions_cached,
        )
        yield CounterMetricFamily(
            "strom_fetch_session_creations",
            "Incremental fetch sessions created",
            value=counts.created,
        )
        yield CounterMetricFamily(
            "strom_fetch_session_evictions",
            "Fetch sessions evicted to make room for new ones (kafka.server:type="
            "FetchSessionCache,name=IncrementalFetchSessionEvictionsPerSec)",
            value=counts.evictions,
        )


@dataclass(frozen=True, slots=True)
class QuotaReading:
    side: str  # leader or follower
    byte_rate: float  # bytes/s of throttled partitions over the quota window
    bytes_total: int  # bytes of throttled partitions replicated since start


class _QuotaCollector(Collector):
    def __init__(self, readings: Callable[[], Iterable[QuotaReading]]) -> None:
        self._readings = readings

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        rate = GaugeMetricFamily(
            "strom_replication_throttled_byte_rate",
            "Bytes per second replicated for throttled replicas over the quota window, by "
            "side (kafka.server:type=LeaderReplication,name=byte-rate and "
            "type=FollowerReplication)",
            labels=["side"],
        )
        total = CounterMetricFamily(
            "strom_replication_throttled_bytes",
            "Bytes replicated for throttled replicas, by side (counted against "
            "leader/follower.replication.throttled.rate)",
            labels=["side"],
        )
        for reading in self._readings():
            rate.add_metric([reading.side], reading.byte_rate)
            total.add_metric([reading.side], reading.bytes_total)
        yield from (rate, total)


@dataclass(frozen=True, slots=True)
class ReplicationCounts:
    leaders: int  # partitions led here
    under_replicated: int  # led here with fewer in-sync replicas than replicas
    under_min_isr: int  # led here with fewer in-sync replicas than min.insync.replicas
    offline: int  # partitions without a leader (counted by the active controller only)
    active_controller: bool
    isr_shrinks: int = 0  # ISR changes committed for partitions led here, since start
    isr_expands: int = 0
    max_follower_lag: int = 0  # offsets the most lagging partition followed here is behind


class _ReplicationCollector(Collector):
    def __init__(self, counts: Callable[[], ReplicationCounts]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        counts = self._counts()
        for counter, help_text, total in (
            (
                "strom_isr_shrinks",
                "ISR shrinks of partitions led here "
                "(kafka.server:type=ReplicaManager,name=IsrShrinksPerSec)",
                counts.isr_shrinks,
            ),
            (
                "strom_isr_expands",
                "ISR expansions of partitions led here "
                "(kafka.server:type=ReplicaManager,name=IsrExpandsPerSec)",
                counts.isr_expands,
            ),
        ):
            counted = CounterMetricFamily(counter, help_text)
            counted.add_metric([], total)
            yield counted
        for name, help_text, value in (
            (
                "strom_replica_max_lag",
                "Offsets the most lagging partition this broker follows is behind its "
                "leader's high watermark "
                "(kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica)",
                counts.max_follower_lag,
            ),
            (
                "strom_leader_partitions",
                "Partitions led by this broker (kafka.server:type=ReplicaManager,name=LeaderCount)",
                counts.leaders,
            ),
            (
                "strom_under_replicated_partitions",
                "Partitions led here whose ISR is smaller than their replicas "
                "(kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions)",
                counts.under_replicated,
            ),
            (
                "strom_under_min_isr_partitions",
                "Partitions led here whose ISR is smaller than min.insync.replicas "
                "(kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount)",
                counts.under_min_isr,
            ),
            (
                "strom_offline_partitions",
                "Partitions without a leader, on the active controller "
                "(kafka.controller:type=KafkaController,name=OfflinePartitionsCount)",
                counts.offline,
            ),
            (
                "strom_active_controller",
                "1 on the active controller "
                "(kafka.controller:type=KafkaController,name=ActiveControllerCount)",
                int(counts.active_controller),
            ),
        ):
            family = GaugeMetricFamily(name, help_text)
            family.add_metric([], value)
            yield family


# (group id, state, member count, [(topic, partition, committed offset, lag)])
GroupRow = tuple[str, str, int, list[tuple[str, int, int, int]]]


class _GroupCollector(Collector):
    def __init__(self, rows: Callable[[], Iterable[GroupRow]]) -> None:
        self._rows = rows

    def collect(self) -> Iterator[GaugeMetricFamily]:
        by_state = GaugeMetricFamily(
            "strom_consumer_groups",
            "Consumer groups coordinated here, by state "
            "(kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups<State>)",
            labels=["state"],
        )
        members = GaugeMetricFamily(
            "strom_consumer_group_members", "Members of a consumer group", labels=["group"]
        )
        committed = GaugeMetricFamily(
            "strom_consumer_group_committed_offset",
            "Offset a group committed for a partition",
            labels=["group", "topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "strom_consumer_group_lag",
            "High watermark minus the committed offset (Kafka Exporter's kafka_consumergroup_lag)",
            labels=["group", "topic", "partition"],
        )
        states: dict[str, int] = {}
        for group_id, state, member_count, offsets in self._rows():
            states[state] = states.get(state, 0) + 1
            members.add_metric([group_id], member_count)
            for topic, partition, offset, behind in offsets:
                labels = [group_id, topic, str(partition)]
                committed.add_metric(labels, offset)
                lag.add_metric(labels, behind)
        for state, count in sorted(states.items()):
            by_state.add_metric([state], count)
        yield from (by_state, members, committed, lag)


class _LogCollector(Collector):
    def __init__(self, rows: Callable[[], Iterable[tuple[str, int, int, int, int, int]]]) -> None:
        self._rows = rows

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = [
            GaugeMetricFamily(
                "strom_log_size_bytes",
                "Bytes on disk of a partition log (kafka.log:type=Log,name=Size)",
                labels=["topic", "partition"],
            ),
            GaugeMetricFamily(
                "strom_log_start_offset",
                "First offset of a partition log (kafka.log:type=Log,name=LogStartOffset)",
                labels=["topic", "partition"],
            ),
            GaugeMetricFamily(
                "strom_log_end_offset",
                "Next offset of a partition log (kafka.log:type=Log,name=LogEndOffset)",
                labels=["topic", "partition"],
            ),
            GaugeMetricFamily(
                "strom_log_segments",
                "Segments of a partition log (kafka.log:type=Log,name=NumLogSegments)",
                labels=["topic", "partition"],
            ),
        ]
        for topic, partition, *values in self._rows():
            labels = [topic, str(partition)]
            for family, value in zip(families, values, strict=True):
                family.add_metric(labels, value)
        yield from families


class _LogDirCollector(Collector):
    """The log dirs' filesystems, as DescribeLogDirs reports them: what a disk-full alert
    needs without node_exporter or kubelet volume stats."""

    def __init__(self, rows: Callable[[], Iterable[tuple[str, int, int, bool]]]) -> None:
        self._rows = rows

    def collect(self) -> Iterator[GaugeMetricFamily]:
        total = GaugeMetricFamily(
            "strom_log_dir_total_bytes",
            "Size of the filesystem holding a log dir (DescribeLogDirs' TotalBytes)",
            labels=["log_dir"],
        )
        usable = GaugeMetricFamily(
            "strom_log_dir_usable_bytes",
            "Bytes a writer may still use on a log dir's filesystem (DescribeLogDirs' UsableBytes)",
            labels=["log_dir"],
        )
        offline = GaugeMetricFamily(
            "strom_log_dir_offline",
            "1 while a log dir cannot be used (kafka.log:type=LogManager,"
            "name=OfflineLogDirectoryCount, per dir)",
            labels=["log_dir"],
        )
        for path, total_bytes, usable_bytes, is_offline in self._rows():
            offline.add_metric([path], 1 if is_offline else 0)
            if not is_offline:
                total.add_metric([path], total_bytes)
                usable.add_metric([path], usable_bytes)
        yield total
        yield usable
        yield offline
