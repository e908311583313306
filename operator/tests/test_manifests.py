"""A KafkaCluster's Kubernetes objects: what each carries, and which spec changes make a
new pod revision (config_hash)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from strom.config import loading
from strom_operator.reconcile import manifests, model, properties, spec

UID = "7d1f6a0e-2b8c-4f3e-a1d5-9c6b0e4f2a17"
SELECTOR = {
    "app.kubernetes.io/name": "strom",
    "app.kubernetes.io/instance": "my-cluster",
    "app.kubernetes.io/component": "broker",
}


def body(**fields: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "my-cluster", "namespace": "kafka", "uid": UID, "generation": 1},
        "spec": fields,
    }


def cluster(**fields: Any) -> model.ClusterSpec:
    return spec.parse_cluster(body(**fields))


def statefulset(**fields: Any) -> dict[str, Any]:
    parsed = cluster(**fields)
    return manifests.statefulset(parsed, config_hash=manifests.config_hash(parsed))


def pod_spec(**fields: Any) -> dict[str, Any]:
    result: dict[str, Any] = statefulset(**fields)["spec"]["template"]["spec"]
    return result


def container(**fields: Any) -> dict[str, Any]:
    (broker,) = pod_spec(**fields)["containers"]
    assert isinstance(broker, dict)
    return broker


def all_objects(parsed: model.ClusterSpec) -> list[dict[str, Any]]:
    return [
        manifests.configmap(parsed),
        manifests.headless_service(parsed),
        manifests.bootstrap_service(parsed),
        manifests.statefulset(parsed, config_hash=manifests.config_hash(parsed)),
        manifests.pdb(parsed),
    ]


def test_every_object_is_owned_by_the_cluster_and_labelled() -> None:
    for obj in all_objects(cluster()):
        metadata = obj["metadata"]
        assert metadata["namespace"] == "kafka"
        assert metadata["ownerReferences"] == [
            {
                "apiVersion": "strom.io/v1alpha1",
                "kind": "KafkaCluster",
                "name": "my-cluster",
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert metadata["labels"] == {**SELECTOR, "app.kubernetes.io/managed-by": "strom-operator"}
    names = [obj["metadata"]["name"] for obj in all_objects(cluster())]
    assert names == [
        "my-cluster-config",
        "my-cluster-brokers",
        "my-cluster-bootstrap",
        "my-cluster-broker",
        "my-cluster-broker",
    ]


def test_objects_are_plain_json_as_kubectl_sends_them() -> None:
    for obj in all_objects(cluster(rack={"topologyKey": "topology.kubernetes.io/zone"})):
        assert yaml.safe_load(yaml.safe_dump(obj)) == obj
        assert set(obj) >= {"apiVersion", "kind", "metadata"}


@pytest.mark.parametrize("brokers", [3, 5])
def test_the_configmap_has_one_file_per_broker(brokers: int) -> None:
    parsed = cluster(brokers=brokers)

    data = manifests.configmap(parsed)["data"]

    assert sorted(data) == sorted(f"broker-{i}.properties" for i in range(brokers))
    for i in range(brokers):
        assert data[f"broker-{i}.properties"] == properties.broker_properties(parsed, i)


def test_a_scale_down_keeps_the_files_of_the_brokers_it_drains() -> None:
    parsed = cluster(brokers=3)

    data = manifests.configmap(parsed, nodes=5)["data"]

    assert sorted(data) == [f"broker-{i}.properties" for i in range(5)]
    assert "process.roles=broker\n" in data["broker-4.properties"]
    assert sorted(manifests.configmap(parsed, nodes=2)["data"]) == [
        f"broker-{i}.properties" for i in range(3)
    ]


def test_the_headless_service_publishes_every_port_before_ready() -> None:
    service = manifests.headless_service(
        cluster(
            listeners=[{"name": "INTERNAL_TLS", "port": 9095}, {"name": "CLIENTS", "port": 9096}]
        )
    )

    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == SELECTOR
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [
        ("internal-tls", 9095),
        ("clients", 9096),
        ("controller", 9093),
        ("metrics", 9404),
    ]


def test_without_metrics_the_services_do_not_offer_the_http_port() -> None:
    parsed = cluster(metrics={"enabled": False})

    ports = [p["name"] for p in manifests.headless_service(parsed)["spec"]["ports"]]

    assert ports == ["plaintext", "controller"]


def test_the_bootstrap_service_serves_the_listeners() -> None:
    service = manifests.bootstrap_service(
        cluster(
            listeners=[{"name": "PLAINTEXT", "port": 9092}, {"name": "REPLICATION", "port": 9091}]
        )
    )

    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == SELECTOR
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
        ("plaintext", 9092, 9092),
        ("replication", 9091, 9091),
    ]


def test_the_pdb_allows_one_broker_down() -> None:
    pdb = manifests.pdb(cluster())

    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": SELECTOR}}


@pytest.mark.parametrize("brokers", [3, 5])
def test_the_statefulset(brokers: int) -> None:
    parsed = cluster(brokers=brokers, storage={"size": "20Gi"})

    sts = manifests.statefulset(parsed, config_hash="abc123")

    assert sts["apiVersion"] == "apps/v1"
    assert sts["kind"] == "StatefulSet"
    assert sts["spec"]["serviceName"] == "my-cluster-brokers"
    assert sts["spec"]["replicas"] == brokers
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert sts["spec"]["selector"] == {"matchLabels": SELECTOR}
    template = sts["spec"]["template"]
    assert template["metadata"]["labels"] == {
        **SELECTOR,
        "app.kubernetes.io/managed-by": "strom-operator",
    }
    assert template["metadata"]["annotations"]["strom.io/config-hash"] == "abc123"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "20Gi"}},
    }
    pod = template["spec"]
    assert pod["terminationGracePeriodSeconds"] == 120
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1001,
        "runAsGroup": 1001,
        "fsGroup": 1001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["volumes"] == [
        {"name": "config", "configMap": {"name": "my-cluster-config"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    # every node's file is in the ConfigMap the pods mount
    files = manifests.configmap(parsed)["data"]
    assert all(f"broker-{i}.properties" in files for i in range(sts["spec"]["replicas"]))


def test_the_broker_container() -> None:
    broker = container()

    assert broker["name"] == "broker"
    assert broker["image"] == "strom/broker:0.1.0"
    command = broker["command"]
    start = command.index("strom-server")
    assert command[start:] == [
        "strom-server",
        "/etc/strom/broker-$(POD_INDEX).properties",
        "--override",
        "advertised.listeners=PLAINTEXT://$(POD_IP):9092",
    ]
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in broker["env"]} == {
        "POD_NAME": "metadata.name",
        "POD_IP": "status.podIP",
        "POD_INDEX": "metadata.labels['apps.kubernetes.io/pod-index']",
    }
    assert broker["ports"] == [
        {"name": "plaintext", "containerPort": 9092},
        {"name": "controller", "containerPort": 9093},
        {"name": "metrics", "containerPort": 9404},
    ]
    assert broker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 9404}
    assert broker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 9404}
    assert broker["startupProbe"]["httpGet"] == {"path": "/healthz", "port": 9404}
    assert broker["securityContext"] == {
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert broker["volumeMounts"] == [
        {"name": "data", "mountPath": "/var/lib/strom"},
        {"name": "config", "mountPath": "/etc/strom", "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]


def test_the_command_runs_the_file_even_under_the_images_environment(tmp_path: Any) -> None:
    """The broker image sets STROM_LISTENERS, STROM_LOG_DIRS and STROM_METRICS_LISTENER,
    which win over a properties file: the command drops them (and those of every other
    key the operator writes) before strom-server starts."""
    parsed = cluster(brokers=4)
    command = container(brokers=4)["command"]
    start = command.index("strom-server")
    dropped = {command[i + 1] for i in range(start) if command[i] == "-u"}
    assert command[0] == "env"
    assert {"STROM_LISTENERS", "STROM_LOG_DIRS", "STROM_METRICS_LISTENER"} <= dropped
    image_env = {"STROM_LISTENERS": "PLAINTEXT://:9092", "STROM_LOG_DIRS": "/var/lib/strom"}
    environ = {name: value for name, value in image_env.items() if name not in dropped}
    for broker_id in (0, 3):
        path = tmp_path / f"broker-{broker_id}.properties"
        path.write_text(properties.broker_properties(parsed, broker_id))
        overrides = [
            command[i + 1].replace("$(POD_IP)", "10.0.0.9")
            for i in range(start, len(command))
            if command[i] == "--override"
        ]
        config = loading.load_broker_config(path, overrides, environ)
        assert config.node_id == broker_id
        assert [str(d) for d in config.log_dirs] == ["/var/lib/strom/data"]
        assert ("CONTROLLER://:9093" in [str(x) for x in config.listeners]) == (broker_id < 3)


def test_metrics_disabled_keeps_the_probes() -> None:
    broker = container(metrics={"enabled": False, "port": 9500})

    assert broker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 9500}
    assert {"name": "health", "containerPort": 9500} in broker["ports"]
    annotations = statefulset(metrics={"enabled": False})["spec"]["template"]["metadata"][
        "annotations"
    ]
    assert "prometheus.io/scrape" not in annotations
    assert statefulset()["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == (
        "9404"
    )


def test_the_rack_comes_from_the_pods_topology_label() -> None:
    zone = "topology.kubernetes.io/zone"
    pod = pod_spec(rack={"topologyKey": zone})
    (broker,) = pod["containers"]

    assert {
        "name": "BROKER_RACK",
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{zone}']"}},
    } in broker["env"]
    assert broker["command"][-2:] == ["--override", "broker.rack=$(BROKER_RACK)"]
    assert pod["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": zone,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": SELECTOR},
        }
    ]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": zone, "operator": "Exists"}]}
    ]
    assert "topologySpreadConstraints" not in pod_spec()


def test_brokers_prefer_separate_nodes_by_default() -> None:
    affinity = pod_spec()["affinity"]

    assert affinity == {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": SELECTOR},
                    },
                }
            ]
        }
    }


def test_template_fields_land_on_the_pods() -> None:
    users_affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}
    sts = statefulset(
        template={
            "pod": {
                # a user label may not take over the selector's
                "labels": {"team": "payments", "app.kubernetes.io/instance": "other"},
                "annotations": {"owner": "payments@example.com"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kafka"}],
                "affinity": users_affinity,
                "priorityClassName": "kafka-critical",
            }
        },
        resources={"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
    )
    template = sts["spec"]["template"]

    assert template["metadata"]["labels"] == {
        "team": "payments",
        **SELECTOR,
        "app.kubernetes.io/managed-by": "strom-operator",
    }
    assert template["metadata"]["annotations"]["owner"] == "payments@example.com"
    pod = template["spec"]
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "kafka"}]
    assert pod["affinity"] == users_affinity  # replaces the default anti-affinity
    assert pod["priorityClassName"] == "kafka-critical"
    assert pod["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"memory": "2Gi"},
    }


@pytest.mark.parametrize(("delete_claim", "policy"), [(False, "Retain"), (True, "Delete")])
def test_delete_claim_sets_the_claims_retention(delete_claim: bool, policy: str) -> None:
    sts = statefulset(storage={"deleteClaim": delete_claim, "storageClassName": "fast-ssd"})

    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": policy,
        "whenScaled": policy,
    }
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] == "fast-ssd"


# --- config_hash: what rolls the pods -------------------------------------------------

BASE: dict[str, Any] = {
    "brokers": 3,
    "config": {"num.partitions": 3, "min.insync.replicas": 2},
}


def hash_with(**changes: Any) -> str:
    fields = copy.deepcopy(BASE)
    for key, value in changes.items():
        if key == "config":
            fields["config"] = {**fields["config"], **value}
        else:
            fields[key] = value
    return manifests.config_hash(cluster(**fields))


def test_the_hash_is_short_and_stable() -> None:
    first = hash_with()

    assert first == hash_with()
    assert len(first) == 16
    assert first == manifests.config_hash(
        cluster(config={"min.insync.replicas": 2, "num.partitions": 3})
    )


@pytest.mark.parametrize(
    "change",
    [
        {"config": {"num.partitions": 6}},  # static: read at start
        {"config": {"auto.create.topics.enable": False}},
        {"config": {"default.replication.factor": 2}},  # a user value of a scaled default
        {"image": "strom/broker:0.2.0"},
        {"resources": {"limits": {"memory": "4Gi"}}},
        {"listeners": [{"name": "PLAINTEXT", "port": 9192}]},
        {"metrics": {"enabled": False}},
        {"rack": {"topologyKey": "topology.kubernetes.io/zone"}},
        {"template": {"pod": {"labels": {"team": "x"}}}},
        {"template": {"pod": {"tolerations": [{"operator": "Exists"}]}}},
    ],
)
def test_a_change_that_needs_a_restart_changes_the_hash(change: dict[str, Any]) -> None:
    assert hash_with(**change) != hash_with()


@pytest.mark.parametrize(
    "change",
    [
        {"config": {"min.insync.replicas": 1}},  # dynamic: AlterConfigs, no restart
        {"config": {"log.retention.ms": 3600000}},
        {"config": {"unclean.leader.election.enable": True}},
        {"brokers": 4},  # a scale rolls nothing
        {"brokers": 7},
        {"storage": {"size": "20Gi"}},  # applied to the PVCs
    ],
)
def test_a_change_without_a_restart_keeps_the_hash(change: dict[str, Any]) -> None:
    assert hash_with(**change) == hash_with()


def test_scaling_a_small_cluster_does_not_roll_it_either() -> None:
    # 1 -> 3 brokers changes the scaled replication defaults in every file; the brokers
    # read them at their next start, the scale itself restarts nothing
    one = manifests.config_hash(cluster(brokers=1, controllers=1))
    three = cluster(brokers=3, controllers=1)

    assert manifests.config_hash(three) == one
    assert "default.replication.factor=3" in properties.broker_properties(three, 0)
