"""The replica manager: the partitions this broker hosts, and their logs' life cycle.

It owns the partition map and the log manager. As a metadata publisher it opens the
logs of partitions placed on this broker, deletes those of removed topics and hands
logs their new config; the controller asks it to prepare a new topic's logs before the
topic is committed (off the event loop, in bounded batches) and to remove them again if
the commit fails. Its background tasks run retention, flushes and the log cleaner.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from strom.clock import Clock
from strom.cluster import config_cache, topics
from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.records import batches
from strom.replication import fetcher
from strom.replication import isr_updates as isr_updates_module
from strom.replication import partition as partitions
from strom.replication import quotas as quotas_module
from strom.storage import cleaner, log_manager, partition_log

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int]
# Logs created per worker-thread call: the event loop serves requests in between.
CREATE_BATCH = 500
MAINTENANCE_INTERVAL_CAP_MS = 30_000


class ReplicaNotServedError(Exception):
    """The broker does not serve this replica (not placed here, or being moved)."""


class ReplicaManager:
    name = "replica manager"

    def __init__(
        self,
        node_id: int,
        log_dirs: Sequence[Path],
        configs: config_cache.ConfigCache,
        clock: Clock,
        on_storage_error: Callable[[OSError], None] = lambda error: None,
        *,
        fetchers: fetcher.Fetchers | None = None,
        isr_updates: isr_updates_module.IsrUpdates | None = None,
        quotas: quotas_module.ReplicationQuotas | None = None,
    ) -> None:
        self.node_id = node_id
        # the replication quotas (the fetch handler applies the leader's)
        self.quotas = quotas or quotas_module.ReplicationQuotas.from_configs(
            node_id, configs, clock
        )
        self.fetchers = fetchers
        self.isr_updates = isr_updates
        self.logs = log_manager.LogManager(log_dirs, now_ms=clock.time_ms)
        self._configs = configs
        self._clock = clock
        self._now_ms = clock.time_ms
        self._on_storage_error = on_storage_error
        self._partitions: dict[PartitionKey, partitions.Partition] = {}
        # the latest image published, and the replicas whose logs are being made
        self._image = images.MetadataImage("")
        self._creating: set[PartitionKey] = set()
        self._creations: set[asyncio.Task[None]] = set()
        # replicas whose logs move between log dirs (not served until moved)
        self._moving: set[PartitionKey] = set()

    # Lookups ---------------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> partitions.Partition | None:
        return self._partitions.get((topic, index))

    def __iter__(self) -> Iterator[partitions.Partition]:
        return iter(list(self._partitions.values()))

    def __len__(self) -> int:
        return len(self._partitions)

    # Start-up --------------------------------------------------------------------------

    def load(self, image: images.MetadataImage) -> None:
        """Recover the logs found on disk and serve those the image places here."""
        self._image = image
        self.logs.load_all(self._configs.log_config)
        for topic, state in image.partitions_of(self.node_id):
            self._serve(topic, state)
        hosted = set(self._partitions)
        strays = [key for key, _ in self.logs if key not in hosted]
        for topic_name, index in strays:
            log.warning(
                "%s-%d is on disk but not in the cluster metadata: not served", topic_name, index
            )

    def _serve(self, topic: images.TopicImage, state: images.PartitionImage) -> None:
        key = (topic.name, state.index)
        partition = self._partitions.get(key)
        if partition is not None:
            partition.become(state)
        else:
            partition_log_ = self.logs.get_or_create(
                topic.name, state.index, self._configs.log_config(topic.name)
            )
            partition = partitions.Partition(
                topic.name,
                state.index,
                partition_log_,
                self.node_id,
                state,
                self._on_storage_error,
                now_ms=self._now_ms,
                propose_isr=self._propose_isr,
            )
            partition.topic_id = topic.topic_id
            self._partitions[key] = partition
        if self.fetchers is not None:
            if partition.is_leader:
                self.fetchers.unfollow(key)
            else:
                self.fetchers.follow(partition)

    def _propose_isr(self, partition: partitions.Partition, isr: tuple[int, ...]) -> None:
        if self.isr_updates is None:
            partition.isr_answered(None, -1, -1)  # no controller to ask (a unit test)
        else:
            self.isr_updates.propose(partition, isr)

    # Metadata publisher ----------------------------------------------------------------

    def publish(self, delta: deltas.MetadataDelta, image: images.MetadataImage) -> None:
        self._image = image
        for removed in delta.removed_topics.values():
            self._remove_topic(removed)
        to_create: list[PartitionKey] = []
        for topic_id, indexes in delta.changed_partitions.items():
            topic = image.topic_by_id(topic_id)
            if topic is None:
                continue
            for index in sorted(indexes):
                state = topic.partitions[index]
                key = (topic.name, index)
                if self.node_id not in state.replicas:
                    self._stop_serving(topic.name, index, delete=True)
                elif key in self._moving:
                    continue  # served as the image then has it once moved
                elif key in self._partitions or self.logs.get(*key) is not None:
                    self._serve(topic, state)
                elif key not in self._creating:
                    to_create.append(key)
        if to_create:
            self._create_then_serve(to_create)
        if delta.changed_broker_configs:
            for topic in image.topics.values():
                self._apply_config(topic)
        else:
            for topic_id in delta.changed_topic_configs:
                topic = image.topic_by_id(topic_id)
                if topic is not None:
                    self._apply_config(topic)

    def _remove_topic(self, topic: images.TopicImage) -> None:
        for index in topic.partitions:
            self._stop_serving(topic.name, index, delete=True)

    def _stop_serving(self, topic: str, index: int, *, delete: bool) -> None:
        if self.fetchers is not None:
            self.fetchers.unfollow((topic, index))
        partition = self._partitions.pop((topic, index), None)
        if partition is not None:
            partition.close_waiters()
        if delete and (topic, index) not in self._creating | self._moving:
            self.logs.delete_partition(topic, index)  # else removed once created or moved

    # Moving a replica between log dirs (AlterReplicaLogDirs) ------------------------------

    def begin_move(self, topic: str, index: int, target_dir: Path) -> None:
        """Start moving a served replica's log to `target_dir`, one of the log dirs (done
        when DescribeLogDirs lists it there). The replica is not served while its log is
        closed, moved (a rename, or a copy in a worker thread between filesystems) and
        opened again: clients retry as after a leader change. Kafka instead copies into a
        "future" log while serving, then swaps. Raises ReplicaNotServedError when this
        broker does not serve the replica (or is moving it already)."""
        key = (topic, index)
        if key not in self._partitions or key in self._moving:
            raise ReplicaNotServedError(f"{topic}-{index} is not served here")
        if self.logs.log_dir_of(topic, index) == target_dir:
            return
        self._moving.add(key)
        self._stop_serving(topic, index, delete=False)
        task = asyncio.get_running_loop().create_task(self._move(key, target_dir))
        self._creations.add(task)
        task.add_done_callback(self._creations.discard)

    async def _move(self, key: PartitionKey, target_dir: Path) -> None:
        try:
            await asyncio.to_thread(self.logs.move_log, *key, target_dir)
            log.info("moved the log of %s-%d to %s", *key, target_dir)
        except OSError as error:
            log.error("cannot move the log of %s-%d to %s: %s", *key, target_dir, error)
            self._on_storage_error(error)
        except asyncio.CancelledError:  # shutting down: nothing to serve any more
            self._moving.discard(key)
            raise
        self._moving.discard(key)
        self._serve_current(key)

    # Logs of new replicas placed here by another node's controller ---------------------

    def _create_then_serve(self, keys: list[PartitionKey]) -> None:
        """Create the logs in worker threads and serve them once made: a follower applying
        a big CreateTopics must not stop the event loop (its Raft fetches, heartbeats and
        clients) for seconds. Until then the partitions answer as not hosted here."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # replayed outside the event loop (a test): at once
            for key in keys:
                self._serve_current(key)
            return
        self._creating.update(keys)
        task = loop.create_task(self._create_in_threads(keys))
        self._creations.add(task)
        task.add_done_callback(self._creations.discard)

    async def _create_in_threads(self, keys: list[PartitionKey]) -> None:
        try:
            for start in range(0, len(keys), CREATE_BATCH):
                chunk = keys[start : start + CREATE_BATCH]
                try:
                    await asyncio.to_thread(self.logs.create_many, chunk, self._configs.log_config)
                except OSError as error:
                    self._on_storage_error(error)
                    log.error("cannot create the logs of %d replica(s): %s", len(chunk), error)
                    return
                for key in chunk:
                    self._creating.discard(key)
                    self._serve_current(key)
        finally:
            self._creating.difference_update(keys)

    def _serve_current(self, key: PartitionKey) -> None:
        """Serve a replica as the latest image has it, or remove its log if the image no
        longer places it here (deleted while its log was being made)."""
        state = self._image.partition(*key)
        topic = self._image.topics.get(key[0])
        if topic is not None and state is not None and self.node_id in state.replicas:
            self._serve(topic, state)
        elif key not in self._partitions and self.logs.get(*key) is not None:
            self.logs.delete_partition(*key)

    def _apply_config(self, topic: images.TopicImage) -> None:
        config = self._configs.log_config(topic.name)
        for index in topic.partitions:
            partition = self._partitions.get((topic.name, index))
            if partition is not None:
                partition.update_config(config)

    # New partitions (the controller's LogPreparer) -------------------------------------

    async def prepare_logs(self, keys: Sequence[PartitionKey]) -> None:
        """Create the logs of new partitions in a worker thread, CREATE_BATCH at a time,
        while the event loop keeps serving; on a disk error remove what was created and
        raise StorageFailedError."""
        missing = [key for key in keys if self.logs.get(*key) is None]
        configs = {topic: self._configs.log_config(topic) for topic, _ in missing}
        attempted: list[PartitionKey] = []
        try:
            for start in range(0, len(missing), CREATE_BATCH):
                chunk = missing[start : start + CREATE_BATCH]
                attempted += chunk
                await asyncio.to_thread(self.logs.create_many, chunk, configs.__getitem__)
        except OSError as error:
            self._on_storage_error(error)
            await self.abandon_logs(attempted)
            where = f"{keys[0][0]}-{keys[0][1]}" if len(keys) == 1 else f"{len(keys)} partitions"
            raise topics.StorageFailedError(
                f"Cannot create the logs of {where}: {error.strerror or error}"
            ) from error

    async def abandon_logs(self, keys: Sequence[PartitionKey]) -> None:
        def remove() -> None:
            for topic, index in keys:
                if (topic, index) not in self._partitions:
                    try:
                        self.logs.delete_partition(topic, index)
                    except OSError as error:
                        log.warning("cannot remove the log of %s-%d: %s", topic, index, error)

        await asyncio.to_thread(remove)

    # Reading a whole partition (coordinator state) ---------------------------------------

    def log_chunks(self, topic: str, index: int) -> Iterator[bytes]:
        """The whole batches of a hosted partition up to its log end, in chunks: what a
        new leader's coordinator loads (Kafka's coordinators read to the log end, the new
        leader's log being the one that will be committed)."""
        partition = self._partitions.get((topic, index))
        if partition is not None:
            yield from partition.log.committed_chunks(to_log_end=True)

    # Background work -------------------------------------------------------------------

    async def run_maintenance(self) -> None:
        """Time roll, retention, delayed deletes and due flushes, forever."""
        while True:
            interval = min(
                self._configs.broker.log_retention_check_interval_ms, MAINTENANCE_INTERVAL_CAP_MS
            )
            await self._clock.sleep(interval / 1000)
            try:
                self.logs.run_maintenance(self._now_ms())
            except Exception:
                log.exception("log maintenance failed")

    async def run_isr_checks(self) -> None:
        """Kafka's ISR expiration task: every half replica.lag.time.max.ms, each partition
        led here proposes its ISR without the followers that stopped catching up."""
        while True:
            max_lag_ms = self._configs.broker.get_int("replica.lag.time.max.ms")
            await self._clock.sleep(max_lag_ms / 2000)
            for partition in list(self._partitions.values()):
                if partition.is_leader and len(partition.isr) > 1:
                    try:
                        partition.shrink_isr_if_lagging(max_lag_ms)
                    except Exception:
                        log.exception("ISR check of %s failed", partition)

    async def run_cleaner(self, on_pass: Callable[[int], None]) -> None:
        """Compact the dirtiest compacted log, again and again; rest log.cleaner.backoff.ms
        when none is due. The reading and writing run in a worker thread."""
        while True:
            try:
                cleaned = await self._clean_dirtiest(on_pass)
            except Exception:
                log.exception("log cleaner pass failed")
                cleaned = False
            backoff_ms = self._configs.broker.get_int("log.cleaner.backoff.ms")
            await self._clock.sleep(0 if cleaned else backoff_ms / 1000)

    async def _clean_dirtiest(self, on_pass: Callable[[int], None]) -> bool:
        now = self._now_ms()
        chosen: tuple[partition_log.PartitionLog, cleaner.CleaningPlan] | None = None
        for _, candidate in self.logs:
            plan = candidate.plan_cleaning(now)
            if plan is not None and (chosen is None or plan.dirty_ratio > chosen[1].dirty_ratio):
                chosen = (candidate, plan)
        if chosen is None:
            return False
        target, plan = chosen
        throttle = cleaner.Throttle(
            self._configs.broker.get_float("log.cleaner.io.max.bytes.per.second")
        )
        started = self._clock.monotonic()
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
        on_pass(removed)
        log.info(
            "cleaned %s up to offset %d in %.2fs: %d record(s) removed",
            plan.directory.name,
            plan.end_offset,
            self._clock.monotonic() - started,
            removed,
        )
        return all(swapped)

    async def stop_replication(self) -> None:
        if self.fetchers is not None:
            await self.fetchers.stop()
        if self.isr_updates is not None:
            await self.isr_updates.stop()

    def close(self) -> None:
        for task in self._creations:
            task.cancel()
        for partition in self._partitions.values():
            partition.close_waiters()
        self._partitions.clear()
        self.logs.close_all()
