"""The server.properties of each node of a KafkaCluster (the ConfigMap's files).

Node i is pod i of the StatefulSet: node.id = i. The first `spec.controllers` nodes are
broker and controller (the quorum's voters, on the CONTROLLER listener at port 9093 of
their pods' stable DNS names); the nodes after them are brokers only (Raft observers).
What a file cannot know, the pod's own IP and rack, the pod's command adds with
`--override` (Kubernetes expands `$(POD_IP)` in a command, not in a mounted file).

The file has three layers, later ones winning: defaults a Strimzi user expects, scaled to
the cluster (replication factors of min(3, brokers), min.insync.replicas of min(2, that));
the user's spec.config; the settings the operator owns (spec.OPERATOR_KEYS), which
spec.parse_cluster keeps out of spec.config.
"""

from __future__ import annotations

from collections.abc import Mapping

from strom_operator.reconcile import model, spec

# Where the pod mounts its volumes (manifests.py): the data PVC and the ConfigMap.
DATA_MOUNT = "/var/lib/strom"
LOG_DIR = f"{DATA_MOUNT}/data"
CONFIG_MOUNT = "/etc/strom"

# The defaults that depend on the number of brokers. They matter when a topic is created
# (auto-created topics, __consumer_offsets); a scale does not roll the pods for them
# (manifests.config_hash leaves them out): each broker reads the new value at its next
# start.
SCALED_DEFAULT_KEYS = (
    "default.replication.factor",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "min.insync.replicas",
    "transaction.state.log.min.isr",
)


def properties_file(broker_id: int) -> str:
    """The ConfigMap key (and file name under CONFIG_MOUNT) of node `broker_id`."""
    return f"broker-{broker_id}.properties"


def is_voter(cluster: model.ClusterSpec, broker_id: int) -> bool:
    return broker_id < cluster.controllers


def scaled_defaults(brokers: int) -> dict[str, str]:
    replication = min(3, brokers)
    min_isr = min(2, replication)
    return {
        "default.replication.factor": str(replication),
        "offsets.topic.replication.factor": str(replication),
        "transaction.state.log.replication.factor": str(replication),
        "min.insync.replicas": str(min_isr),
        "transaction.state.log.min.isr": str(min_isr),
    }


def quorum_voters(
    cluster: model.ClusterSpec, endpoints: Mapping[int, tuple[str, int]] | None = None
) -> str:
    """controller.quorum.voters: `id@host:port` of the first spec.controllers pods.

    `endpoints` replaces the pods' DNS names and port 9093 (a test that runs the nodes as
    local processes on loopback ports); the operator never passes it."""
    entries = []
    for broker_id in range(cluster.controllers):
        if endpoints is None:
            host, port = cluster.names.pod_dns(broker_id), model.CONTROLLER_PORT
        else:
            host, port = endpoints[broker_id]
        entries.append(f"{broker_id}@{host}:{port}")
    return ",".join(entries)


def advertised_listeners(cluster: model.ClusterSpec, host: str) -> str:
    """advertised.listeners for a node reached at `host` (the pod's command passes
    `$(POD_IP)`): every client listener, never the controller's."""
    return ",".join(f"{x.name}://{host}:{x.port}" for x in cluster.listeners)


def operator_settings(
    cluster: model.ClusterSpec,
    broker_id: int,
    *,
    voter_endpoints: Mapping[int, tuple[str, int]] | None = None,
) -> dict[str, str]:
    """The keys the operator owns, for node `broker_id` (advertised.listeners and
    broker.rack excepted: the pod's command sets those)."""
    voter = is_voter(cluster, broker_id)
    listeners = [f"{x.name}://:{x.port}" for x in cluster.listeners]
    if voter:
        listeners.append(f"{spec.CONTROLLER_LISTENER}://:{model.CONTROLLER_PORT}")
    protocols = [f"{x.name}:PLAINTEXT" for x in cluster.listeners]
    protocols.append(f"{spec.CONTROLLER_LISTENER}:PLAINTEXT")
    return {
        "node.id": str(broker_id),
        "process.roles": "broker,controller" if voter else "broker",
        "cluster.id": spec.cluster_id(cluster.uid),
        "controller.quorum.voters": quorum_voters(cluster, voter_endpoints),
        "controller.listener.names": spec.CONTROLLER_LISTENER,
        "listeners": ",".join(listeners),
        "listener.security.protocol.map": ",".join(protocols),
        "inter.broker.listener.name": cluster.listeners[0].name,
        "log.dirs": LOG_DIR,
        # Always on, metrics or not: the pod's probes are /healthz and /readyz on it.
        "metrics.listener": f"http://0.0.0.0:{cluster.metrics.port}",
    }


def node_settings(
    cluster: model.ClusterSpec,
    broker_id: int,
    *,
    voter_endpoints: Mapping[int, tuple[str, int]] | None = None,
) -> dict[str, str]:
    """Every setting of node `broker_id`'s file: scaled defaults < spec.config < the
    operator's own keys."""
    return {
        **scaled_defaults(cluster.brokers),
        **cluster.config,
        **operator_settings(cluster, broker_id, voter_endpoints=voter_endpoints),
    }


def broker_properties(
    cluster: model.ClusterSpec,
    broker_id: int,
    *,
    voter_endpoints: Mapping[int, tuple[str, int]] | None = None,
) -> str:
    """Node `broker_id`'s server.properties text (`voter_endpoints`: see quorum_voters)."""
    role = "broker and controller (a quorum voter)"
    if not is_voter(cluster, broker_id):
        role = "broker only (a Raft observer)"
    lines = [
        f"# Generated by strom-operator for KafkaCluster {cluster.names.namespace}/"
        f"{cluster.names.cluster}: node {broker_id}, {role}.",
        "# Do not edit: the operator rewrites it from the KafkaCluster's spec.",
        "# advertised.listeners (and broker.rack) come from the pod's command.",
    ]
    settings = node_settings(cluster, broker_id, voter_endpoints=voter_endpoints)
    lines += [f"{key}={_escaped(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def _escaped(value: str) -> str:
    """A value as java.util.Properties reads it back: backslashes doubled, line breaks
    escaped, a leading blank kept."""
    text = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "\\" + text if text[:1] in (" ", "\t", "\f") else text
