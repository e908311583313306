"""A KafkaCluster's Kubernetes objects: ConfigMap, Services, StatefulSet, PodDisruptionBudget.

Plain JSON objects as `kubectl apply` would send them, each owned by the KafkaCluster
(deleting it cascades; the data PVCs stay unless spec.storage.deleteClaim) and labelled
with the cluster's selector plus `app.kubernetes.io/managed-by: strom-operator`.

The StatefulSet rolls nothing by itself (updateStrategy OnDelete): the operator restarts
pods one at a time when it is safe (rolling.py). Which changes need a restart is decided
by `config_hash`, in the pod template's `strom.io/config-hash` annotation: the image, the
resources, the pod template, the listeners, metrics and the static broker configs. Not
the number of brokers (a scale rolls no pod) and not the dynamic configs (the operator
sets those with AlterConfigs, no restart).

What the broker pod relies on, all of it features the e2e/k8s test kubelet implements:
`$(VAR)` expansion in the command, downward-API env (status.podIP, the pod-index label),
a ConfigMap volume, an emptyDir, HTTP probes. The rack (spec.rack.topologyKey) is read
from a pod label: Kubernetes' PodTopologyLabels admission copies the node labels
topology.kubernetes.io/zone and topology.kubernetes.io/region onto pods, so those two
keys work as they are; another key works only if something else (a mutating webhook)
puts the node's label on the pod, else the broker's rack is empty.
"""

from __future__ import annotations

import hashlib
import json

from strom.config import definitions, loading

from strom_operator.reconcile import model, properties

MANAGED_BY = {"app.kubernetes.io/managed-by": "strom-operator"}
CONFIG_HASH_ANNOTATION = "strom.io/config-hash"
CONTAINER = "broker"
DATA_VOLUME = "data"  # the volumeClaimTemplate: PVCs data-<statefulset>-<i>
USER_ID = 1001  # the broker image's user and group (broker-image/Dockerfile)

# SIGTERM starts the broker's controlled shutdown: the controller moves its leaderships
# away while it still serves, then the logs are flushed and closed. With many partitions
# that takes longer than Kubernetes' default 30 s, and a SIGKILL before the end costs log
# recovery at the next start, so the grace period is generous.
TERMINATION_GRACE_SECONDS = 120
# The HTTP side (probes) starts once the logs are recovered, which can take minutes after
# an unclean stop: the startup probe allows 15 minutes before liveness takes over.
STARTUP_PROBE = {"periodSeconds": 5, "failureThreshold": 180}
LIVENESS_PROBE = {"periodSeconds": 10, "failureThreshold": 6, "timeoutSeconds": 5}
READINESS_PROBE = {"periodSeconds": 5, "failureThreshold": 3, "timeoutSeconds": 5}


# --- metadata -------------------------------------------------------------------------


def owner_reference(cluster: model.ClusterSpec) -> model.JsonObject:
    """The KafkaCluster as the controlling owner: the garbage collector deletes what it
    owns when it is deleted."""
    return {
        "apiVersion": model.API_VERSION,
        "kind": "KafkaCluster",
        "name": cluster.names.cluster,
        "uid": cluster.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def labels(cluster: model.ClusterSpec) -> dict[str, str]:
    return {**cluster.names.selector, **MANAGED_BY}


def owned_object(
    cluster: model.ClusterSpec, api_version: str, kind: str, name: str
) -> model.JsonObject:
    """An object's apiVersion, kind and metadata: in the cluster's namespace, labelled,
    owned by the KafkaCluster."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": cluster.names.namespace,
            "labels": labels(cluster),
            "ownerReferences": [owner_reference(cluster)],
        },
    }


# --- ConfigMap and Services -----------------------------------------------------------


def configmap(cluster: model.ClusterSpec, *, nodes: int = 0) -> model.JsonObject:
    """Every node's server.properties: a scale-up writes the new nodes' files before the
    StatefulSet grows. `nodes` (the StatefulSet's current replicas) keeps the files of
    the brokers a scale-down is still draining: such a pod may restart before it goes."""
    return {
        **owned_object(cluster, "v1", "ConfigMap", cluster.names.configmap),
        "data": {
            properties.properties_file(i): properties.broker_properties(cluster, i)
            for i in range(max(cluster.brokers, nodes))
        },
    }


def port_name(listener: model.ListenerSpec) -> str:
    """A listener's port name (an IANA service name: lower case, '-' for '_')."""
    return listener.name.lower().replace("_", "-")


def _http_port_name(cluster: model.ClusterSpec) -> str:
    # "metrics" is what a PodMonitor selects; without metrics the port only serves probes
    return "metrics" if cluster.metrics.enabled else "health"


def headless_service(cluster: model.ClusterSpec) -> model.JsonObject:
    """The pods' stable DNS names (<pod>.<service>.<namespace>.svc), published before the
    pods are Ready: the voters must reach each other to elect a leader at all."""
    ports = [_service_port(port_name(x), x.port) for x in cluster.listeners]
    ports.append(_service_port("controller", model.CONTROLLER_PORT))
    if cluster.metrics.enabled:
        ports.append(_service_port("metrics", cluster.metrics.port))
    return {
        **owned_object(cluster, "v1", "Service", cluster.names.headless_service),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": dict(cluster.names.selector),
            "ports": ports,
        },
    }


def bootstrap_service(cluster: model.ClusterSpec) -> model.JsonObject:
    """Where clients start: any Ready broker, on every listener."""
    return {
        **owned_object(cluster, "v1", "Service", cluster.names.bootstrap_service),
        "spec": {
            "type": "ClusterIP",
            "selector": dict(cluster.names.selector),
            "ports": [_service_port(port_name(x), x.port) for x in cluster.listeners],
        },
    }


def _service_port(name: str, port: int) -> model.JsonObject:
    return {"name": name, "port": port, "targetPort": port, "protocol": "TCP"}


def pdb(cluster: model.ClusterSpec) -> model.JsonObject:
    """At most one broker pod voluntarily down at a time (drains, node upgrades)."""
    return {
        **owned_object(cluster, "policy/v1", "PodDisruptionBudget", cluster.names.pdb),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": dict(cluster.names.selector)},
        },
    }


# --- the StatefulSet ------------------------------------------------------------------


def statefulset(cluster: model.ClusterSpec, *, config_hash: str) -> model.JsonObject:
    """The broker pods and their volumes. Kubernetes does not let a StatefulSet's
    volumeClaimTemplates change: a later storage size is applied to the PVCs themselves."""
    retention = "Delete" if cluster.storage.delete_claim else "Retain"
    claim_spec: model.JsonObject = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": cluster.storage.size}},
    }
    if cluster.storage.storage_class is not None:
        claim_spec["storageClassName"] = cluster.storage.storage_class
    return {
        **owned_object(cluster, "apps/v1", "StatefulSet", cluster.names.statefulset),
        "spec": {
            "serviceName": cluster.names.headless_service,
            "replicas": cluster.brokers,
            # the voters must all run to elect a leader: no waiting for pod 0 to be Ready
            "podManagementPolicy": "Parallel",
            # the operator restarts pods itself, one at a time, never below min.insync
            "updateStrategy": {"type": "OnDelete"},
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": retention,
                "whenScaled": retention,
            },
            "selector": {"matchLabels": dict(cluster.names.selector)},
            "template": pod_template(cluster, config_hash=config_hash),
            "volumeClaimTemplates": [
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": DATA_VOLUME, "labels": labels(cluster)},
                    "spec": claim_spec,
                }
            ],
        },
    }


def pod_template(cluster: model.ClusterSpec, *, config_hash: str) -> model.JsonObject:
    template = cluster.template
    annotations = {**template.pod_annotations, CONFIG_HASH_ANNOTATION: config_hash}
    if cluster.metrics.enabled:
        annotations.update(
            {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(cluster.metrics.port),
                "prometheus.io/path": "/metrics",
            }
        )
    pod_spec: model.JsonObject = {
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "automountServiceAccountToken": False,
        # no STROM_*_SERVICE_HOST variables: the broker reads STROM_* as its own configs
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": USER_ID,
            "runAsGroup": USER_ID,
            "fsGroup": USER_ID,  # the data volume must be writable by the broker's user
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "affinity": template.affinity or _default_affinity(cluster),
        "containers": [_broker_container(cluster)],
        "volumes": [
            {"name": "config", "configMap": {"name": cluster.names.configmap}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }
    if template.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in template.tolerations]
    if template.priority_class_name is not None:
        pod_spec["priorityClassName"] = template.priority_class_name
    if cluster.rack_topology_key is not None:
        pod_spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": cluster.rack_topology_key,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": dict(cluster.names.selector)},
            }
        ]
    return {
        "metadata": {
            # the user's labels first: the selector's must win or the pods are lost
            "labels": {**template.pod_labels, **labels(cluster)},
            "annotations": annotations,
        },
        "spec": pod_spec,
    }


def _default_affinity(cluster: model.ClusterSpec) -> model.JsonObject:
    """Brokers on different nodes when possible; preferred, not required, so that a
    one-node cluster still runs them all. With a rack, only nodes that have one."""
    affinity: model.JsonObject = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": dict(cluster.names.selector)},
                    },
                }
            ]
        }
    }
    if cluster.rack_topology_key is not None:
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": cluster.rack_topology_key, "operator": "Exists"}]}
                ]
            }
        }
    return affinity


def broker_command(cluster: model.ClusterSpec) -> list[str]:
    """strom-server on the pod's own properties file, with what only the pod knows.

    The broker image sets STROM_LISTENERS, STROM_LOG_DIRS and STROM_METRICS_LISTENER for
    a lone broker, and STROM_* variables win over the file: `env -u` drops those of every
    key the operator writes in the file, so the file is what runs."""
    dropped: list[str] = []
    for key in properties.operator_settings(cluster, 0):
        dropped += ["-u", loading.env_var_name(key)]
    file = f"{properties.CONFIG_MOUNT}/broker-$(POD_INDEX).properties"
    command = ["env", *dropped, "strom-server", file]
    command += ["--override", "advertised.listeners=" + _advertised(cluster)]
    if cluster.rack_topology_key is not None:
        command += ["--override", "broker.rack=$(BROKER_RACK)"]
    return command


def _advertised(cluster: model.ClusterSpec) -> str:
    return properties.advertised_listeners(cluster, "$(POD_IP)")


def _broker_container(cluster: model.ClusterSpec) -> model.JsonObject:
    env = [
        _field_env("POD_NAME", "metadata.name"),
        _field_env("POD_IP", "status.podIP"),
        _field_env("POD_INDEX", "metadata.labels['apps.kubernetes.io/pod-index']"),
    ]
    if cluster.rack_topology_key is not None:
        env.append(_field_env("BROKER_RACK", f"metadata.labels['{cluster.rack_topology_key}']"))
    ports = [{"name": port_name(x), "containerPort": x.port} for x in cluster.listeners]
    ports.append({"name": "controller", "containerPort": model.CONTROLLER_PORT})
    ports.append({"name": _http_port_name(cluster), "containerPort": cluster.metrics.port})
    http = cluster.metrics.port
    return {
        "name": CONTAINER,
        "image": cluster.image,
        "imagePullPolicy": "IfNotPresent",
        "command": broker_command(cluster),
        "env": env,
        "ports": ports,
        "startupProbe": {"httpGet": {"path": "/healthz", "port": http}, **STARTUP_PROBE},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": http}, **LIVENESS_PROBE},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": http}, **READINESS_PROBE},
        "resources": dict(cluster.resources),
        "securityContext": {
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": DATA_VOLUME, "mountPath": properties.DATA_MOUNT},
            {"name": "config", "mountPath": properties.CONFIG_MOUNT, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }


def _field_env(name: str, field_path: str) -> model.JsonObject:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


# --- what needs a restart -------------------------------------------------------------


def config_hash(cluster: model.ClusterSpec) -> str:
    """A short stable digest of everything a running broker cannot take without a
    restart: the static broker settings of its file, the image, the resources, the pod
    template, listeners and metrics. Neither spec.brokers (a scale must not roll the
    running pods; the scaled defaults it changes are read at each broker's next start)
    nor the dynamic configs (set with AlterConfigs) change it."""
    settings = properties.node_settings(cluster, 0)
    restart_settings = {
        key: value
        for key, value in settings.items()
        if not definitions.BROKER_CONFIGS[key].dynamic
        and (key not in properties.SCALED_DEFAULT_KEYS or key in cluster.config)
    }
    template = cluster.template
    inputs = {
        "settings": restart_settings,
        "image": cluster.image,
        "resources": cluster.resources,
        "listeners": [[x.name, x.port] for x in cluster.listeners],
        "metrics": [cluster.metrics.enabled, cluster.metrics.port],
        "rack": cluster.rack_topology_key,
        "template": {
            "labels": dict(template.pod_labels),
            "annotations": dict(template.pod_annotations),
            "tolerations": list(template.tolerations),
            "affinity": template.affinity,
            "priorityClassName": template.priority_class_name,
        },
    }
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
