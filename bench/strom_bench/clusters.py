"""Clusters of brokers for C2 (issue 12, "Clusters of brokers"): N broker processes that
clients reach through one bootstrap list, started, checked ready and stopped together.

Kafka's side is a 3-node KRaft cluster in combined mode (`kafka_cluster`): three JVMs from
the bench's jars, each with its own ports, log dir and node.id, one static quorum
(controller.quorum.voters) and storage formatted with one cluster id.

Strom's side is the same shape (`three_strom_brokers`, the `STROM_CLUSTER` factory C2
uses): three strom-server processes in combined mode, each with its own client, controller
and metrics ports, log dir and node.id, one static quorum and one cluster id, the settings
`strom-dev-cluster` writes. Both sides are started whole, then checked ready the same way
(an admin client sees all three brokers), so C2's figures compare like with like.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from strom_bench import brokers, java_tools, process_groups

KAFKA_CLUSTER_BROKERS = 3
STROM_CLUSTER_BROKERS = 3


class Cluster(Protocol):
    """What C2 needs from a cluster, whatever runs it."""

    kind: str  # brokers.STROM or brokers.KAFKA

    @property
    def size(self) -> int:
        """How many brokers serve clients."""
        ...

    @property
    def bootstrap(self) -> str:
        """bootstrap.servers for a client: every broker, comma-separated."""
        ...

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        """The processes a tool watches: if one exits, the tool is stopped."""
        ...

    def start(self) -> None: ...

    def wait_ready(self, tools: java_tools.JavaTools) -> None:
        """Until an admin client sees all `size` brokers, within brokers.READY_TIMEOUT_S;
        brokers.BrokerFailed if not."""
        ...

    def stop(self) -> None:
        """SIGKILL every process and delete the data (logs stay)."""
        ...

    def log_excerpt(self) -> str: ...

    def node(self, node_id: int) -> brokers.Broker:
        """The broker with this node.id (F1 kills and restarts one)."""
        ...


# (groups, work_dir, segment_bytes, settings added to every node) -> a cluster not yet started
ClusterFactory = Callable[
    [process_groups.ProcessGroups, Path, int, Mapping[str, str] | None], Cluster
]


class NodesCluster:
    """A cluster of `brokers.Broker` processes the harness starts one by one itself."""

    def __init__(self, kind: str, nodes: Sequence[brokers.Broker]) -> None:
        self.kind = kind
        self.nodes = list(nodes)

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        return [node.process for node in self.nodes]

    def start(self) -> None:
        for node in self.nodes:
            node.start()

    def wait_ready(self, tools: java_tools.JavaTools) -> None:
        """One admin client, started once every node is, waits to see all of them: the same
        test on both sides (Kafka lists a broker once it is registered and unfenced)."""
        try:
            tools.admin_ready(
                self.bootstrap, brokers.READY_TIMEOUT_S, self.processes, min_brokers=self.size
            )
        except java_tools.ToolFailed as e:
            raise brokers.BrokerFailed(f"{self.kind} cluster not ready: {e}") from e

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def log_excerpt(self) -> str:
        return "\n".join(node.log_excerpt() for node in self.nodes)

    def node(self, node_id: int) -> brokers.Broker:
        """The broker with this node.id (nodes are numbered 1..N in order)."""
        return self.nodes[node_id - 1]


def kafka_cluster_templates(root: Path, size: int = KAFKA_CLUSTER_BROKERS) -> list[Path]:
    """Where the formatted log dirs of nodes 1..size are kept (brokers.format_kafka_storages)."""
    return [root / f"node{node_id}" for node_id in range(1, size + 1)]


def kafka_cluster(
    groups: process_groups.ProcessGroups,
    work_dir: Path,
    segment_bytes: int,
    templates: Sequence[Path],
    settings: Mapping[str, str] | None = None,
) -> NodesCluster:
    """A KRaft cluster in combined mode, one node per formatted template (node.id 1..N in
    order), each in `work_dir/nodeN` with its own ports and the cluster heap; `settings`
    are added to every node's server.properties (P2 and F1: replication_settings)."""
    controller_ports = [process_groups.free_port() for _ in templates]
    voters = brokers.kafka_quorum_voters(controller_ports)
    nodes: list[brokers.Broker] = [
        brokers.KafkaBroker(
            groups,
            work_dir / f"node{node_id}",
            segment_bytes,
            template,
            node_id=node_id,
            controller_port=controller_ports[node_id - 1],
            voters=voters,
            jvm_options=brokers.KAFKA_CLUSTER_JVM_OPTIONS,
            settings=settings,
        )
        for node_id, template in enumerate(templates, start=1)
    ]
    return NodesCluster(brokers.KAFKA, nodes)


def strom_cluster(
    groups: process_groups.ProcessGroups,
    work_dir: Path,
    segment_bytes: int,
    size: int = STROM_CLUSTER_BROKERS,
    settings: Mapping[str, str] | None = None,
) -> NodesCluster:
    """`size` strom-server processes in combined mode (broker and controller, node.id 1..N),
    each in `work_dir/nodeN` with its own client, controller and metrics ports and log dir,
    one static quorum (controller.quorum.voters) and one cluster id: the settings
    `strom-dev-cluster` writes, on free loopback ports. Started together (a node serves
    once a majority of the quorum is up), ready when an admin client sees all of them.
    `settings` are added to every node's overrides (P2 and F1: replication_settings)."""
    controller_ports = [process_groups.free_port() for _ in range(size)]
    voters = brokers.kafka_quorum_voters(controller_ports)  # the same format on both sides
    cluster_id = brokers.kafka_cluster_id()  # as strom.config.cluster_id makes them
    nodes: list[brokers.Broker] = [
        brokers.StromBroker(
            groups,
            work_dir / f"node{node_id}",
            segment_bytes,
            controller_port=controller_ports[node_id - 1],
            node_id=node_id,
            voters=voters,
            cluster_id=cluster_id,
            settings=settings,
        )
        for node_id in range(1, size + 1)
    ]
    return NodesCluster(brokers.STROM, nodes)


def three_strom_brokers(
    groups: process_groups.ProcessGroups,
    work_dir: Path,
    segment_bytes: int,
    settings: Mapping[str, str] | None = None,
) -> NodesCluster:
    """Strom's side of C2 (and of P2 and F1): a 3-node quorum in combined mode, like Kafka's."""
    return strom_cluster(groups, work_dir, segment_bytes, STROM_CLUSTER_BROKERS, settings)


# The factory C2 uses for Strom.
STROM_CLUSTER: ClusterFactory = three_strom_brokers
