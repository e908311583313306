"""The CRDs, their examples and the operator's install manifests on a real kube-apiserver.

No operator runs here: what is checked is what the apiserver itself does with crds/ and
operator/deploy/ — establishes the CRDs, fills in the schema's defaults, refuses bad
resources with the messages the schema's CEL rules give (what a user reads from kubectl),
serves /scale and the printer columns. The status a test needs is written the way the
operator writes it (the /status subresource).

The tests run in order on one control plane and build on each other (the examples applied
early are scaled and listed later). Few kubectl calls: bad resources are sent in one batch
and each refusal is found in kubectl's output by the object's name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_harness import Cluster

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
EXAMPLES = CRDS / "examples"
DEPLOY = ROOT / "operator" / "deploy"
NAMESPACE = "strom-crds"
OPERATOR_NAMESPACE = "strom"  # the namespace 030-ClusterRoleBinding names
CRD_NAMES = (
    "crd/kafkaclusters.strom.io",
    "crd/topics.strom.io",
    "crd/sparkjobs.strom.io",
    "crd/clusterkopfpeerings.kopf.dev",
    "crd/kopfpeerings.kopf.dev",
)
SELECTOR = "app.kubernetes.io/name=strom,app.kubernetes.io/instance=my-cluster"

Object = dict[str, Any]


def namespace_doc(name: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> Cluster:
    """crds/ applied and established; NAMESPACE (fresh) for the resources."""
    if cluster.harness is None:  # another cluster may hold a previous run's resources
        cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", timeout=180)
    cluster.kubectl("apply", "-f", str(CRDS))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *CRD_NAMES)
    cluster.kubectl("apply", "-f", "-", input=namespace_doc(NAMESPACE))
    return cluster


def objects(output: str) -> list[Object]:
    """kubectl's -o json: a List, one object, or (create) several objects back to back."""
    decoder = json.JSONDecoder()
    found: list[Object] = []
    rest = output.strip()
    while rest:
        obj, end = decoder.raw_decode(rest)
        found.extend(obj["items"] if obj.get("kind", "").endswith("List") else [obj])
        rest = rest[end:].strip()
    return found


def by_name(found: list[Object]) -> dict[str, Object]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in found}


def refused(cluster: Cluster, docs: list[Object], *args: str) -> dict[str, str]:
    """Send `docs` with `kubectl apply`; every one must be refused. Returns each object's
    name → the apiserver's message about it, as kubectl prints it."""
    text = yaml.safe_dump_all(docs)
    with pytest.raises(RuntimeError) as failure:
        cluster.kubectl("apply", "-n", NAMESPACE, *args, "-f", "-", input=text)
    messages = dict(
        re.findall(
            r'(?:KafkaCluster|Topic)\.strom\.io "([^"]+)" is invalid: (.*?)(?=\nError from|\Z)',
            str(failure.value),
            re.S,
        )
    )
    assert sorted(messages) == sorted(d["metadata"]["name"] for d in docs), str(failure.value)
    return messages


def kafka_cluster(name: str, **spec: Any) -> Object:
    return {
        "apiVersion": "strom.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": name},
        "spec": spec,
    }


def topic(name: str, **fields: Any) -> Object:
    """A Topic of my-cluster; a field given as None is left out."""
    spec = {k: v for k, v in {"cluster": "my-cluster", **fields}.items() if v is not None}
    return {
        "apiVersion": "strom.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_crds_are_established_with_their_names(crds: Cluster) -> None:
    found = by_name(objects(crds.kubectl("get", "crd", "-o", "json")))
    for name, short in (("kafkaclusters.strom.io", "skc"), ("topics.strom.io", "skt")):
        crd = found[f"CustomResourceDefinition/{name}"]
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True"
        assert conditions["NamesAccepted"] == "True"
        assert short in crd["status"]["acceptedNames"]["shortNames"]
        assert crd["status"]["acceptedNames"]["categories"] == ["strom"]
    for name in ("clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"):
        assert f"CustomResourceDefinition/{name}" in found


def test_examples_apply_with_the_defaults_filled_in(crds: Cluster) -> None:
    dry = by_name(
        objects(
            crds.kubectl(
                "create", "--dry-run=server", "-n", NAMESPACE, "-f", str(EXAMPLES), "-o", "json"
            )
        )
    )
    assert sorted(dry) == [
        "KafkaCluster/my-cluster",
        "SparkJob/clickstream",
        "Topic/customer-profiles",
        "Topic/orders",
    ]
    assert objects(crds.kubectl("get", "strom", "-n", NAMESPACE, "-o", "json")) == []

    crds.kubectl("apply", "-n", NAMESPACE, "-f", str(EXAMPLES))
    stored = by_name(objects(crds.kubectl("get", "strom", "-n", NAMESPACE, "-o", "json")))
    assert sorted(stored) == sorted(dry)
    for obj in (dry["KafkaCluster/my-cluster"], stored["KafkaCluster/my-cluster"]):
        spec = obj["spec"]
        # the example leaves these out: the schema's defaults
        assert spec["controllers"] == 3
        assert spec["metrics"] == {"enabled": True, "port": 9404}
        # and keeps what it says
        assert spec["brokers"] == 3
        assert spec["storage"] == {"size": "1Gi", "deleteClaim": False}
        assert spec["listeners"] == [{"name": "PLAINTEXT", "port": 9092}]
        assert spec["config"]["min.insync.replicas"] == 2
    orders = stored["Topic/orders"]["spec"]
    assert (orders["partitions"], orders["replicationFactor"]) == (6, 3)
    compacted = stored["Topic/customer-profiles"]["spec"]
    assert compacted["topicName"] == "customer_profiles"
    assert compacted["config"]["cleanup.policy"] == "compact"


def test_a_minimal_cluster_gets_every_default(crds: Cluster) -> None:
    text = yaml.safe_dump(kafka_cluster("defaults"))
    (obj,) = objects(
        crds.kubectl(
            "create", "--dry-run=server", "-n", NAMESPACE, "-f", "-", "-o", "json", input=text
        )
    )
    assert obj["spec"] == {
        "brokers": 3,
        "controllers": 3,
        "image": "strom/broker:0.1.0",
        "storage": {"size": "10Gi", "deleteClaim": False},
        "listeners": [{"name": "PLAINTEXT", "port": 9092}],
        "metrics": {"enabled": True, "port": 9404},
    }


def test_the_install_manifests_are_accepted(crds: Cluster) -> None:
    crds.kubectl("apply", "-f", "-", input=namespace_doc(OPERATOR_NAMESPACE))
    out = crds.kubectl("apply", "--dry-run=server", "-n", OPERATOR_NAMESPACE, "-f", str(DEPLOY))
    assert sorted(out.splitlines()) == [
        "clusterkopfpeering.kopf.dev/strom-operator created (server dry run)",
        "clusterrole.rbac.authorization.k8s.io/strom-operator created (server dry run)",
        "clusterrolebinding.rbac.authorization.k8s.io/strom-operator created (server dry run)",
        "deployment.apps/strom-operator created (server dry run)",
        "serviceaccount/strom-operator created (server dry run)",
    ]


def test_bad_resources_are_refused_with_a_clear_message(crds: Cluster) -> None:
    messages = refused(
        crds,
        [
            topic("negative", partitions=-1),
            topic("slash", topicName="orders/eu"),
            topic("dots", topicName=".."),
            topic("no-cluster-topic", cluster=None),
            kafka_cluster("two-brokers", brokers=2),
            kafka_cluster("port-80", listeners=[{"name": "PLAINTEXT", "port": 80}]),
            kafka_cluster("port-99999", listeners=[{"name": "PLAINTEXT", "port": 99999}]),
            kafka_cluster(
                "same-port",
                listeners=[{"name": "PLAINTEXT", "port": 9092}, {"name": "EXTERNAL", "port": 9092}],
            ),
            kafka_cluster(
                "same-name",
                listeners=[
                    {"name": "PLAINTEXT", "port": 9092},
                    {"name": "PLAINTEXT", "port": 9094},
                ],
            ),
            kafka_cluster("quorum-port", listeners=[{"name": "PLAINTEXT", "port": 9093}]),
            kafka_cluster("metrics-port", listeners=[{"name": "PLAINTEXT", "port": 9404}]),
            # the name is also the pods' port name: an IANA service name (15 characters)
            kafka_cluster("long-name", listeners=[{"name": "PLAINTEXT_INTERNAL", "port": 9094}]),
            kafka_cluster("lots", storage={"size": "lots"}),
            kafka_cluster("Upper"),
        ],
    )
    assert "spec.partitions in body should be greater than or equal to 1" in messages["negative"]
    assert "spec.topicName in body should match '^[a-zA-Z0-9._-]+$'" in messages["slash"]
    assert 'spec.topicName may not be "." or ".."' in messages["dots"]
    assert "spec.cluster: Required value" in messages["no-cluster-topic"]
    assert "spec.controllers (3 unless set) must not exceed spec.brokers" in messages["two-brokers"]
    assert "set controllers to 1 (or to the number of brokers)" in messages["two-brokers"]
    assert "should be greater than or equal to 1024" in messages["port-80"]
    assert "should be less than or equal to 65535" in messages["port-99999"]
    assert "spec.listeners must each have a port of their own" in messages["same-port"]
    assert 'spec.listeners[1]: Duplicate value: {"name":"PLAINTEXT"}' in messages["same-name"]
    assert "port 9093 is the controllers' (the KRaft quorum listener)" in messages["quorum-port"]
    assert "spec.listeners may not use the metrics port" in messages["metrics-port"]
    assert "may not be more than 15 bytes" in messages["long-name"]
    assert "spec.storage.size must be a positive Kubernetes quantity" in messages["lots"]
    assert "metadata.name must start with a lower-case letter" in messages["Upper"]
    names = objects(crds.kubectl("get", "strom", "-n", NAMESPACE, "-o", "json"))
    assert not {o["metadata"]["name"] for o in names} & set(messages)


def test_changes_that_cannot_be_carried_out_are_refused(crds: Cluster) -> None:
    before = [
        kafka_cluster("shrink", storage={"size": "2Gi"}),
        kafka_cluster("voters"),
        kafka_cluster("storage-class"),
        topic("fewer", partitions=6, replicationFactor=3),
        topic("rf", partitions=6, replicationFactor=3),
        topic("renamed", topicName="Renamed"),
        topic("moved"),
    ]
    crds.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=yaml.safe_dump_all(before))

    messages = refused(
        crds,
        [
            kafka_cluster("shrink", storage={"size": "1500Mi"}),
            kafka_cluster("voters", controllers=1),
            kafka_cluster("storage-class", storage={"storageClassName": "fast"}),
            topic("fewer", partitions=3, replicationFactor=3),
            topic("rf", partitions=6, replicationFactor=2),
            topic("renamed", topicName="renamed-again"),
            topic("moved", cluster="other-cluster"),
        ],
    )
    assert "spec.storage.size cannot shrink" in messages["shrink"]
    assert "spec.controllers cannot change: the KRaft voter set is fixed" in messages["voters"]
    assert "spec.storage.storageClassName cannot change" in messages["storage-class"]
    assert "spec.partitions cannot decrease: Kafka cannot remove" in messages["fewer"]
    assert "spec.replicationFactor cannot change" in messages["rf"]
    assert "partition reassignment" in messages["rf"]
    assert "the topic's name (spec.topicName, or metadata.name without it)" in messages["renamed"]
    assert "spec.cluster cannot change" in messages["moved"]

    # what can change does: storage grows, partitions grow (in one apply)
    grown = [
        kafka_cluster("shrink", storage={"size": "3Gi"}),
        topic("fewer", partitions=8, replicationFactor=3),
    ]
    crds.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=yaml.safe_dump_all(grown))
    stored = by_name(objects(crds.kubectl("get", "strom", "-n", NAMESPACE, "-o", "json")))
    assert stored["KafkaCluster/shrink"]["spec"]["storage"]["size"] == "3Gi"
    assert stored["Topic/fewer"]["spec"]["partitions"] == 8
    assert stored["KafkaCluster/voters"]["spec"]["controllers"] == 3
    assert stored["Topic/rf"]["spec"]["replicationFactor"] == 3


def write_status(cluster: Cluster, resource: str, status: Object) -> None:
    """As the operator does: a merge patch of the /status subresource."""
    cluster.kubectl(
        "patch", "-n", NAMESPACE, resource, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


def tables(output: str) -> dict[str, list[dict[str, str]]]:
    """`kubectl get` of several kinds: each table (by its first column's resource) as
    rows of column → cell."""
    found: dict[str, list[dict[str, str]]] = {}
    for block in output.strip().split("\n\n"):
        header, *lines = block.splitlines()
        starts = [m.start() for m in re.finditer(r"\S+", header)]
        names = header.split()
        rows = [
            {
                name: line[start : (starts[i + 1] if i + 1 < len(starts) else None)].strip()
                for i, (name, start) in enumerate(zip(names, starts, strict=True))
            }
            for line in lines
        ]
        found[rows[0]["NAME"].split("/")[0]] = rows
    return found


def test_printer_columns_show_spec_and_status(crds: Cluster) -> None:
    write_status(
        crds,
        "kafkacluster/my-cluster",
        {
            "observedGeneration": 1,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Ready",
                    "message": "3 of 3 brokers ready",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                    "observedGeneration": 1,
                }
            ],
            "clusterId": "6j2C0Q0sQ5a0r2b7cXh3rA",
            "controllerId": 1,
            "bootstrapServers": f"my-cluster-bootstrap.{NAMESPACE}.svc:9092",
            "replicas": 3,
            "readyBrokers": 3,
            "selector": SELECTOR,
            "brokers": [
                {"id": i, "pod": f"my-cluster-broker-{i}", "ready": True, "leaders": 2,
                 "claim": f"data-my-cluster-broker-{i}"}
                for i in range(3)
            ],
        },
    )  # fmt: skip
    write_status(
        crds,
        "topic/orders",
        {
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}],
            "topicName": "orders",
            "topicId": "AAAAAAAAAAAAAAAAAAAAAQ",
            "partitions": 6,
        },
    )
    shown = tables(crds.kubectl("get", "strom", "-n", NAMESPACE, "-o", "wide"))
    clusters = {row["NAME"]: row for row in shown["kafkacluster.strom.io"]}
    assert clusters["kafkacluster.strom.io/my-cluster"] == {
        "NAME": "kafkacluster.strom.io/my-cluster",
        "BROKERS": "3",
        "READY": "3",
        "CONTROLLER": "1",
        "STATUS": "Ready",
        "BOOTSTRAP": f"my-cluster-bootstrap.{NAMESPACE}.svc:9092",
        "AGE": clusters["kafkacluster.strom.io/my-cluster"]["AGE"],
    }
    topics = {row["NAME"]: row for row in shown["topic.strom.io"]}
    orders = topics.pop("topic.strom.io/orders")
    assert {k: v for k, v in orders.items() if k != "AGE"} == {
        "NAME": "topic.strom.io/orders",
        "CLUSTER": "my-cluster",
        "TOPIC": "orders",
        "PARTITIONS": "6",
        "REPLICATION": "3",
        "READY": "True",
    }
    # the short name lists the same: `kubectl get skc` (the columns without -o wide)
    header = crds.kubectl("get", "skc", "-n", NAMESPACE).splitlines()[0].split()
    assert header == ["NAME", "BROKERS", "READY", "CONTROLLER", "STATUS", "AGE"]


def test_kubectl_scale_changes_the_brokers_through_the_scale_subresource(crds: Cluster) -> None:
    crds.kubectl("scale", "-n", NAMESPACE, "kafkacluster/my-cluster", "--replicas=4")
    scale = crds.get("-n", NAMESPACE, "kafkacluster", "my-cluster", "--subresource=scale")
    assert scale["kind"] == "Scale"
    assert scale["spec"]["replicas"] == 4
    # the status the operator wrote: what an HPA reads
    assert scale["status"] == {"replicas": 3, "selector": SELECTOR}
    assert crds.get("-n", NAMESPACE, "kafkacluster", "my-cluster")["spec"]["brokers"] == 4

    # below the controllers: the schema refuses it (the quorum would lose voters)
    with pytest.raises(RuntimeError, match=r"spec.controllers \(3 unless set\) must not exceed"):
        crds.kubectl("scale", "-n", NAMESPACE, "kafkacluster/my-cluster", "--replicas=2")
    assert crds.get("-n", NAMESPACE, "kafkacluster", "my-cluster")["spec"]["brokers"] == 4
