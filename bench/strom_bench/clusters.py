"""Clusters of brokers for C2 (issue 12, "Clusters of brokers"): N broker processes that
clients reach through one bootstrap list, started, checked ready and stopped together.

Kafka's side is a 3-node KRaft cluster in combined mode (`kafka_cluster`): three JVMs from
the bench's jars, each with its own ports, log dir and node.id, one static quorum
(controller.quorum.voters) and storage formatted with one cluster id.

Strom's side is pluggable: `STROM_CLUSTER` is the factory C2 uses. Strom cannot run a
quorum yet, so today it is `single_strom_broker` and the report says so beside the figures
(`comparison_note`). When `strom-dev-cluster --brokers 3` lands, add one function here with
the `ClusterFactory` signature (for instance N `StromBroker`-like nodes started from their
property files, or one object wrapping the launcher) and point `STROM_CLUSTER` at it; the
note then goes away by itself because both sides report 3 brokers.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from strom_bench import brokers, java_tools, process_groups

KAFKA_CLUSTER_BROKERS = 3


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


# (groups, work_dir, segment_bytes) -> a cluster not yet started
ClusterFactory = Callable[[process_groups.ProcessGroups, Path, int], Cluster]


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


def kafka_cluster_templates(root: Path, size: int = KAFKA_CLUSTER_BROKERS) -> list[Path]:
    """Where the formatted log dirs of nodes 1..size are kept (brokers.format_kafka_storages)."""
    return [root / f"node{node_id}" for node_id in range(1, size + 1)]


def kafka_cluster(
    groups: process_groups.ProcessGroups,
    work_dir: Path,
    segment_bytes: int,
    templates: Sequence[Path],
) -> NodesCluster:
    """A KRaft cluster in combined mode, one node per formatted template (node.id 1..N in
    order), each in `work_dir/nodeN` with its own ports and the cluster heap."""
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
        )
        for node_id, template in enumerate(templates, start=1)
    ]
    return NodesCluster(brokers.KAFKA, nodes)


def single_strom_broker(
    groups: process_groups.ProcessGroups, work_dir: Path, segment_bytes: int
) -> Cluster:
    """Strom's side of C2 until Strom runs a quorum: one strom-server, as in the other
    workloads (see comparison_note)."""
    node = brokers.StromBroker(groups, work_dir / "node1", segment_bytes)
    return NodesCluster(brokers.STROM, [node])


# The factory C2 uses for Strom: replace with a 3-node one when `strom-dev-cluster` lands.
STROM_CLUSTER: ClusterFactory = single_strom_broker


def comparison_note(strom_brokers: int | None, kafka_brokers: int | None) -> str | None:
    """What the report says beside a cluster figure when the two sides did not run the same
    number of brokers (None when they did, or when a side did not run)."""
    if strom_brokers is None or kafka_brokers is None or strom_brokers == kafka_brokers:
        return None
    strom = f"{strom_brokers} broker{'s' if strom_brokers != 1 else ''}"
    if strom_brokers < kafka_brokers:
        strom += " until the quorum lands"
    return f"Strom: {strom}; Kafka: {kafka_brokers}-node KRaft"
