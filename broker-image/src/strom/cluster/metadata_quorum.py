"""The metadata log as a Raft quorum: the node's replica of ``__cluster_metadata-0``.

`MetadataQuorum` puts the parts together (Kafka's KafkaRaftManager): the log on storage
(`replicated_log`), the persisted election state (``quorum-state`` beside it), the
sans-I/O `raft.client.RaftClient`, and the `raft_driver.RaftDriver` that runs it with a
channel to the other voters' controller listeners. Committed records go to the
`loader.MetadataLoader` in order, so every node's image is the committed prefix of one
log. It serves the controller as its `metadata_log.MetadataLog` (an append returns once
the records are committed and applied here) and DescribeQuorum as its `quorum.Quorum`.

With no quorum settings the node is the only voter: it elects itself at once and every
append is committed by its own fsync, so a single broker works as it always has, on the
same ``__cluster_metadata-0`` it has always written.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from strom.clock import Clock
from strom.cluster import delta as deltas
from strom.cluster import loader as loaders
from strom.cluster import (
    metadata_log,
    quorum,
    raft_driver,
    records,
    replicated_log,
    snapshots,
    topics,
)
from strom.cluster.raft import actions, store
from strom.cluster.raft import client as raft_client
from strom.cluster.raft import config as raft_config
from strom.config import quorum as quorum_config
from strom.network import channel as channels

log = logging.getLogger(__name__)

# How long a controller operation waits for its records to commit: a leader that cannot
# reach a majority resigns well before (check-quorum, 1.5 fetch timeouts), which fails the
# wait with NOT_CONTROLLER; this bounds a leader that keeps its majority but is slow
# (Kafka's admin requests time out after 30 s, request.timeout.ms).
COMMIT_TIMEOUT_S = 30.0


def raft_settings(settings: quorum_config.QuorumSettings) -> raft_config.RaftConfig:
    return raft_config.RaftConfig(
        election_timeout_ms=settings.election_timeout_ms,
        fetch_timeout_ms=settings.fetch_timeout_ms,
        election_backoff_max_ms=settings.election_backoff_max_ms,
        retry_backoff_ms=settings.retry_backoff_ms,
        request_timeout_ms=settings.request_timeout_ms,
    )


class MetadataQuorum:
    def __init__(
        self,
        settings: quorum_config.QuorumSettings,
        cluster_id: str,
        loader: loaders.MetadataLoader,
        clock: Clock,
        directory_id: uuid.UUID | None = None,
    ) -> None:
        self.settings = settings
        self.node_id = settings.node_id
        self.cluster_id = cluster_id
        self.directory = settings.metadata_log_dir / metadata_log.METADATA_DIR
        self._loader = loader
        self._clock = clock
        self._log = replicated_log.PartitionReplicatedLog(self.directory, clock.time_ms)
        try:
            state_store = store.FileQuorumStateStore(self.directory / store.FILE_NAME)
            endpoints = {voter.node_id: (voter.host, voter.port) for voter in settings.voters}
            self.channel = channels.TcpChannel(
                endpoints.get,
                clock=clock,
                settings=channels.ChannelSettings(
                    client_id=f"raft-client-{self.node_id}",
                    request_timeout_ms=settings.request_timeout_ms,
                ),
            )
            self.client = raft_client.RaftClient(
                self.node_id,
                settings.voter_ids,
                self._log,
                state_store,
                raft_settings(settings),
                random.Random(),
                clock.time_ms(),
            )
        except BaseException:
            self._log.close()
            raise
        self._policy = snapshots.SnapshotPolicy.from_settings(settings)
        # (record bytes committed since the last snapshot, when it was taken)
        self._since_snapshot = (0, clock.time_ms())
        self.driver = raft_driver.RaftDriver(
            self.client,
            self.channel,
            cluster_id=cluster_id,
            clock=clock,
            apply=self._apply,
            directory_id=directory_id,
        )

    @property
    def end_offset(self) -> int:
        return self._log.end_offset

    # The state machine -----------------------------------------------------------------

    def _apply(self, done: actions.Committed | actions.SnapshotLoaded) -> None:
        if isinstance(done, actions.SnapshotLoaded):
            # at start, or a follower that fell behind the leader's log start
            try:
                image = snapshots.read_image(self.cluster_id, done.state, done.snapshot_id.offset)
            except snapshots.CorruptSnapshotError as error:
                path = self.directory / replicated_log.snapshot_file_name(done.snapshot_id)
                raise metadata_log.CorruptMetadataLogError(
                    f"{path}: {error} (on a node of a cluster, moving {self.directory.name}"
                    " away makes it fetch the metadata from the quorum's leader)"
                ) from error
            self._loader.reset(image)
            self._since_snapshot = (0, self._clock.time_ms())
            log.info("loaded the metadata snapshot at offset %d", done.snapshot_id.offset)
            return
        if not done.entries:
            return
        try:
            self._loader.load(self._loader.stage(self._decoded(done.entries)))
        except deltas.DeltaError as error:
            raise metadata_log.CorruptMetadataLogError(f"{self.directory}: {error}") from error
        written, since_ms = self._since_snapshot
        self._since_snapshot = (written + sum(len(e.data) for e in done.entries), since_ms)
        self._maybe_snapshot()

    def _maybe_snapshot(self) -> None:
        """Snapshot the image once enough was committed since the last snapshot (Kafka's
        metadata.log.max.record.bytes.between.snapshots / max.snapshot.interval.ms), and
        delete the log before it."""
        written, since_ms = self._since_snapshot
        now = self._clock.time_ms()
        reason = self._policy.reason(written, now - since_ms)
        end = self.client.delivered_offset
        if reason is None or end <= self._log.log_start_offset:
            return
        epoch = self._log.entry_epoch(end - 1)
        if epoch is None:
            return
        state = snapshots.write_image(
            self._loader.image, epoch=epoch, last_contained_timestamp_ms=now
        )
        try:
            snapshot_id = self.client.create_snapshot(end, state)
        except OSError as error:
            log.error("cannot write a metadata snapshot in %s: %s", self.directory, error)
            return
        self._since_snapshot = (0, now)
        log.info("wrote metadata snapshot %s (%d bytes, %s)", snapshot_id, len(state), reason)

    def _decoded(self, entries: Sequence[Any]) -> Iterator[tuple[int, records.MetadataRecord]]:
        for entry in entries:
            try:
                yield entry.offset, records.decode(entry.data)
            except records.RecordDecodeError as error:
                raise metadata_log.CorruptMetadataLogError(
                    f"{self.directory}: offset {entry.offset}: {error}"
                ) from None

    # MetadataLog -----------------------------------------------------------------------

    async def append(self, entries: Sequence[records.MetadataRecord]) -> int:
        encoded = [records.encode(entry) for entry in entries]
        return await self.driver.append(encoded, COMMIT_TIMEOUT_S)

    # Quorum ----------------------------------------------------------------------------

    def describe(self, now_ms: int) -> quorum.QuorumDescription:
        return self.driver.describe(now_ms)

    def is_active_controller(self) -> bool:
        return self.driver.is_active()

    def active_controller(self) -> int | None:
        return self.driver.leader_id

    async def handle(self, body: Any) -> Any:
        return await self.driver.handle(body)

    # Lifecycle -------------------------------------------------------------------------

    async def start(self, catch_up_timeout_s: float | None = None) -> None:
        """Run the quorum and wait until a leader is known and this node has applied what
        it knows to be committed (for a quorum of one: its whole log)."""
        self.driver.start()
        timeout = 3600.0 if catch_up_timeout_s is None else catch_up_timeout_s
        waiting = self._clock.monotonic()
        while True:
            try:
                await self.driver.wait_for_leader(min(timeout, 10.0))
                break
            except topics.CommitTimeoutError:
                if self.driver.failure is not None:
                    raise self.driver.failure from None
                waited = self._clock.monotonic() - waiting
                if waited >= timeout:
                    raise
                log.info(
                    "waiting for a majority of the controller quorum %s (%.0f s so far)",
                    ",".join(str(v) for v in self.settings.voters),
                    waited,
                )
        if self.driver.failure is not None:
            raise self.driver.failure

    async def stop(self) -> None:
        await self.driver.stop()
        await self.channel.close()

    def close(self) -> None:
        self.driver.cancel()
        self._log.close()
