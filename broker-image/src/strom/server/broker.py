"""The broker: startup, the main loop, and graceful shutdown.

Startup loads metadata and recovers every partition log before any listener opens, so a
client never sees a half-recovered partition. Shutdown stops accepting, answers what
was already read, then closes the logs cleanly (so the next start skips recovery).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from strom.cluster import metadata as cluster_metadata
from strom.config import altering as config_altering
from strom.config import broker as broker_config
from strom.config import topics as topic_config
from strom.coordinator import group as group_model
from strom.coordinator import groups as group_protocol
from strom.coordinator import offsets_log
from strom.records import batches
from strom.replication import partition as replicated_partition
from strom.server import connection as connections
from strom.server import dispatch, flow_control, http
from strom.server import metrics as broker_metrics
from strom.storage import cleaner, log_config, log_manager, partition_log

log = logging.getLogger(__name__)

MAINTENANCE_INTERVAL_CAP_MS = 30_000
OFFSETS_TOPIC = cluster_metadata.OFFSETS_TOPIC
# Session and rebalance timeouts are checked this often.
GROUP_TICK_S = 0.1
# __consumer_offsets is read back in chunks of this size at startup.
LOAD_CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Broker:
    def __init__(self, config: broker_config.BrokerConfig) -> None:
        self.config = config
        self.clock = now_ms
        self.node_id = config.node_id
        self.metrics = broker_metrics.BrokerMetrics()
        self.metadata = cluster_metadata.MetadataStore(
            config.log_dirs[0], config.node_id, config.cluster_id
        )
        self.config = self._with_stored_dynamic_configs(config)
        self.logs = log_manager.LogManager(config.log_dirs, now_ms=now_ms)
        self.partitions: dict[tuple[str, int], replicated_partition.Partition] = {}
        self._topic_configs: dict[str, topic_config.TopicConfig] = {}
        self.advertised: list[Endpoint] = []
        self._servers: list[asyncio.Server] = []
        self._connections: set[connections.KafkaConnection] = set()
        self._request_memory = flow_control.RequestMemory(config.queued_max_request_bytes)
        self._http: http.HttpServer | None = None
        self._maintenance: asyncio.Task[None] | None = None
        self._dispatcher = dispatch.Dispatcher(self)
        self.groups = group_protocol.GroupCoordinator(
            group_model.CoordinatorConfig(
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                max_group_size=config.group_max_size,
                offsets_retention_ms=config.offsets_retention_ms,
                offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            ),
            store=offsets_log.PartitionsOffsetsLog(
                partition_count=self._offsets_partition_count,
                create=lambda: self.ensure_offsets_topic().partitions,
                append_batch=self._append_offsets_batch,
                read_chunks=self._offsets_chunks,
            ),
        )
        self._group_timers: asyncio.Task[None] | None = None
        self._cleaner: asyncio.Task[None] | None = None
        self.ready = False
        self.metrics.watch_logs(self._log_rows)
        self.metrics.watch_groups(self._group_rows)

    # Topics and partitions -----------------------------------------------------------

    def topic_config(self, topic: str) -> topic_config.TopicConfig:
        """The effective config of a topic, cached: resolving it costs ~60 µs, which the
        produce path pays per partition otherwise. Dropped when the topic changes."""
        cached = self._topic_configs.get(topic)
        if cached is None:
            stored = self.metadata.image.topics.get(topic)
            overrides = stored.configs if stored else {}
            cached = topic_config.effective_topic_config(self.config, overrides)
            if stored is not None:
                self._topic_configs[topic] = cached
        return cached

    def topic_config_entries(self, overrides: Mapping[str, str | None]) -> list[Any]:
        """The configs a topic with these overrides has (CreateTopics reports them)."""
        valid = topic_config.validate_topic_configs(overrides)
        return list(topic_config.effective_topic_config(self.config, valid).entries())

    def log_config(self, topic: str) -> log_config.LogConfig:
        return to_log_config(self.topic_config(topic), self.config.producer_id_expiration_ms)

    def partition(self, topic: str, index: int) -> replicated_partition.Partition | None:
        return self.partitions.get((topic, index))

    def _open_partitions(self, topic: cluster_metadata.TopicMetadata) -> None:
        config = self.log_config(topic.name)
        for index in range(topic.partitions):
            if (topic.name, index) not in self.partitions:
                partition_log = self.logs.get_or_create(topic.name, index, config)
                self.partitions[(topic.name, index)] = replicated_partition.Partition(
                    topic.name, index, partition_log
                )

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        validate_only: bool = False,
    ) -> cluster_metadata.TopicMetadata | None:
        """Validate and (unless validate_only) create; raises MetadataError or ConfigError."""
        valid_configs = topic_config.validate_topic_configs(configs)
        if validate_only:
            self.metadata.check_new_topic(name, partitions, replication_factor)
            return None
        topic = self.metadata.create_topic(name, partitions, replication_factor, valid_configs)
        self._open_partitions(topic)
        log.info("created topic %s with %d partition(s)", name, partitions)
        return topic

    def auto_create_topic(
        self, name: str, requested_by: str = ""
    ) -> cluster_metadata.TopicMetadata:
        """Metadata's auto-creation (auto.create.topics.enable), with broker defaults."""
        topic = self.metadata.create_topic(
            name, self.config.num_partitions, self.config.default_replication_factor, {}
        )
        self._open_partitions(topic)
        log.info(
            "auto-created topic %s with %d partition(s) for a metadata request of %s",
            name,
            topic.partitions,
            requested_by or "a client",
        )
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self.metadata.delete_topic(name)
        self._topic_configs.pop(name, None)
        for index in range(topic.partitions):
            self.partitions.pop((name, index), None)
            self.logs.delete_partition(name, index)
        dropped = self.groups.forget_topic(name, self.clock())
        log.info("deleted topic %s (and %d committed offset(s) of it)", name, dropped)

    def add_partitions(self, name: str, total: int, validate_only: bool) -> None:
        if validate_only:
            self.metadata.check_partition_increase(name, total)
            return
        topic = self.metadata.increase_partitions(name, total)
        self._open_partitions(topic)

    # Configs changed at run time ---------------------------------------------------

    def _with_stored_dynamic_configs(
        self, config: broker_config.BrokerConfig
    ) -> broker_config.BrokerConfig:
        loaded, warnings = config_altering.load_dynamic_layers(
            config,
            cluster_defaults=self.metadata.image.dynamic_broker_configs(""),
            per_broker=self.metadata.image.dynamic_broker_configs(str(self.node_id)),
        )
        for warning in warnings:
            log.warning("%s", warning)
        return loaded

    def alter_topic_configs(self, name: str, overrides: Mapping[str, str]) -> None:
        """Store a topic's new overrides (validated) and apply them to its logs at once."""
        topic = self.metadata.set_topic_configs(name, overrides)
        self._topic_configs.pop(name, None)
        self._apply_log_config(topic)
        log.info("altered configs of topic %s: %s", name, overrides or "none")

    def alter_broker_configs(
        self, resource_name: str, layer: Mapping[str, str], config: broker_config.BrokerConfig
    ) -> None:
        """Store a dynamic broker layer ("" = cluster-wide defaults, else this broker's)
        and switch to `config`, the broker config checked with it; every topic config
        falls back to the broker's, so all of them are resolved again and applied."""
        self.metadata.set_broker_configs(resource_name, layer)
        self.config = config
        self._topic_configs.clear()
        for topic in list(self.metadata.image.topics.values()):
            self._apply_log_config(topic)
        which = "cluster-wide default" if resource_name == "" else f"broker {resource_name}"
        log.info("altered dynamic %s configs: %s", which, dict(layer) or "none")

    def _apply_log_config(self, topic: cluster_metadata.TopicMetadata) -> None:
        config = self.log_config(topic.name)
        for index in range(topic.partitions):
            partition = self.partitions.get((topic.name, index))
            if partition is not None and partition.log.config != config:
                partition.log.update_config(config)

    # Consumer groups ---------------------------------------------------------------

    def ensure_offsets_topic(self) -> cluster_metadata.TopicMetadata:
        """`__consumer_offsets`, created on first use as Kafka does."""
        existing = self.metadata.image.topics.get(OFFSETS_TOPIC)
        if existing is not None:
            return existing
        topic = self.metadata.create_topic(
            OFFSETS_TOPIC,
            self.config.offsets_topic_num_partitions,
            self.config.offsets_topic_replication_factor,
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config.offsets_topic_segment_bytes),
            },
        )
        self._open_partitions(topic)
        log.info("created %s with %d partitions", OFFSETS_TOPIC, topic.partitions)
        return topic

    def _offsets_partition_count(self) -> int | None:
        topic = self.metadata.image.topics.get(OFFSETS_TOPIC)
        return None if topic is None else topic.partitions

    def _append_offsets_batch(
        self, index: int, data: bytearray, headers: list[batches.BatchHeader], now: int
    ) -> None:
        try:
            self.partitions[(OFFSETS_TOPIC, index)].append(data, headers, now_ms=now)
        except OSError as error:
            self.metrics.storage_errors.labels(error.strerror or type(error).__name__).inc()
            raise

    def _offsets_chunks(self, index: int) -> Iterator[bytes]:
        return _log_chunks(self.partitions[(OFFSETS_TOPIC, index)])

    def _load_groups(self) -> None:
        if self._offsets_partition_count() is None:
            return
        self.groups.load(self.clock())
        log.info("loaded %d consumer group(s) from %s", len(self.groups.groups), OFFSETS_TOPIC)

    async def _run_group_timers(self) -> None:
        next_expiry = self.clock() + self.config.offsets_retention_check_interval_ms
        while True:
            await asyncio.sleep(GROUP_TICK_S)
            now = self.clock()
            try:
                self.groups.tick(now)
            except Exception:
                log.exception("consumer group timers failed")
            if now >= next_expiry:
                dropped = await self.groups.expire_offsets(now)
                if dropped:
                    log.info("expired %d committed offset(s)", dropped)
                next_expiry = now + self.config.offsets_retention_check_interval_ms

    def _group_rows(self) -> list[broker_metrics.GroupRow]:
        rows: list[broker_metrics.GroupRow] = []
        for group in list(self.groups.groups.values()):
            offsets = []
            for (topic, index), committed in group.offsets.items():
                partition = self.partitions.get((topic, index))
                if partition is not None:
                    behind = max(partition.high_watermark - committed.offset, 0)
                    offsets.append((topic, index, committed.offset, behind))
            rows.append((group.group_id, group.state.value, len(group.members), offsets))
        return rows

    def _log_rows(self) -> list[tuple[str, int, int, int, int, int]]:
        return [
            (
                topic,
                index,
                p.log.size_bytes,
                p.log.log_start_offset,
                p.log.log_end_offset,
                p.log.segment_count,
            )
            for (topic, index), p in list(self.partitions.items())
        ]

    # Lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        self.logs.load_all(self.log_config)
        for topic in list(self.metadata.image.topics.values()):
            self._open_partitions(topic)
        self._load_groups()
        loop = asyncio.get_running_loop()
        advertised_by_name = {a.name: a for a in self.config.advertised_listeners}
        for listener in self.config.client_listeners:
            try:
                server = await loop.create_server(
                    lambda name=listener.name: self._new_connection(name),
                    host=listener.bind_host,
                    port=listener.port,
                    reuse_address=True,
                    backlog=1024,
                )
            except OSError as error:
                raise OSError(f"listeners: cannot listen on {listener}: {error}") from error
            self._servers.append(server)
            bound_port = server.sockets[0].getsockname()[1]
            advertised = advertised_by_name.get(listener.name)
            if advertised is not None:
                endpoint = Endpoint(listener.name, advertised.host, advertised.port or bound_port)
            else:
                endpoint = Endpoint(listener.name, listener.host or "localhost", bound_port)
            self.advertised.append(endpoint)
            log.info(
                "listening on %s (advertised as %s:%d)", listener, endpoint.host, endpoint.port
            )
        if self.config.metrics_listener is not None:
            host, port = self.config.metrics_listener
            self._http = http.HttpServer(self, host, port)
            await self._http.start()
        self._maintenance = loop.create_task(self._maintain())
        self._group_timers = loop.create_task(self._run_group_timers())
        if self.config.get_bool("log.cleaner.enable"):
            self._cleaner = loop.create_task(self._run_cleaner())
        self.ready = True
        log.info(
            "Strom broker %d of cluster %s started with %d partition(s)",
            self.node_id,
            self.metadata.image.cluster_id,
            len(self.partitions),
        )

    def _new_connection(self, listener_name: str) -> connections.KafkaConnection:
        connection = connections.KafkaConnection(
            dispatch=lambda request, peer: self._dispatcher.dispatch(request, listener_name, peer),
            max_request_bytes=self.config.socket_request_max_bytes,
            metrics=self.metrics,
            on_close=self._connections.discard,
            request_memory=self._request_memory,
        )
        self._connections.add(connection)
        return connection

    async def _run_cleaner(self) -> None:
        """Compact the dirtiest compacted log, again and again; rest log.cleaner.backoff.ms
        when none is due. The reading and writing run in a worker thread."""
        while True:
            try:
                cleaned = await self._clean_dirtiest()
            except Exception:
                log.exception("log cleaner pass failed")
                cleaned = False
            backoff_ms = self.config.get_int("log.cleaner.backoff.ms")
            await asyncio.sleep(0 if cleaned else backoff_ms / 1000)

    async def _clean_dirtiest(self) -> bool:
        now = now_ms()
        chosen: tuple[partition_log.PartitionLog, cleaner.CleaningPlan] | None = None
        for _, candidate in self.logs:
            plan = candidate.plan_cleaning(now)
            if plan is not None and (chosen is None or plan.dirty_ratio > chosen[1].dirty_ratio):
                chosen = (candidate, plan)
        if chosen is None:
            return False
        target, plan = chosen
        throttle = cleaner.Throttle(self.config.get_float("log.cleaner.io.max.bytes.per.second"))
        started = time.monotonic()
        try:
            groups = await asyncio.to_thread(cleaner.run_pass, plan, throttle)
        except (cleaner.CleaningAborted, OSError, batches.RecordsError) as error:
            log.warning("cleaning %s stopped: %s", plan.directory.name, error)
            cleaner.discard_cleaned(plan.directory)
            return False
        swapped = [target.replace_segments(group) for group in groups]
        if all(swapped):
            cleaner.finish(plan, groups, target.config.delete_retention_ms)
        removed = sum(g.records_removed for g in groups)
        self.metrics.cleaner_records_removed.inc(removed)
        self.metrics.cleaner_passes.inc()
        log.info(
            "cleaned %s up to offset %d in %.2fs: %d record(s) removed",
            plan.directory.name,
            plan.end_offset,
            time.monotonic() - started,
            removed,
        )
        return all(swapped)

    async def _maintain(self) -> None:
        interval = min(self.config.log_retention_check_interval_ms, MAINTENANCE_INTERVAL_CAP_MS)
        while True:
            await asyncio.sleep(interval / 1000)
            try:
                self.logs.run_maintenance(now_ms())
            except Exception:
                log.exception("log maintenance failed")

    async def stop(self) -> None:
        self.ready = False
        for server in self._servers:
            server.close()
        await asyncio.gather(
            *(c.drain_and_close() for c in list(self._connections)), return_exceptions=True
        )
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)
        for task in (self._maintenance, self._group_timers, self._cleaner):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._http is not None:
            await self._http.stop()
        await self.groups.drain()
        self.logs.close_all()
        log.info("Strom broker %d stopped cleanly", self.node_id)

    def endpoint_for(self, listener_name: str) -> Endpoint:
        for endpoint in self.advertised:
            if endpoint.listener == listener_name:
                return endpoint
        return self.advertised[0]


def _log_chunks(partition: replicated_partition.Partition) -> Iterator[bytes]:
    """The whole batches of a partition up to its high watermark, in bounded chunks."""
    offset = partition.log.log_start_offset
    end = partition.high_watermark
    while offset < end:
        read = partition.log.read(offset, LOAD_CHUNK_BYTES, max_offset=end)
        if read.total_bytes == 0:
            break
        data = read.read_into_bytes()
        for header in batches.iter_batches(data):
            offset = header.last_offset + 1
        yield data


def to_log_config(
    topic: topic_config.TopicConfig, producer_id_expiration_ms: int
) -> log_config.LogConfig:
    return log_config.LogConfig(
        segment_bytes=topic.segment_bytes,
        segment_ms=topic.segment_ms,
        retention_ms=topic.retention_ms,
        retention_bytes=topic.retention_bytes,
        index_interval_bytes=topic.index_interval_bytes,
        segment_index_bytes=topic.segment_index_bytes,
        file_delete_delay_ms=topic.file_delete_delay_ms,
        max_message_bytes=topic.max_message_bytes,
        message_timestamp_type=topic.message_timestamp_type,
        cleanup_policy=tuple(topic.cleanup_policy),
        delete_retention_ms=topic.delete_retention_ms,
        min_cleanable_dirty_ratio=topic.min_cleanable_dirty_ratio,
        min_compaction_lag_ms=topic.min_compaction_lag_ms,
        max_compaction_lag_ms=topic.max_compaction_lag_ms,
        flush_messages=topic.flush_messages,
        flush_ms=topic.flush_ms,
        producer_id_expiration_ms=producer_id_expiration_ms,
    )
