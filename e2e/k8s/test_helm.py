"""charts/strom on a real control plane: `helm install`, `helm upgrade`, `helm uninstall`.

The real `helm` (built from Go modules by e2e/k8s/helm.sh) installs the chart into the
harness's kube-apiserver: the CRDs, the operator's ServiceAccount, RBAC and Deployment,
kopf's peering object and an example 1-broker KafkaCluster. The operator runs as the
chart's pod in the test kubelet (the "image" is this host's .venv, as for every pod here)
and reaches the apiserver in-cluster, with its service account's token, at
https://kubernetes.default.svc (api_relay.TcpRelay: the apiserver listens on 127.0.0.1).
The test asserts what a user sees: the Deployment available, the KafkaCluster Ready; a
`helm upgrade` whose chart carries a changed CRD changes the CRD in the apiserver (a new
schema field is kept where it was pruned before); `helm uninstall` leaves the CRDs and the
cluster (crds.keep, the example's keep policy). Every rendered object, with every option
on, passes the apiserver's own validation (server-side dry run): the chart's "validates
against the Kubernetes schemas", the optional PodMonitor and PrometheusRule included (the
Prometheus Operator's own CRDs, e2e/k8s/prometheus-operator-crds/, are installed for
that check).
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import shutil
import subprocess
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_relay import TcpRelay
from k8s_harness import Cluster, wait_for

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "strom"
PROMETHEUS_OPERATOR_CRDS = Path(__file__).resolve().parent / "prometheus-operator-crds"
NAMESPACE = "strom-helm-e2e"
RELEASE = "strom"
EXAMPLE = "helm"
CRD = "kafkaclusters.strom.io"
PROBE_FIELD = "upgradeProbe"  # what the upgraded chart's CRD adds to KafkaCluster's spec
JSON = dict[str, Any]

EXAMPLE_SPEC: JSON = {
    "brokers": 1,
    "controllers": 1,
    "image": "strom/broker:e2e",
    "storage": {"size": "64Mi", "deleteClaim": True},
    "config": {
        "default.replication.factor": 1,
        "offsets.topic.replication.factor": 1,
        "min.insync.replicas": 1,
    },
}
INSTALL_VALUES: JSON = {
    "operator": {"reconcileInterval": 2},
    "exampleCluster": {"enabled": True, "name": EXAMPLE, "spec": EXAMPLE_SPEC},
}


def helm_binary() -> Path | None:
    printed = subprocess.run(
        ["bash", str(Path(__file__).parent / "helm.sh"), "--print"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return Path(printed) if Path(printed).exists() else None


@dataclass(frozen=True)
class Helm:
    cluster: Cluster
    binary: Path
    env: dict[str, str]
    work: Path

    def __call__(self, *args: str, timeout: float = 400) -> str:
        done = subprocess.run(
            [str(self.binary), "--kubeconfig", self.cluster.kubeconfig, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
        return done.stdout

    def values_file(self, name: str, values: JSON) -> str:
        path = self.work / name
        path.write_text(yaml.safe_dump(values))
        return str(path)


@pytest.fixture(scope="module")
def helm(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    """helm against the harness, the apiserver relayed to the pods, the namespace made."""
    binary = helm_binary()
    if binary is None:
        pytest.skip("helm is not built: run `make helm` (bash e2e/k8s/helm.sh)")
    if importlib.util.find_spec("strom_operator.main") is None:
        pytest.skip("strom_operator.main (the strom-operator entry point) is not there")
    harness = cluster.harness
    if harness is None or harness.api is None or harness.subnet is None:
        pytest.skip("runs the operator's pod from this host's .venv: the harness's own kubelet")
    work = tmp_path_factory.mktemp("helm")
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(work / "cache"),
        "HELM_CONFIG_HOME": str(work / "config"),
        "HELM_DATA_HOME": str(work / "data"),
        "KUBECACHEDIR": str(work / "kube-cache"),
    }
    node_ip = str(ipaddress.ip_address(next(harness.subnet.hosts())))
    api_port = urllib.parse.urlsplit(harness.api.server).port
    assert api_port is not None
    relay = TcpRelay(node_ip, 443, ("127.0.0.1", api_port))
    cluster.kubectl("create", "namespace", NAMESPACE)
    try:
        yield Helm(cluster, binary, env, work)
    finally:
        relay.close()


def get(cluster: Cluster, *args: str) -> JSON:
    return cluster.get(*args, "-n", NAMESPACE)


def condition(obj: JSON, kind: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def probe_field(cluster: Cluster) -> str:
    """A new KafkaCluster with PROBE_FIELD set, through a server-side dry run with strict
    field validation: the field's value as the apiserver would store it, or its refusal
    (a field the CRD's schema does not know)."""
    body = {
        "apiVersion": "strom.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": "probe", "namespace": NAMESPACE},
        "spec": {**EXAMPLE_SPEC, PROBE_FIELD: "set"},
    }
    try:
        out = cluster.kubectl("create", "--dry-run=server", "--validate=strict", "-o", "json",
                              "-f", "-", input=json.dumps(body))  # fmt: skip
    except RuntimeError as refused:
        return str(refused)
    return str(json.loads(out)["spec"].get(PROBE_FIELD, "(pruned)"))


def test_install_brings_up_the_operator_and_a_ready_example_cluster(helm: Helm) -> None:
    values = helm.values_file("install.yaml", INSTALL_VALUES)
    helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "--values", values,
         "--wait", "--timeout", "300s")  # fmt: skip
    cluster = helm.cluster
    deployment = get(cluster, "deployment", "strom-operator")
    assert deployment["status"].get("availableReplicas") == 1
    operator_pods = get(cluster, "pods", "-l", "app.kubernetes.io/name=strom-operator")["items"]
    assert [p["status"]["phase"] for p in operator_pods] == ["Running"]
    assert operator_pods[0]["spec"]["serviceAccountName"] == "strom-operator"
    crd = cluster.get("crd", CRD)
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
    assert cluster.get("clusterkopfpeering", "strom-operator")

    def ready() -> JSON | None:
        found = get(cluster, "kafkacluster", EXAMPLE)
        return found if condition(found, "Ready") == "True" else None

    example = wait_for("the example KafkaCluster Ready", ready, 240, 2)
    assert example["status"]["replicas"] == 1
    broker = get(cluster, "pod", f"{EXAMPLE}-broker-0")
    assert broker["status"]["phase"] == "Running"


def test_every_option_passes_the_apiservers_validation(helm: Helm) -> None:
    """`helm template` with every option on, then `kubectl apply --dry-run=server`: the
    apiserver checks each object against its schema (built-in kinds and our CRDs, whose
    CEL rules included), with strict field validation (an unknown field is an error)."""
    cluster = helm.cluster
    # the Prometheus Operator's CRDs, so that PodMonitor and PrometheusRule are checked too
    # (server-side: PodMonitor's schema is past client-side apply's annotation limit)
    cluster.kubectl("apply", "--server-side", "-f", str(PROMETHEUS_OPERATOR_CRDS))
    for crd in ("podmonitors", "prometheusrules"):
        cluster.kubectl(
            "wait", "--for=condition=Established", f"crd/{crd}.monitoring.coreos.com",
            "--timeout=60s",
        )  # fmt: skip
    watched = ["strom-helm-a", "strom-helm-b"]
    for namespace in watched:
        cluster.kubectl("create", "namespace", namespace)
    every_option: JSON = {
        "image": {"repository": "registry.example/strom/operator", "tag": "9.9.9"},
        "imagePullSecrets": [{"name": "registry"}],
        "serviceAccount": {"name": "validate-op", "annotations": {"a": "b"}},
        "rbac": {"scope": "namespace"},
        "operator": {
            "watchNamespaces": watched,
            "peering": "validate",
            "replicas": 2,
            "verbose": True,
            "extraEnv": [{"name": "EXTRA", "value": "1"}],
            "podAnnotations": {"team": "data"},
            "podLabels": {"tier": "operator"},
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "priorityClassName": "system-cluster-critical",
        },
        "dashboards": {"annotations": {"grafana_folder": "Strom"}},
        "podMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "exampleCluster": {"enabled": True, "name": "validate", "spec": EXAMPLE_SPEC},
    }
    for name, values in (("defaults", {}), ("every-option", every_option)):
        rendered = helm("template", "validate", str(CHART), "-n", NAMESPACE,
                        "--values", helm.values_file(f"{name}.yaml", values))  # fmt: skip
        checked = [d for d in yaml.safe_load_all(rendered) if d]
        assert {d["kind"] for d in checked} >= {"CustomResourceDefinition", "Deployment"}
        if name == "every-option":
            assert {d["kind"] for d in checked} >= {"PodMonitor", "PrometheusRule"}
        out = cluster.kubectl(
            "apply", "--dry-run=server", "--validate=strict", "-f", "-",
            input=yaml.safe_dump_all(checked),
        )  # fmt: skip
        assert out.count("(server dry run)") == len(checked), out


def test_upgrade_with_a_changed_crd_changes_it_in_the_apiserver(helm: Helm) -> None:
    cluster = helm.cluster
    before = cluster.get("crd", CRD)
    example_uid = get(cluster, "kafkacluster", EXAMPLE)["metadata"]["uid"]
    assert f'unknown field "spec.{PROBE_FIELD}"' in probe_field(cluster)  # not in the CRD yet

    changed = helm.work / "strom-changed"
    shutil.copytree(CHART, changed, symlinks=False)  # the links' targets, copied
    crd_file = changed / "files" / "crds" / "kafkacluster.yaml"
    crd = yaml.safe_load(crd_file.read_text())
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["properties"][PROBE_FIELD] = {"type": "string", "description": "upgrade probe"}
    crd_file.write_text(yaml.safe_dump(crd))
    helm("upgrade", RELEASE, str(changed), "-n", NAMESPACE, "--reuse-values",
         "--wait", "--timeout", "300s")  # fmt: skip

    after = cluster.get("crd", CRD)
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # updated, not replaced
    live_spec = after["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert live_spec["properties"][PROBE_FIELD]["type"] == "string"
    assert probe_field(cluster) == "set"  # the new schema is in force

    # the example, a post-install hook, is now a release resource: the same cluster, Ready
    manifest = helm("get", "manifest", RELEASE, "-n", NAMESPACE)
    assert "kind: KafkaCluster" in manifest
    example = get(cluster, "kafkacluster", EXAMPLE)
    assert example["metadata"]["uid"] == example_uid
    assert condition(example, "Ready") == "True"


def test_uninstall_keeps_the_crds_and_the_cluster(helm: Helm) -> None:
    cluster = helm.cluster
    helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s")

    def operator_gone() -> bool:
        return not get(cluster, "deployments", "-l", "app.kubernetes.io/name=strom-operator")[
            "items"
        ]

    wait_for("the operator's Deployment deleted", operator_gone, 60, 1)
    assert not cluster.kubectl("get", "clusterrole", "-l", "app.kubernetes.io/instance=strom",
                               "-o", "name").strip()  # fmt: skip
    for crd in ("kafkaclusters.strom.io", "topics.strom.io", "sparkjobs.strom.io"):
        assert cluster.get("crd", crd)["metadata"]["name"] == crd
    assert get(cluster, "kafkacluster", EXAMPLE)["metadata"]["name"] == EXAMPLE


def test_teardown_leaves_nothing_behind(helm: Helm) -> None:
    """The operator's and the broker's pods and the control plane go with the harness."""
    harness = helm.cluster.harness
    assert harness is not None
    harness.stop()
    assert harness.leftovers() == []
