"""The broker: wiring, startup, the main loop and graceful shutdown.

Startup replays the metadata log into an image (migrating a 0.1 data directory first),
recovers the logs the image places here and loads consumer groups, all before any
listener opens, so a client never sees a half-recovered broker. Shutdown stops
accepting, answers what was already read, waits for coordinator writes, then closes
the logs cleanly (so the next start skips recovery).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Sequence

from strom.clock import Clock, SystemClock
from strom.cluster import (
    broker_sessions,
    config_cache,
    controller,
    controller_channel,
    identity,
    isr_changes,
    loader,
    metadata_quorum,
    migration,
    topics,
)
from strom.cluster import image as images
from strom.config import broker as broker_config
from strom.coordinator import group as group_model
from strom.coordinator import groups as group_coordinator
from strom.coordinator import offsets_log, producer_ids
from strom.network import channel as channels
from strom.protocol import apis
from strom.records import batches
from strom.replication import fetcher, isr_updates, quotas, replica_manager
from strom.server import (
    cluster_control,
    cluster_metrics,
    context,
    dispatch,
    flow_control,
    group_placement,
    http,
    lifecycle,
    metric_readings,
    txn_service,
)
from strom.server import connection as connections
from strom.server import metrics as broker_metrics

log = logging.getLogger(__name__)

# Session and rebalance timeouts are checked this often.
GROUP_TICK_S = 0.1
# The active controller looks for brokers whose session expired this often.
FENCE_CHECK_S = 0.5
FENCE_RETRY_S = 0.05
# A starting broker says it still waits to be unfenced this often.
UNFENCE_LOG_EVERY_S = 10
# How long a stopping broker asks the controller to let it go (controlled shutdown): the
# controller moves its leaderships at once and lets it go once every active broker has
# reported that metadata in a heartbeat (broker.heartbeat.interval.ms, 2 s by default).
# Kafka's broker waits up to its shutdown timeout (5 minutes); a Strom broker that cannot
# reach a controller (the last nodes of a cluster stopping) should not hold its stop long.
CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0
# Kafka's SecurityProtocol ids, as RegisterBrokerRecord carries them.
_SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class Broker:
    def __init__(self, config: broker_config.BrokerConfig, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self.node_id = config.node_id
        self.metrics = broker_metrics.BrokerMetrics()
        log_dir = config.log_dirs[0]
        cluster_id = identity.ensure_identity(log_dir, config.node_id, config.cluster_id)
        self.metadata = loader.MetadataLoader(images.MetadataImage(cluster_id))
        self.metadata_log = metadata_quorum.MetadataQuorum(
            config.quorum,
            cluster_id,
            self.metadata,
            self.clock,
            directory_id=identity.ensure_directory_id(log_dir),
        )
        self.configs = config_cache.ConfigCache(config, lambda: self.metadata.image)
        self.replication_quotas = quotas.ReplicationQuotas.from_configs(
            config.node_id, self.configs, self.clock
        )
        self.fetchers = fetcher.Fetchers(
            config.node_id,
            lambda: -1 if self.lifecycle is None else (self.lifecycle.broker_epoch or -1),
            channels.TcpChannel(
                self._broker_endpoint,
                clock=self.clock,
                settings=channels.ChannelSettings(client_id=f"broker-{self.node_id}-fetcher"),
            ),
            _fetch_settings(config),
            self.clock,
            quota=self.replication_quotas.follower,
        )
        self.replicas = replica_manager.ReplicaManager(
            config.node_id,
            config.log_dirs,
            self.configs,
            self.clock,
            on_storage_error=self._count_storage_error,
            fetchers=self.fetchers,
            isr_updates=isr_updates.IsrUpdates(self._alter_isr, self.clock),
            quotas=self.replication_quotas,
        )
        self.controller = controller.Controller(
            config.node_id,
            self.metadata_log,
            self.metadata,
            lambda: self.configs.broker,
            self.replicas,
        )
        # How this node reaches the active controller when that is another node (None: a
        # quorum of one, always its own controller).
        self.controller_channel: controller_channel.ControllerChannel | None = None
        if not config.quorum.is_single_node:
            self.controller_channel = controller_channel.ControllerChannel(
                channels.TcpChannel(
                    controller_channel.controller_endpoints(config.quorum),
                    clock=self.clock,
                    settings=channels.ChannelSettings(client_id=f"broker-{self.node_id}"),
                ),
                self.metadata_log.active_controller,
                node_id=self.node_id,
                clock=self.clock,
            )
        self.metadata_watch = cluster_control.MetadataWatch(self.metadata, self.clock)
        self.cluster_control = cluster_control.ClusterControl(
            self.controller, self.controller_channel, self.metadata_watch
        )
        self.offsets_topic = context.InternalTopic(
            self.metadata,
            self.cluster_control,
            topics.OFFSETS_TOPIC,
            partitions=config.offsets_topic_num_partitions,
            replication_factor=config.offsets_topic_replication_factor,
            configs={
                "cleanup.policy": "compact",
                "segment.bytes": str(config.offsets_topic_segment_bytes),
            },
        )
        self.transactions_topic = context.InternalTopic(
            self.metadata,
            self.cluster_control,
            topics.TRANSACTIONS_TOPIC,
            partitions=config.get_int("transaction.state.log.num.partitions"),
            replication_factor=config.transaction_state_log_replication_factor,
            configs={
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "min.insync.replicas": str(config.get_int("transaction.state.log.min.isr")),
                "segment.bytes": str(config.get_int("transaction.state.log.segment.bytes")),
            },
        )
        self.groups = group_coordinator.GroupCoordinator(
            group_model.CoordinatorConfig(
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                max_group_size=config.group_max_size,
                offsets_retention_ms=config.offsets_retention_ms,
                offset_metadata_max_bytes=config.offset_metadata_max_bytes,
                consumer_protocol_enabled=config.group_consumer_protocol_enabled,
                consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
                consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
                consumer_assignors=tuple(config.group_consumer_assignors),
                consumer_migration_policy=config.group_consumer_migration_policy,
            ),
            store=offsets_log.PartitionsOffsetsLog(
                partition_count=self.offsets_topic.partition_count,
                create=self._create_offsets_topic,
                append_batch=self._append_offsets_batch,
                read_chunks=lambda index: self.replicas.log_chunks(topics.OFFSETS_TOPIC, index),
            ),
            group_session_timeout_ms=lambda group_id: (
                self.configs.group(group_id).consumer_session_timeout_ms
            ),
            group_heartbeat_interval_ms=lambda group_id: (
                self.configs.group(group_id).consumer_heartbeat_interval_ms
            ),
        )
        self.producer_ids = producer_ids.ProducerIdManager(
            lambda: self.cluster_control.allocate_producer_ids(self.node_id)
        )
        self.context = context.BrokerContext(
            node_id=config.node_id,
            metadata=self.metadata,
            configs=self.configs,
            replicas=self.replicas,
            controller=self.controller,
            groups=self.groups,
            producer_ids=self.producer_ids,
            metrics=self.metrics,
            clock=self.clock,
            offsets_topic=self.offsets_topic,
            transactions_topic=self.transactions_topic,
            quorum=self.metadata_log,
            quorum_rpc=self.metadata_log,
            controller_forwarder=self.controller_channel,
            cluster_control=self.cluster_control,
        )
        self.txn = txn_service.TransactionService(
            node_id=self.node_id,
            configs=self.configs,
            metadata=self.metadata,
            replicas=self.replicas,
            groups=self.groups,
            producer_id_manager=self.producer_ids,
            transactions_topic=self.transactions_topic,
            broker_endpoint=self._broker_endpoint,
            clock=self.clock,
        )
        self.context.transactions = self.txn.coordinator
        self.context.local_markers = self.txn.local_markers
        self.context.verify_transaction = self.txn.verify
        self.lifecycle: lifecycle.BrokerLifecycle | None = None
        self._servers: list[asyncio.Server] = []
        self._controller_servers: list[asyncio.Server] = []
        self._connections: set[connections.KafkaConnection] = set()
        self._controller_connections: set[connections.KafkaConnection] = set()
        self._request_memory = flow_control.RequestMemory(config.queued_max_request_bytes)
        self._http: http.HttpServer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._dispatcher = dispatch.Dispatcher(self.context)
        self._controller_dispatcher = dispatch.Dispatcher(
            self.context, handlers=dispatch.CONTROLLER_HANDLERS
        )
        self.loaded = False
        self.ready = False
        metric_readings.MetricReadings(
            node_id=self.node_id,
            metadata=self.metadata,
            metadata_log=self.metadata_log,
            configs=self.configs,
            replicas=self.replicas,
            fetchers=self.fetchers,
            replication_quotas=self.replication_quotas,
            groups=self.groups,
            fetch_sessions=self.context.fetch_sessions,
            transactions=self.txn.coordinator,
        ).watch(self.metrics)
        cluster_metrics.watch(self.metrics.registry, self.metadata_log, self.metadata)

    @property
    def config(self) -> broker_config.BrokerConfig:
        return self.configs.broker

    # Loading -------------------------------------------------------------------------

    async def load(self, *, coordinators: bool = True) -> None:
        """Metadata, logs and (with `coordinators`) groups and transactional ids, ready to
        serve. start() loads the coordinators only once caught up (`load_coordinators`)."""
        await self.metadata_log.start()
        legacy = migration.legacy_document(self.config.log_dirs[0])
        if legacy is not None and self.metadata.image.offset < 0:
            await self.metadata_log.append(migration.records_from_legacy(legacy, self.node_id))
        image = self.metadata.image
        if legacy is not None:
            migration.mark_migrated(legacy)
        self.configs.reload(image)
        self.replicas.load(image)
        self.metadata.add_publisher(self.configs)
        self.metadata.add_publisher(self.replicas)
        self.metadata.add_publisher(self.metadata_watch)
        if coordinators:
            self.load_coordinators()
        self.loaded = True

    def load_coordinators(self) -> None:
        """Coordinate the groups and transactional ids of the internal partitions led here
        in the image of now, and follow their leadership from here on."""
        image = self.metadata.image
        placement = group_placement.GroupPlacement(self.groups, self.node_id, self.clock)
        self.metadata.add_publisher(placement)
        self.metadata.add_publisher(self.txn.placement)
        self.txn.placement.load(image)
        loaded = placement.load(image)
        if self.offsets_topic.partition_count() is not None:
            log.info("loaded %d consumer group(s) from %s", loaded, topics.OFFSETS_TOPIC)

    async def _alter_isr(
        self, changes: Sequence[isr_changes.IsrChange]
    ) -> list[isr_changes.IsrOutcome]:
        epoch = -1 if self.lifecycle is None else self.lifecycle.broker_epoch
        return await self.cluster_control.alter_partition(
            self.node_id, -1 if epoch is None else epoch, changes
        )

    def _broker_endpoint(self, node_id: int) -> tuple[str, int] | None:
        """Where another broker listens to brokers (inter.broker.listener.name)."""
        broker = self.metadata.image.brokers.get(node_id)
        if broker is None:
            return None
        endpoint = broker.endpoint(self.config.inter_broker_listener_name)
        return None if endpoint is None else (endpoint.host, endpoint.port)

    def _count_storage_error(self, error: OSError) -> None:
        self.metrics.storage_errors.labels(error.strerror or type(error).__name__).inc()

    # __consumer_offsets for the group coordinator ------------------------------------

    async def _create_offsets_topic(self) -> int:
        try:
            topic = await self.offsets_topic.ensure()
        except topics.MetadataError as error:
            raise offsets_log.StoreFailed(f"cannot create {topics.OFFSETS_TOPIC}: {error}") from (
                error
            )
        return topic.partition_count

    async def _append_offsets_batch(
        self, index: int, data: bytearray, headers: list[batches.BatchHeader], now: int
    ) -> None:
        partition = self.replicas.partition(topics.OFFSETS_TOPIC, index)
        if partition is None:
            raise offsets_log.StoreFailed(f"{topics.OFFSETS_TOPIC}-{index} is not hosted here")
        min_isr = self.configs.topic(topics.OFFSETS_TOPIC).min_insync_replicas
        outcome = await partition.append_records(data, headers, now, min_isr)
        if outcome.error is not None:
            raise offsets_log.StoreFailed(outcome.message or outcome.error.value)

    # Lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # The other voters reach this node's quorum before it has caught up: first.
        await self._open_controller_listeners()
        coordinators_loaded = self.loaded
        if not self.loaded:
            await self.load(coordinators=False)
        advertised_by_name = {a.name: a for a in self.config.advertised_listeners}
        for listener in self.config.client_listeners:
            try:
                # Bound now (the registration names the port), served once caught up:
                # until then this node's metadata is its own log's, maybe long stale, and
                # it would answer as a leader or coordinator it no longer is (a consumer
                # told OFFSET_OUT_OF_RANGE by a stale leader starts over; Kafka enables
                # its acceptors only after the initial catch-up too).
                server = await loop.create_server(
                    lambda name=listener.name: self._new_connection(name),
                    host=listener.bind_host,
                    port=listener.port,
                    reuse_address=True,
                    backlog=1024,
                    start_serving=False,
                )
            except OSError as error:
                raise OSError(f"listeners: cannot listen on {listener}: {error}") from error
            self._servers.append(server)
            bound_port = server.sockets[0].getsockname()[1]
            advertised = advertised_by_name.get(listener.name)
            if advertised is not None:
                endpoint = context.Endpoint(
                    listener.name, advertised.host, advertised.port or bound_port
                )
            else:
                endpoint = context.Endpoint(listener.name, listener.host or "localhost", bound_port)
            self.context.endpoints.append(endpoint)
            log.info(
                "listening on %s (advertised as %s:%d)", listener, endpoint.host, endpoint.port
            )
        if self.config.metrics_listener is not None:
            host, port = self.config.metrics_listener
            self._http = http.HttpServer(
                self, host, port, port_may_move=not self.config.is_set("metrics.listener")
            )
            await self._http.start()
        await self._join_cluster()
        if not coordinators_loaded:
            # Caught up (the controller unfences only then): the coordinators load from
            # the current image, not from the stale one this node started with, which
            # could have finished a prepared transaction the other way.
            self.load_coordinators()
        for server in self._servers:
            await server.start_serving()
        self._tasks.append(loop.create_task(self._fence_expired_brokers()))
        self._tasks.append(loop.create_task(self._balance_leaders()))
        self._tasks.append(loop.create_task(self.replicas.run_maintenance()))
        self._tasks.append(loop.create_task(self.replicas.run_isr_checks()))
        self._tasks.append(loop.create_task(self._run_group_timers()))
        self._tasks.append(loop.create_task(self.txn.run_timers()))
        if self.config.get_bool("log.cleaner.enable"):
            self._tasks.append(loop.create_task(self.replicas.run_cleaner(self._cleaner_pass)))
        self.ready = True
        log.info(
            "Strom broker %d of cluster %s started with %d partition(s)",
            self.node_id,
            self.metadata.image.cluster_id,
            len(self.replicas),
        )

    async def _open_controller_listeners(self) -> None:
        if not self.config.quorum.is_controller:
            return
        loop = asyncio.get_running_loop()
        for listener in self.config.controller_listeners:
            try:
                server = await loop.create_server(
                    lambda name=listener.name: self._new_connection(name, controller=True),
                    host=listener.bind_host,
                    port=listener.port,
                    reuse_address=True,
                )
            except OSError as error:
                raise OSError(f"listeners: cannot listen on {listener}: {error}") from error
            self._controller_servers.append(server)
            log.info("controller listener on %s", listener)

    async def _join_cluster(self) -> None:
        """Register with the active controller and heartbeat; serve once unfenced (the
        controller unfences a broker that has caught up with the metadata log)."""
        protocols = {
            listener.name: listener.security_protocol for listener in self.config.client_listeners
        }
        registration = broker_sessions.Registration(
            node_id=self.node_id,
            cluster_id=self.metadata.image.cluster_id,
            incarnation_id=uuid.uuid4(),
            endpoints=tuple(
                images.BrokerEndpoint(
                    e.listener, e.host, e.port, _SECURITY_PROTOCOLS.get(protocols[e.listener], 0)
                )
                for e in self.context.endpoints
            ),
            rack=self.config.broker_rack,
        )
        self.lifecycle = lifecycle.BrokerLifecycle(
            self.controller_channel or self.controller,
            registration,
            metadata_offset=lambda: self.metadata.image.offset,
            clock=self.clock,
            heartbeat_interval_ms=self.config.quorum.broker_heartbeat_interval_ms,
        )
        self.lifecycle.start()
        waited = 0
        while True:
            try:
                await asyncio.wait_for(self.lifecycle.unfenced.wait(), UNFENCE_LOG_EVERY_S)
                return
            except TimeoutError:
                waited += UNFENCE_LOG_EVERY_S
                log.info(
                    "broker %d waits to be unfenced by the active controller (%s) for %d s",
                    self.node_id,
                    self.metadata_log.active_controller(),
                    waited,
                )

    async def _fence_expired_brokers(self) -> None:
        """On the active controller: fence a broker as soon as its session runs out (the
        failover time of its partitions starts there), checking at least every
        FENCE_CHECK_S for brokers that registered meanwhile."""
        active = False
        wait_s = FENCE_CHECK_S
        while True:
            await self.clock.sleep(wait_s)
            wait_s = FENCE_CHECK_S
            if not self.metadata_log.is_active_controller():
                active = False
                continue
            now = self.clock.time_ms()
            if not active:
                # Newly active: the heartbeats went to another controller meanwhile, so
                # every broker gets a fresh session (Kafka's controller does the same).
                self.controller.activate_sessions(now)
                active = True
            try:
                await self.controller.fence_expired_brokers(now)
            except topics.MetadataError as error:
                log.debug("fencing expired brokers: %s", error)
            expiry = self.controller.next_session_expiry_ms(self.clock.time_ms())
            if expiry is not None:
                # not sooner than FENCE_RETRY_S: a fence that could not commit (no quorum)
                # is tried again, not spun on
                until_s = (expiry - self.clock.time_ms() + 1) / 1000
                wait_s = min(max(until_s, FENCE_RETRY_S), FENCE_CHECK_S)

    async def _balance_leaders(self) -> None:
        """auto.leader.rebalance.enable: the active controller gives partitions back to
        their preferred replicas every leader.imbalance.check.interval.seconds (the first
        time one interval after start, as Kafka's controller schedules it)."""
        while True:
            await self.clock.sleep(self.config.get_int("leader.imbalance.check.interval.seconds"))
            if not (
                self.config.get_bool("auto.leader.rebalance.enable")
                and self.metadata_log.is_active_controller()
            ):
                continue
            try:
                await self.controller.balance_leaders()
            except topics.MetadataError as error:
                log.debug("balancing partition leaders: %s", error)

    def _cleaner_pass(self, removed: int) -> None:
        self.metrics.cleaner_records_removed.inc(removed)
        self.metrics.cleaner_passes.inc()

    def _new_connection(
        self, listener_name: str, *, controller: bool = False
    ) -> connections.KafkaConnection:
        dispatcher = self._controller_dispatcher if controller else self._dispatcher
        tracked = self._controller_connections if controller else self._connections
        connection = connections.KafkaConnection(
            dispatch=lambda request, peer: dispatcher.dispatch(request, listener_name, peer),
            max_request_bytes=self.config.socket_request_max_bytes,
            metrics=self.metrics,
            on_close=tracked.discard,
            request_memory=self._request_memory,
            listener=listener_name,
            versions=apis.CONTROLLER_VERSIONS if controller else apis.SUPPORTED_VERSIONS,
        )
        tracked.add(connection)
        return connection

    async def _run_group_timers(self) -> None:
        next_expiry = self.clock.time_ms() + self.config.offsets_retention_check_interval_ms
        while True:
            await self.clock.sleep(GROUP_TICK_S)
            now = self.clock.time_ms()
            try:
                self.groups.tick(now)
            except Exception:
                log.exception("consumer group timers failed")
            if now >= next_expiry:
                try:
                    dropped = await self.groups.expire_offsets(now)
                except Exception:
                    log.exception("expiring committed offsets failed")
                    dropped = 0
                if dropped:
                    log.info("expired %d committed offset(s)", dropped)
                next_expiry = now + self.config.offsets_retention_check_interval_ms

    async def stop(self) -> None:
        self.ready = False
        # Kafka's order: the controller moves this broker's leaderships away while it
        # still serves (its followers catch up, clients learn the new leaders), then the
        # listeners close.
        if self.lifecycle is not None:
            await self.lifecycle.shut_down(CONTROLLED_SHUTDOWN_TIMEOUT_S)
        await self.replicas.stop_replication()
        for server in self._servers:
            server.close()
        await asyncio.gather(
            *(c.drain_and_close() for c in list(self._connections)), return_exceptions=True
        )
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._http is not None:
            await self._http.stop()
        await self.groups.drain()
        await self.txn.close()
        await self.metadata_log.stop()
        await self.fetchers.close()
        if self.controller_channel is not None:
            await self.controller_channel.close()
        for server in self._controller_servers:
            server.close()
        await asyncio.gather(
            *(c.drain_and_close() for c in list(self._controller_connections)),
            return_exceptions=True,
        )
        self.close()
        log.info("Strom broker %d stopped cleanly", self.node_id)

    def close(self) -> None:
        """Close the logs (after stop(), or for a broker that was only loaded)."""
        self.replicas.close()
        self.metadata_log.close()


def _fetch_settings(config: broker_config.BrokerConfig) -> fetcher.FetchSettings:
    return fetcher.FetchSettings(
        max_bytes=config.get_int("replica.fetch.max.bytes"),
        response_max_bytes=config.get_int("replica.fetch.response.max.bytes"),
        min_bytes=config.get_int("replica.fetch.min.bytes"),
        max_wait_ms=config.get_int("replica.fetch.wait.max.ms"),
        backoff_ms=config.get_int("replica.fetch.backoff.ms"),
        socket_timeout_ms=config.get_int("replica.socket.timeout.ms"),
    )
