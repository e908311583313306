"""charts/strom, rendered by the real `helm` (built by `make helm`: bash e2e/k8s/helm.sh).

`helm lint`, then `helm template` with the default values and with a values file turning
every option on, its output parsed and checked against what the chart promises: the CRDs
are exactly crds/*.yaml (one source: the chart reads them through its files/crds link),
upgradable templates behind crds.install / crds.keep; the RBAC is operator/deploy's
ClusterRole, cluster-wide or split into namespaced Roles; the Deployment's environment is
what strom_operator.settings reads back as the values given; the dashboards, PodMonitor,
PrometheusRule and example cluster appear only when asked for. Bad values fail with the
key's path in the message (values.schema.json). That the output is valid Kubernetes is
checked by the apiserver itself in e2e/k8s/test_helm.py (server-side dry run).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from strom_operator import settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "strom"
HELM_SH = ROOT / "e2e" / "k8s" / "helm.sh"
KEEP = "helm.sh/resource-policy"
JSON = dict[str, Any]

EVERY_OPTION: JSON = {
    "crds": {"install": True, "keep": True},
    "image": {"repository": "registry.example/strom/operator", "tag": "9.9.9"},
    "imagePullSecrets": [{"name": "registry"}],
    "serviceAccount": {"create": True, "name": "strom-op", "annotations": {"a": "b"}},
    "rbac": {"create": True, "scope": "namespace"},
    "operator": {
        "watchNamespaces": ["kafka-a", "kafka-b"],
        "peering": "strom-peering",
        "replicas": 2,
        "reconcileInterval": 5,
        "throttleBytes": 1048576,
        "maxMoves": 3,
        "brokerAddress": "pod-ip",
        "kafkaTimeout": 20,
        "sparkMaster": "k8s://https://api.example:6443",
        "livenessPort": 8081,
        "metricsPort": 9406,
        "verbose": True,
        "extraEnv": [{"name": "EXTRA", "value": "1"}],
        "podAnnotations": {"team": "data"},
        "podLabels": {"tier": "operator"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "affinity": {"podAntiAffinity": {}},
        "priorityClassName": "system-cluster-critical",
    },
    "dashboards": {"enabled": True, "namespace": "monitoring", "annotations": {"f": "Strom"}},
    "podMonitor": {"enabled": True, "labels": {"release": "prom"}, "interval": "15s"},
    "prometheusRule": {"enabled": True, "labels": {"release": "prom"}},
    "exampleCluster": {"enabled": True, "name": "demo", "spec": {"brokers": 1}},
}


def helm_binary() -> Path | None:
    printed = subprocess.run(
        ["bash", str(HELM_SH), "--print"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return Path(printed) if Path(printed).exists() else None


@pytest.fixture(scope="module")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    binary = helm_binary()
    if binary is None:
        pytest.skip("helm is not built: run `make helm` (bash e2e/k8s/helm.sh)")
    home = tmp_path_factory.mktemp("helm-home")
    env = {
        **os.environ,
        "HELM_BINARY": str(binary),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    yield env


def helm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [env["HELM_BINARY"], *args], capture_output=True, text=True, env=env, timeout=120
    )


def render(env: dict[str, str], tmp_path: Path, values: JSON | None = None) -> list[JSON]:
    args = ["template", "strom", str(CHART), "--namespace", "strom"]
    if values is not None:
        values_file = tmp_path / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        args += ["--values", str(values_file)]
    done = helm(env, *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def of_kind(docs: list[JSON], kind: str) -> list[JSON]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[JSON], kind: str) -> JSON:
    found = of_kind(docs, kind)
    assert len(found) == 1, [d["metadata"]["name"] for d in found]
    return found[0]


def source_crds() -> list[JSON]:
    docs = []
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def without_keep(crd: JSON) -> JSON:
    copy = yaml.safe_load(yaml.safe_dump(crd))
    annotations = copy["metadata"].get("annotations") or {}
    annotations.pop(KEEP, None)
    if not annotations:
        copy["metadata"].pop("annotations", None)
    return dict(copy)


def by_name(docs: list[JSON]) -> dict[str, JSON]:
    return {d["metadata"]["name"]: d for d in docs}


def container(docs: list[JSON]) -> JSON:
    deployment = one(docs, "Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def env_of(docs: list[JSON]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container(docs)["env"] if "value" in e}


# --- lint and the default values


def test_helm_lint_is_clean(helm_env: dict[str, str], tmp_path: Path) -> None:
    done = helm(helm_env, "lint", "--strict", str(CHART))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout
    values_file = tmp_path / "every-option.yaml"
    values_file.write_text(yaml.safe_dump(EVERY_OPTION))
    done = helm(helm_env, "lint", "--strict", str(CHART), "--values", str(values_file))
    assert done.returncode == 0, done.stdout + done.stderr


def test_defaults_render_the_crds_the_operator_and_its_rights(
    helm_env: dict[str, str], tmp_path: Path
) -> None:
    docs = render(helm_env, tmp_path)
    kinds = sorted({d["kind"] for d in docs})
    assert kinds == sorted(
        {"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
         "ClusterKopfPeering", "Deployment"} | ({"ConfigMap"} if dashboards() else set())
    )  # fmt: skip
    for absent in ("PodMonitor", "PrometheusRule", "KafkaCluster", "Role", "RoleBinding"):
        assert not of_kind(docs, absent), absent
    account = one(docs, "ServiceAccount")["metadata"]
    assert (account["name"], account["namespace"]) == ("strom-operator", "strom")
    binding = one(docs, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "strom-operator", "namespace": "strom"}
    ]
    assert binding["roleRef"]["name"] == one(docs, "ClusterRole")["metadata"]["name"]


def test_the_crds_are_crds_folder_exactly_and_kept_on_uninstall(
    helm_env: dict[str, str], tmp_path: Path
) -> None:
    """One source: what the chart renders is crds/*.yaml, plus the keep annotation."""
    assert (CHART / "files" / "crds").resolve() == ROOT / "crds"
    # Helm's crds/ folder is never upgraded: the CRDs must not be there
    assert not (CHART / "crds").exists()
    rendered = of_kind(render(helm_env, tmp_path), "CustomResourceDefinition")
    assert all(crd["metadata"]["annotations"][KEEP] == "keep" for crd in rendered)
    assert by_name([without_keep(c) for c in rendered]) == by_name(source_crds())


def test_crds_keep_false_and_install_false(helm_env: dict[str, str], tmp_path: Path) -> None:
    unkept = of_kind(
        render(helm_env, tmp_path, {"crds": {"install": True, "keep": False}}),
        "CustomResourceDefinition",
    )
    assert by_name(unkept) == by_name(source_crds())
    docs = render(helm_env, tmp_path, {"crds": {"install": False, "keep": True}})
    assert not of_kind(docs, "CustomResourceDefinition")
    assert one(docs, "Deployment")


def test_cluster_scope_grants_exactly_operator_deploys_clusterrole(
    helm_env: dict[str, str], tmp_path: Path
) -> None:
    source = yaml.safe_load((ROOT / "operator" / "deploy" / "020-ClusterRole-strom-operator.yaml")
                            .read_text())  # fmt: skip
    assert one(render(helm_env, tmp_path), "ClusterRole")["rules"] == source["rules"]


def test_the_deployments_environment_is_read_back_as_the_values(
    helm_env: dict[str, str], tmp_path: Path
) -> None:
    docs = render(helm_env, tmp_path)
    c = container(docs)
    assert c["image"] == "strom/operator:0.1.0"
    assert c["command"] == ["strom-operator"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"healthz": 8080, "metrics": 9405}
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    read = settings.from_environment(env_of(docs))
    assert read == settings.OperatorSettings(
        namespaces=(), peering="strom-operator", broker_address=settings.BrokerAddress.SERVICE
    )
    spec = one(docs, "Deployment")["spec"]
    assert spec["strategy"] == {"type": "Recreate"}
    assert spec["template"]["spec"]["serviceAccountName"] == "strom-operator"


def dashboards() -> list[Path]:
    return sorted((CHART / "dashboards").glob("*.json"))


def test_one_dashboard_configmap_per_json_file_labelled_for_grafana(
    helm_env: dict[str, str], tmp_path: Path
) -> None:
    maps = of_kind(render(helm_env, tmp_path), "ConfigMap")
    files = {p.name: p.read_text() for p in dashboards()}
    data = {key: text for m in maps for key, text in m["data"].items()}
    assert data.keys() == files.keys()
    for name, text in data.items():
        assert text.strip() == files[name].strip(), name
    for m in maps:
        assert m["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert not of_kind(render(helm_env, tmp_path, {"dashboards": {"enabled": False}}), "ConfigMap")


# --- every option on


def test_every_option(helm_env: dict[str, str], tmp_path: Path) -> None:
    docs = render(helm_env, tmp_path, EVERY_OPTION)
    c = container(docs)
    assert c["image"] == "registry.example/strom/operator:9.9.9"
    assert c["args"] == ["--verbose"]
    read = settings.from_environment(env_of(docs))
    assert read == settings.OperatorSettings(
        namespaces=("kafka-a", "kafka-b"),
        peering="strom-peering",
        liveness_port=8081,
        metrics_port=9406,
        reconcile_interval_s=5,
        throttle_bytes_per_s=1048576,
        max_moves=3,
        broker_address=settings.BrokerAddress.POD_IP,
        kafka_timeout_s=20,
        spark_master="k8s://https://api.example:6443",
    )
    assert env_of(docs)["EXTRA"] == "1"
    pod = one(docs, "Deployment")["spec"]["template"]
    assert pod["metadata"]["labels"]["tier"] == "operator"
    assert pod["metadata"]["annotations"]["team"] == "data"
    assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
    assert pod["spec"]["serviceAccountName"] == "strom-op"

    # namespaced RBAC: a Role per watched namespace, cluster-scoped reads only outside
    roles = of_kind(docs, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["kafka-a", "kafka-b"]
    bindings = of_kind(docs, "RoleBinding")
    assert all(b["subjects"][0]["name"] == "strom-op" for b in bindings)
    cluster_resources = {r for rule in one(docs, "ClusterRole")["rules"] for r in rule["resources"]}
    assert cluster_resources == {"nodes", "storageclasses", "customresourcedefinitions",
                                 "namespaces"}  # fmt: skip
    role_resources = {r for rule in roles[0]["rules"] for r in rule["resources"]}
    assert {"kafkaclusters", "statefulsets", "pods", "kopfpeerings"} <= role_resources
    assert not role_resources & cluster_resources
    assert "clusterkopfpeerings" not in role_resources
    peerings = of_kind(docs, "KopfPeering")
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["kafka-a", "kafka-b"]
    assert not of_kind(docs, "ClusterKopfPeering")

    monitors = by_name(of_kind(docs, "PodMonitor"))
    brokers = monitors["strom-operator-brokers"]["spec"]
    broker_pods = {"app.kubernetes.io/name": "strom", "app.kubernetes.io/component": "broker"}
    assert brokers["selector"]["matchLabels"] == broker_pods
    assert brokers["podMetricsEndpoints"][0]["port"] == "metrics"
    assert monitors["strom-operator"]["metadata"]["labels"]["release"] == "prom"

    rules_file = CHART / "rules" / "strom-rules.yaml"
    if rules_file.exists():
        rule = one(docs, "PrometheusRule")
        assert rule["spec"]["groups"] == yaml.safe_load(rules_file.read_text())["groups"]
    else:  # the alert rules are not written yet: nothing rather than an empty rule
        assert not of_kind(docs, "PrometheusRule")

    example = one(docs, "KafkaCluster")
    assert example["metadata"]["name"] == "demo"
    # Helm merges the given spec into values.yaml's: what is not given keeps its default
    assert example["spec"]["brokers"] == 1
    assert example["spec"]["storage"] == {"size": "1Gi", "deleteClaim": False}
    for created_after_the_crds in (example, *peerings):
        annotations = created_after_the_crds["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "post-install"
        assert annotations[KEEP] == "keep"
        assert annotations["meta.helm.sh/release-name"] == "strom"
    for m in of_kind(docs, "ConfigMap"):
        assert m["metadata"]["namespace"] == "monitoring"


# --- values.schema.json


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"rbac": {"scope": "everywhere"}}, "/rbac/scope"),
        ({"operator": {"brokerAddress": "dns"}}, "/operator/brokerAddress"),
        ({"operator": {"replicas": -1}}, "/operator/replicas"),
        ({"operator": {"watchNamespace": ["a"]}}, "watchNamespace"),  # a typo
        ({"operator": {"watchNamespaces": ["Not_A_Namespace"]}}, "/operator/watchNamespaces/0"),
        ({"operator": {"metricsPort": 70000}}, "/operator/metricsPort"),
        ({"operator": {"replicas": 2, "peering": ""}}, "/operator/peering"),
        ({"crds": {"keep": "yes"}}, "/crds/keep"),
        ({"exampleCluster": {"name": "My_Cluster"}}, "/exampleCluster/name"),
        ({"exampleCluster": {"spec": {"brokers": 0}}}, "/exampleCluster/spec/brokers"),
        ({"podMonitor": {"interval": "often"}}, "/podMonitor/interval"),
    ],
)
def test_bad_values_fail_with_the_keys_path(
    helm_env: dict[str, str], tmp_path: Path, values: JSON, message: str
) -> None:
    values_file = tmp_path / "bad.yaml"
    values_file.write_text(yaml.safe_dump(values))
    done = helm(helm_env, "template", "strom", str(CHART), "--values", str(values_file))
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
    assert message in done.stderr, done.stderr
