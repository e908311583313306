"""Prometheus metrics of the cluster as this node sees it: the brokers and partition
leaders of its metadata image, and its place in the KRaft quorum (state, epoch, high
watermark, log end). Read at scrape time; the Kafka MBean each one mirrors is in its
help text, as in `metrics`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from strom.cluster import image as images
from strom.cluster import loader, metadata_quorum
from strom.cluster.raft import leader, states

# Kafka's raft-metrics current-state values (KafkaRaftMetrics, with KIP-996's prospective
# states), plus resigned: a leader that stepped down and waits for the next one.
RAFT_STATES = (
    "leader",
    "resigned",
    "candidate",
    "prospective",
    "prospective-voted",
    "follower",
    "observer",
    "unattached",
    "unattached-voted",
)


@dataclass(frozen=True, slots=True)
class RaftReading:
    state: str  # one of RAFT_STATES
    epoch: int
    leader_id: int  # -1 while no leader is known
    high_watermark: int  # entries before it are committed, as far as this node knows
    log_end_offset: int  # of this node's copy of the metadata log
    applied_offset: int  # the last metadata offset in this node's image (-1: none)


@dataclass(frozen=True, slots=True)
class ClusterReading:
    brokers_online: int  # registered and unfenced
    brokers_fenced: int
    # counted on the active controller only, as Kafka's controller metrics are
    preferred_replica_imbalance: int = 0
    leaders_by_broker: dict[int, int] = field(default_factory=dict)


def raft_state_name(state: object, is_voter: bool) -> str:
    """Kafka's name for a Raft election state (raft-metrics current-state)."""
    if isinstance(state, leader.LeaderState):
        return "leader"
    if isinstance(state, states.ResignedState):
        return "resigned"
    if isinstance(state, states.CandidateState):
        return "candidate"
    if isinstance(state, states.ProspectiveState):
        return "prospective" if state.voted_id is None else "prospective-voted"
    if isinstance(state, states.FollowerState):
        return "follower" if is_voter else "observer"
    if isinstance(state, states.UnattachedState) and state.voted_id is not None:
        return "unattached-voted"
    return "unattached"


def read_raft(quorum: metadata_quorum.MetadataQuorum, image: images.MetadataImage) -> RaftReading:
    client = quorum.client
    leader_id = client.leader_id
    return RaftReading(
        state=raft_state_name(client.state, client.quorum.is_voter),
        epoch=client.epoch,
        leader_id=-1 if leader_id is None else leader_id,
        high_watermark=client.high_watermark,
        log_end_offset=quorum.end_offset,
        applied_offset=image.offset,
    )


def read_cluster(image: images.MetadataImage, active_controller: bool) -> ClusterReading:
    fenced = sum(broker.fenced for broker in image.brokers.values())
    online = len(image.brokers) - fenced
    if not active_controller:
        return ClusterReading(online, fenced)
    imbalance = 0
    leaders = dict.fromkeys(image.brokers, 0)
    for topic in image.topics.values():
        for partition in topic.partitions.values():
            # a leaderless partition counts too, as in Kafka's controller
            imbalance += partition.replicas[:1] != (partition.leader,)
            if partition.leader >= 0:
                leaders[partition.leader] = leaders.get(partition.leader, 0) + 1
    return ClusterReading(online, fenced, imbalance, leaders)


def watch(
    registry: CollectorRegistry,
    quorum: metadata_quorum.MetadataQuorum,
    metadata: loader.MetadataLoader,
) -> None:
    """Register scrape-time views of the quorum and of the metadata image."""
    registry.register(RaftCollector(lambda: read_raft(quorum, metadata.image)))
    registry.register(
        ClusterCollector(lambda: read_cluster(metadata.image, quorum.is_active_controller()))
    )


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value)


class RaftCollector(Collector):
    def __init__(self, read: Callable[[], RaftReading]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        raft = self._read()
        state = GaugeMetricFamily(
            "strom_raft_state",
            "1 for this node's current Raft election state, 0 for the others "
            "(kafka.server:type=raft-metrics,name=current-state)",
            labels=["state"],
        )
        for name in RAFT_STATES:
            state.add_metric([name], int(name == raft.state))
        yield state
        yield _gauge(
            "strom_raft_current_epoch",
            "The Raft epoch (term) this node is in "
            "(kafka.server:type=raft-metrics,name=current-epoch)",
            raft.epoch,
        )
        yield _gauge(
            "strom_raft_current_leader",
            "The quorum leader (the active controller) this node knows, -1 for none "
            "(kafka.server:type=raft-metrics,name=current-leader)",
            raft.leader_id,
        )
        yield _gauge(
            "strom_controller_epoch",
            "The epoch of the active controller this node knows, -1 while it knows none "
            "(the controller epoch of Kafka's controller requests; in KRaft the Raft "
            "epoch the leader was elected in, raft-metrics current-epoch)",
            raft.epoch if raft.leader_id >= 0 else -1,
        )
        yield _gauge(
            "strom_raft_high_watermark",
            "Metadata log offset before which every entry is committed, as this node "
            "knows it (kafka.server:type=raft-metrics,name=high-watermark)",
            raft.high_watermark,
        )
        yield _gauge(
            "strom_raft_log_end_offset",
            "End of this node's copy of the metadata log "
            "(kafka.server:type=raft-metrics,name=log-end-offset)",
            raft.log_end_offset,
        )
        yield _gauge(
            "strom_raft_commit_lag",
            "Metadata log entries this node holds that are not known committed: log end "
            "offset minus high watermark (on the leader, appends waiting for a majority)",
            max(raft.log_end_offset - raft.high_watermark, 0),
        )
        yield _gauge(
            "strom_metadata_applied_offset",
            "Last metadata log offset applied to this node's metadata image, -1 for none "
            "(kafka.server:type=broker-metadata-metrics,name=last-applied-record-offset)",
            raft.applied_offset,
        )


class ClusterCollector(Collector):
    def __init__(self, read: Callable[[], ClusterReading]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        cluster = self._read()
        yield _gauge(
            "strom_brokers_online",
            "Registered, unfenced brokers in this node's metadata image "
            "(kafka.controller:type=KafkaController,name=ActiveBrokerCount)",
            cluster.brokers_online,
        )
        yield _gauge(
            "strom_fenced_brokers",
            "Registered brokers the controller has fenced (no heartbeat within "
            "broker.session.timeout.ms, or not yet caught up) "
            "(kafka.controller:type=KafkaController,name=FencedBrokerCount)",
            cluster.brokers_fenced,
        )
        yield _gauge(
            "strom_preferred_replica_imbalance",
            "Partitions not led by their preferred (first) replica, leaderless ones "
            "included, on the active controller "
            "(kafka.controller:type=KafkaController,name=PreferredReplicaImbalanceCount)",
            cluster.preferred_replica_imbalance,
        )
        leaders = GaugeMetricFamily(
            "strom_partition_leaders",
            "Partitions each broker leads, on the active controller (the cluster-wide "
            "view of kafka.server:type=ReplicaManager,name=LeaderCount)",
            labels=["broker"],
        )
        for broker, count in sorted(cluster.leaders_by_broker.items()):
            leaders.add_metric([str(broker)], count)
        yield leaders
