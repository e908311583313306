"""What a request handler gets: the broker's parts it may use, and nothing else.

Like uvicorn's ServerState: handlers read the metadata image, reach partitions through
the replica manager, ask the controller for metadata changes and the coordinator for
groups, and record metrics; they never see the Broker, its listeners or its logs.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from strom.clock import Clock
from strom.cluster import config_cache, controller, loader, quorum, topic_requests, topics
from strom.cluster import image as images
from strom.config import broker as broker_config
from strom.coordinator import groups as group_coordinator
from strom.coordinator import producer_ids as producer_id_manager
from strom.coordinator import transactions as txn_coordinator
from strom.replication import partition as partitions
from strom.replication import replica_manager
from strom.server import cluster_control as cluster_control_module
from strom.server import fetch_session_cache
from strom.server import metrics as broker_metrics

ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Where one request came from."""

    listener: str
    client_host: str


@dataclass(frozen=True, slots=True)
class ResolvedTopic:
    """A topic as a request named it (by name or by id), and what it is now."""

    name: str | None  # as named, or as found by id
    topic_id: uuid.UUID | None  # as named, or the topic's id when found by name
    topic: images.TopicImage | None  # None: no such topic

    @property
    def missing_error_is_unknown_id(self) -> bool:
        """A topic named by an id that does not exist: UNKNOWN_TOPIC_ID, not
        UNKNOWN_TOPIC_OR_PARTITION."""
        return self.topic is None and self.name is None and self.topic_id is not None


class QuorumRpc(Protocol):
    """The Raft driver's server side: answers the quorum requests (Vote, BeginQuorumEpoch,
    EndQuorumEpoch, the metadata log's Fetch, FetchSnapshot) of the controller listener."""

    async def handle(self, body: Any) -> Any:
        """The kio response to a decoded kio quorum request, at the request's version."""
        ...


class ControllerForwarder(Protocol):
    """How a client listener's admin request reaches the active controller when that is
    another node (Kafka's ForwardingManager)."""

    def is_local(self) -> bool:
        """This node is the active controller: handle admin requests here."""
        ...

    async def forward(self, body: Any) -> Any:
        """Send a decoded kio request unchanged to the active controller and return its
        kio response. Raises topics.NotControllerError (no controller answered) or
        topics.MetadataError (the controller timed out) when it cannot."""
        ...


class MarkerWriter(Protocol):
    """Writes transaction markers into the partitions this broker leads (WriteTxnMarkers;
    `server.txn_markers.LocalMarkers`)."""

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]: ...


TransactionVerifier = Callable[
    [str, int, int, list[tuple[str, int]]], Awaitable[dict[tuple[str, int], ErrorCode]]
]


class BrokerContext:
    def __init__(
        self,
        *,
        node_id: int,
        metadata: loader.MetadataLoader,
        configs: config_cache.ConfigCache,
        replicas: replica_manager.ReplicaManager,
        controller: controller.Controller,
        groups: group_coordinator.GroupCoordinator,
        producer_ids: producer_id_manager.ProducerIdManager,
        metrics: broker_metrics.BrokerMetrics,
        clock: Clock,
        offsets_topic: InternalTopic,
        transactions_topic: InternalTopic,
        quorum: quorum.Quorum,
        quorum_rpc: QuorumRpc | None = None,
        controller_forwarder: ControllerForwarder | None = None,
        cluster_control: cluster_control_module.ClusterControl | None = None,
    ) -> None:
        self.node_id = node_id
        self._metadata = metadata
        self.configs = configs
        self.replicas = replicas
        self.controller = controller
        self.groups = groups
        self.producer_ids = producer_ids
        self.metrics = metrics
        self.clock = clock
        self.offsets_topic = offsets_topic
        self.transactions_topic = transactions_topic
        # Set by the broker once built (they need the context's parts).
        self.transactions: txn_coordinator.TransactionCoordinator | None = None
        self.local_markers: MarkerWriter | None = None
        # KIP-890: asks a transactional id's coordinator whether partitions are in its
        # ongoing transaction (None: no verification)
        self.verify_transaction: TransactionVerifier | None = None
        self.quorum = quorum
        # None: no Raft driver (a quorum of one): quorum requests get a top-level error.
        self.quorum_rpc = quorum_rpc
        # None: a single node, which is always the active controller.
        self.controller_forwarder = controller_forwarder
        # The broker's own metadata changes (auto-created topics), wherever the controller is.
        self.cluster_control = cluster_control or cluster_control_module.ClusterControl(
            controller, None, cluster_control_module.MetadataWatch(metadata, clock)
        )
        self.endpoints: list[Endpoint] = []
        self.fetch_sessions = fetch_session_cache.FetchSessionCache(
            self.config.get_int("max.incremental.fetch.session.cache.slots"),
            self.config.get_int("min.incremental.fetch.session.eviction.ms"),
        )

    @property
    def image(self) -> images.MetadataImage:
        return self._metadata.image

    @property
    def config(self) -> broker_config.BrokerConfig:
        return self.configs.broker

    def partition(self, topic: str, index: int) -> partitions.Partition | None:
        return self.replicas.partition(topic, index)

    def endpoint_for(self, listener: str) -> Endpoint:
        for endpoint in self.endpoints:
            if endpoint.listener == listener:
                return endpoint
        return self.endpoints[0]

    def resolve_topic(self, name: str | None, topic_id: uuid.UUID | None) -> ResolvedTopic:
        """A topic named by id (when the id is set and not zero) or else by name."""
        image = self.image
        if topic_id is not None and topic_id != ZERO_UUID:
            by_id = image.topic_by_id(topic_id)
            return ResolvedTopic(by_id.name if by_id else None, topic_id, by_id)
        if name is None:
            return ResolvedTopic(None, None, None)
        by_name = image.topics.get(name)
        return ResolvedTopic(name, by_name.topic_id if by_name else None, by_name)


class InternalTopic:
    """An internal topic (`__consumer_offsets`, `__transaction_state`), created on first
    use as Kafka does, with the settings its broker configs give."""

    def __init__(
        self,
        metadata: loader.MetadataLoader,
        control: cluster_control_module.ClusterControl,
        name: str,
        *,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str],
    ) -> None:
        self._metadata = metadata
        self._controller = control
        self.name = name
        self._settings = (partitions, replication_factor, configs)

    def partition_count(self) -> int | None:
        topic = self._metadata.image.topics.get(self.name)
        return None if topic is None else topic.partition_count

    async def ensure(self) -> images.TopicImage:
        """The topic, created if needed; raises topics.MetadataError if it cannot be."""
        existing = self._metadata.image.topics.get(self.name)
        if existing is not None:
            return existing
        partitions, replication_factor, configs = self._settings
        (outcome,) = await self._controller.create_topics(
            [topic_requests.NewTopic(self.name, partitions, replication_factor, configs=configs)]
        )
        created = self._metadata.image.topics.get(self.name)
        if created is not None:
            return created  # by this call, or by a concurrent one (TopicExistsError)
        assert outcome.error is not None
        if isinstance(outcome.error, topics.MetadataError):
            raise outcome.error
        raise topics.StorageFailedError(str(outcome.error))
