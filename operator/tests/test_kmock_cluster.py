"""A KafkaCluster reconciled by the real operator on kmock, with a real broker behind it:
the owned objects, the status, an invalid config, and a lost broker pod."""

from __future__ import annotations

import asyncio

import kmock
from operator_tier import (
    NAMESPACE,
    broker_pod,
    cluster_body,
    condition,
    events_posted,
    eventually,
    wait_condition,
)
from strom.client import admin
from strom_operator import k8s, settings
from strom_operator.reconcile import model

OWNED = [
    ("ConfigMap", "c1-config"),
    ("Service", "c1-brokers"),
    ("Service", "c1-bootstrap"),
    ("StatefulSet", "c1-broker"),
    ("PodDisruptionBudget", "c1-broker"),
]


async def test_cluster_creates_its_objects_owned_and_reports_status(
    operator: settings.OperatorSettings, kube: k8s.Client
) -> None:
    body = cluster_body("c1")
    await kube.create(body)
    await kube.create(broker_pod("c1", 0))

    await wait_condition(kube, "KafkaCluster", "c1", "Ready", "True", "one broker pod ready")
    live = await kube.get("KafkaCluster", NAMESPACE, "c1")
    for kind, name in OWNED:
        owned = await kube.get(kind, NAMESPACE, name)
        [owner] = owned["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "KafkaCluster",
            "c1",
            body["metadata"]["uid"],
        )
    sts = await kube.get("StatefulSet", NAMESPACE, "c1-broker")
    assert sts["spec"]["replicas"] == 1
    status = live["status"]
    assert status["readyBrokers"] == 1
    assert status["brokers"][0]["pod"] == "c1-broker-0"
    assert status["brokers"][0]["ready"] is True
    assert status["controllerId"] is not None
    assert status["clusterId"]
    assert status["selector"] == model.ClusterNames("c1", NAMESPACE).selector_string
    assert {c["type"] for c in status["conditions"]} == {"Ready", "Reconciling", "Degraded"}
    # kmock keeps no generation: the spec reads as generation 1
    assert status["observedGeneration"] == 1


async def test_unknown_config_key_is_reported_and_nothing_is_created(
    operator: settings.OperatorSettings, kube: k8s.Client
) -> None:
    await kube.create(cluster_body("c2", config={"no.such.key": "1"}))

    async def refused() -> model.JsonObject | None:
        return condition(await kube.get("KafkaCluster", NAMESPACE, "c2"), "Ready")

    ready = await eventually(refused, "a Ready condition")
    assert ready["status"] == "False"
    # spec.parse_cluster's reasons: UnknownConfig for a key the broker does not define,
    # InvalidConfig for a bad value
    assert ready["reason"] in ("UnknownConfig", "InvalidConfig")
    assert "no.such.key" in ready["message"]
    for kind in ("ConfigMap", "StatefulSet", "Service"):
        assert await kube.list(kind, NAMESPACE) == []


async def test_lost_broker_pod_degrades_the_cluster_with_an_event(
    operator: settings.OperatorSettings, kube: k8s.Client, kmock: kmock.KubernetesEmulator
) -> None:
    await kube.create(cluster_body("c3"))
    await kube.create(broker_pod("c3", 0))

    await wait_condition(kube, "KafkaCluster", "c3", "Degraded", "False", "the pod ready")
    await kube.delete("Pod", NAMESPACE, "c3-broker-0")
    lost = await wait_condition(kube, "KafkaCluster", "c3", "Degraded", "True", "pod deleted")
    assert lost["reason"] == "BrokerPodNotReady"
    assert "c3-broker-0" in lost["message"]

    async def warned() -> list[model.JsonObject]:
        events = events_posted(kmock, "c3")
        return [e for e in events if e.get("reason") == "BrokerPodNotReady"]

    [event] = await eventually(warned, "a BrokerPodNotReady Event on the cluster")
    assert event["type"] == "Warning"


async def test_dynamic_config_is_set_on_the_brokers_and_removed_with_the_spec(
    operator: settings.OperatorSettings, kube: k8s.Client
) -> None:
    """A dynamic key of spec.config becomes the cluster-wide broker default on the real
    broker (no restart); removed from the spec, it is removed from the brokers too."""
    assert operator.bootstrap_servers is not None
    key = "log.cleaner.backoff.ms"  # dynamic, harmless for the other tests' topics

    bootstrap = operator.bootstrap_servers

    def cluster_default() -> str | None:
        entries = admin.Admin(bootstrap).broker_configs("")
        found = [e.value for e in entries if e.name == key]
        return found[0] if found else None

    async def default_is(expected: str | None) -> bool | None:
        return await asyncio.to_thread(cluster_default) == expected or None

    await kube.create(cluster_body("c5", config={key: 12345}))
    await kube.create(broker_pod("c5", 0))
    await eventually(lambda: default_is("12345"), f"{key}=12345 on the broker default")
    await kube.merge_patch("KafkaCluster", NAMESPACE, "c5", {"spec": {"config": None}})
    await eventually(lambda: default_is(None), f"{key} removed from the broker default")


async def test_a_larger_storage_size_grows_the_claims_where_the_class_allows_it(
    operator: settings.OperatorSettings, kube: k8s.Client
) -> None:
    """spec.storage.size grows: each PVC's request grows when its StorageClass allows
    volume expansion; otherwise Ready is False with StorageCannotGrow and the PVC stays."""
    names = {"c6": "expandable", "c7": "fixed-size"}
    for cluster, class_name in names.items():
        await kube.create(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": class_name},
                "provisioner": "strom.io/test",
                "allowVolumeExpansion": class_name == "expandable",
            }
        )
        storage = {"size": "1Gi", "storageClassName": class_name}
        await kube.create(cluster_body(cluster, storage=storage))
        await kube.create(broker_pod(cluster, 0))
        claim = model.ClusterNames(cluster, NAMESPACE).claim(0)
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim, "namespace": NAMESPACE},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": class_name,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        )
        await wait_condition(kube, "KafkaCluster", cluster, "Ready", "True", "created")
        grown = {"spec": {"storage": {"size": "2Gi", "storageClassName": class_name}}}
        await kube.merge_patch("KafkaCluster", NAMESPACE, cluster, grown)

    async def requested(cluster: str) -> str:
        claim = model.ClusterNames(cluster, NAMESPACE).claim(0)
        body = await kube.get("PersistentVolumeClaim", NAMESPACE, claim)
        return str(body["spec"]["resources"]["requests"]["storage"])

    async def grown() -> bool | None:
        return await requested("c6") == "2Gi" or None

    await eventually(grown, "the expandable class's PVC requesting 2Gi")
    refused = await wait_condition(kube, "KafkaCluster", "c7", "Ready", "False", "cannot grow")
    assert refused["reason"] == "StorageCannotGrow"
    assert (
        "fixed-size" in refused["message"]
        and "does not allow volume expansion" in (refused["message"])
    )
    assert await requested("c7") == "1Gi"
