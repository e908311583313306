"""Property files for a cluster of N combined-mode nodes on one machine.

What `strom-dev-cluster --brokers N --data-dir D --base-port P` writes: node ids 1..N,
each `process.roles=broker,controller` with a client listener on P+i-1, a controller
listener on the port after all the client ports (P+N+i-1), a metrics endpoint of its
own, one log dir under D, one shared `cluster.id` and one shared
`controller.quorum.voters`, so that the nodes agree on the quorum from the first start.
Pure: it renders text and touches no file.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path

from strom.config import cluster_id as cluster_ids

# Kafka's default ports for the first node; the controller ports follow the client ports.
DEFAULT_BASE_PORT = 9092
DEFAULT_METRICS_BASE_PORT = 9404
LISTENER_NAME = "PLAINTEXT"
CONTROLLER_LISTENER_NAME = "CONTROLLER"


@dataclasses.dataclass(frozen=True)
class DevNode:
    """One rendered node: its settings, their properties-file text and a file name."""

    node_id: int
    file_name: str
    log_dir: Path
    host: str
    client_port: int
    controller_port: int
    metrics_port: int | None
    settings: dict[str, str]
    text: str


new_cluster_id = cluster_ids.new_cluster_id


def render_dev_cluster(
    brokers: int,
    data_dir: Path,
    base_port: int = DEFAULT_BASE_PORT,
    *,
    cluster_id: str,
    host: str = "localhost",
    hosts: Sequence[str] | None = None,
    controller_base_port: int | None = None,
    metrics_base_port: int | None = DEFAULT_METRICS_BASE_PORT,
    replication_factor: int | None = None,
) -> list[DevNode]:
    """The N nodes' property files; raise ValueError for arguments that cannot make one.

    `controller_base_port` defaults to `base_port + brokers`; `metrics_base_port` None
    disables the HTTP endpoint. `hosts` gives each node its own address (node i gets
    hosts[i-1], e.g. one network namespace each) instead of `host` for all.
    `replication_factor` (default: min(3, brokers)) is the default one and that of the
    internal topics; min.insync.replicas stays 1 so a cluster with one node down still
    takes acks=all writes."""
    if brokers < 1:
        raise ValueError(f"brokers must be at least 1, got {brokers}")
    controller_base = base_port + brokers if controller_base_port is None else controller_base_port
    replication = min(3, brokers) if replication_factor is None else replication_factor
    if not 1 <= replication <= brokers:
        raise ValueError(f"replication factor must be between 1 and {brokers}, got {replication}")
    if hosts is None:
        hosts = [host] * brokers
    elif len(hosts) != brokers:
        raise ValueError(f"{len(hosts)} hosts for {brokers} nodes")
    ranges = {"base port": base_port, "controller base port": controller_base}
    if metrics_base_port is not None:
        ranges["metrics base port"] = metrics_base_port
    for what, first in ranges.items():
        if not 1 <= first <= 65536 - brokers:
            raise ValueError(f"{what} {first}: ports {first}..{first + brokers - 1} do not fit")
    starts = sorted(ranges.values())
    if any(b - a < brokers for a, b in itertools.pairwise(starts)):
        raise ValueError(f"port ranges overlap: {ranges} for {brokers} nodes")

    ids = range(1, brokers + 1)
    voters = ",".join(f"{i}@{hosts[i - 1]}:{controller_base + i - 1}" for i in ids)
    nodes = []
    for node_id in ids:
        host = hosts[node_id - 1]
        client_port = base_port + node_id - 1
        controller_port = controller_base + node_id - 1
        metrics_port = None if metrics_base_port is None else metrics_base_port + node_id - 1
        log_dir = data_dir / f"node-{node_id}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "cluster.id": cluster_id,
            "controller.quorum.voters": voters,
            "listeners": f"{LISTENER_NAME}://{host}:{client_port},"
            f"{CONTROLLER_LISTENER_NAME}://{host}:{controller_port}",
            "advertised.listeners": f"{LISTENER_NAME}://{host}:{client_port},"
            f"{CONTROLLER_LISTENER_NAME}://{host}:{controller_port}",
            "inter.broker.listener.name": LISTENER_NAME,
            "controller.listener.names": CONTROLLER_LISTENER_NAME,
            "listener.security.protocol.map": f"{CONTROLLER_LISTENER_NAME}:PLAINTEXT,"
            f"{LISTENER_NAME}:PLAINTEXT",
            "log.dirs": str(log_dir),
            "default.replication.factor": str(replication),
            "offsets.topic.replication.factor": str(replication),
            "transaction.state.log.replication.factor": str(replication),
            "transaction.state.log.min.isr": str(min(2, replication)),
            "min.insync.replicas": "1",
            "metrics.listener": "" if metrics_port is None else f"http://{host}:{metrics_port}",
        }
        header = f"# Strom dev cluster: node {node_id} of {brokers}, broker and controller\n"
        text = header + "".join(f"{key}={_escape(value)}\n" for key, value in settings.items())
        nodes.append(
            DevNode(
                node_id=node_id,
                file_name=f"node-{node_id}.properties",
                log_dir=log_dir,
                host=host,
                client_port=client_port,
                controller_port=controller_port,
                metrics_port=metrics_port,
                settings=settings,
                text=text,
            )
        )
    return nodes


def _escape(value: str) -> str:
    """A value as java.util.Properties reads it back: backslashes (Windows paths) doubled,
    a leading blank kept."""
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n")
    return "\\" + escaped if escaped[:1] in (" ", "\t") else escaped
