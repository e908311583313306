"""The CRDs (crds/), their examples (crds/examples/) and the install manifests
(operator/deploy/), checked without a cluster.

The real kube-apiserver checks them too (e2e/k8s/test_crds.py), but only where the
binaries are built; these checks run everywhere and name the file and field at fault: a
schema node the apiserver would call non-structural, an example field the schema lacks
(the apiserver would silently prune it), a default that drifted from the operator's model,
a printer column or /scale path that points nowhere, RBAC that misses the operator's own
resources.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from strom.config import definitions, topics
from strom_operator.reconcile import model, sparkjobs
from strom_operator.reconcile.sparkjob_status import State

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
EXAMPLES = CRDS / "examples"
DEPLOY = ROOT / "operator" / "deploy"

Schema = Mapping[str, Any]


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def crd(kind: str) -> dict[str, Any]:
    for path in sorted(CRDS.glob("*.yaml")):
        for doc in documents(path):
            if doc["kind"] == "CustomResourceDefinition" and doc["spec"]["names"]["kind"] == kind:
                return doc
    raise AssertionError(f"no CRD of kind {kind} in {CRDS}")


def schema_of(kind: str) -> Schema:
    (version,) = crd(kind)["spec"]["versions"]
    schema: Schema = version["schema"]["openAPIV3Schema"]
    return schema


def node(schema: Schema, dotted: str) -> Schema:
    """The schema node of a field path such as `spec.storage.size`."""
    for part in dotted.split("."):
        schema = schema["properties"][part]
    return schema


def schema_nodes(schema: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    yield path or "<root>", schema
    for name, child in schema.get("properties", {}).items():
        yield from schema_nodes(child, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from schema_nodes(schema["additionalProperties"], f"{path}.*")
    if "items" in schema:
        yield from schema_nodes(schema["items"], f"{path}[]")


ALL_YAML = sorted([*CRDS.rglob("*.yaml"), *DEPLOY.glob("*.yaml")])


@pytest.mark.parametrize("path", ALL_YAML, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_manifest_parses_as_named_kubernetes_objects(path: Path) -> None:
    docs = documents(path)
    assert docs, f"{path} holds no object"
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind"), f"{path}: {doc}"
        assert doc.get("metadata", {}).get("name"), f"{path}: an object without a name"


def test_the_install_manifests_are_numbered_in_apply_order_and_named_after_their_object() -> None:
    paths = sorted(DEPLOY.glob("*.yaml"))
    assert [p.name[:3] for p in paths] == sorted({p.name[:3] for p in paths})
    for path in paths:
        match = re.fullmatch(r"(\d{3})-([A-Za-z]+)-([a-z0-9-]+)\.yaml", path.name)
        assert match, f"{path.name}: not NNN-Kind-name.yaml"
        (doc,) = documents(path)
        assert (doc["kind"], doc["metadata"]["name"]) == (match[2], match[3])


@pytest.mark.parametrize("kind", ["KafkaCluster", "Topic", "SparkJob"])
def test_crd_is_namespaced_in_the_operators_group_and_version(kind: str) -> None:
    spec = crd(kind)["spec"]
    assert crd(kind)["metadata"]["name"] == f"{spec['names']['plural']}.{model.GROUP}"
    assert spec["group"] == model.GROUP
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["categories"] == ["strom"]
    assert spec["names"]["shortNames"]
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == (model.VERSION, True, True)
    assert "status" in version["subresources"]


@pytest.mark.parametrize("path", sorted(CRDS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_schema_node_is_structural(path: Path) -> None:
    """The apiserver's rule: every node says its type, unless it is int-or-string or keeps
    unknown fields; the two kinds of child (properties, items) only under their types."""
    for doc in documents(path):
        for version in doc["spec"]["versions"]:
            for where, schema in schema_nodes(version["schema"]["openAPIV3Schema"]):
                untyped = schema.get("x-kubernetes-int-or-string") or schema.get(
                    "x-kubernetes-preserve-unknown-fields"
                )
                assert "type" in schema or untyped, f"{path.name} {where}: no type"
                if "properties" in schema or "additionalProperties" in schema:
                    assert schema.get("type") == "object", f"{path.name} {where}"
                if schema.get("type") == "array":
                    assert "items" in schema, f"{path.name} {where}: an array without items"
                if "anyOf" in schema:  # allowed only as int-or-string's value types
                    assert schema.get("x-kubernetes-int-or-string"), f"{path.name} {where}"


def test_kafkacluster_defaults_match_the_operators_model() -> None:
    """The schema's defaults are what the operator assumes when a field is absent (kmock
    does no defaulting): the same numbers on both sides."""
    spec = schema_of("KafkaCluster")
    assert node(spec, "spec.brokers")["default"] == 3
    assert node(spec, "spec.controllers")["default"] == model.DEFAULT_CONTROLLERS
    assert node(spec, "spec.image")["default"] == "strom/broker:0.1.0"
    assert node(spec, "spec.storage")["default"] == {}
    assert node(spec, "spec.storage.size")["default"] == "10Gi"
    assert node(spec, "spec.storage.deleteClaim")["default"] is False
    assert node(spec, "spec.listeners")["default"] == [
        {"name": "PLAINTEXT", "port": model.KAFKA_PORT}
    ]
    metrics = {"enabled": True, "port": model.METRICS_PORT}
    assert node(spec, "spec.metrics")["default"] == metrics
    assert node(spec, "spec.metrics.enabled")["default"] is True
    assert node(spec, "spec.metrics.port")["default"] == model.METRICS_PORT


def rules(schema: Schema) -> str:
    return "\n".join(rule["rule"] for rule in schema.get("x-kubernetes-validations", []))


def test_kafkacluster_schema_guards_what_cannot_change() -> None:
    spec = schema_of("KafkaCluster")
    assert "self.controllers <= self.brokers" in rules(node(spec, "spec"))
    assert "self == oldSelf" in rules(node(spec, "spec.controllers"))
    assert "compareTo(quantity(oldSelf)) >= 0" in rules(node(spec, "spec.storage.size"))
    assert "oldSelf.storageClassName" in rules(node(spec, "spec.storage"))
    assert str(model.CONTROLLER_PORT) in rules(node(spec, "spec.listeners").get("items", {}))
    listeners = node(spec, "spec.listeners")
    assert listeners["x-kubernetes-list-map-keys"] == ["name"]  # names unique
    assert "exists_one(m, m.port == l.port)" in rules(listeners)  # ports unique


def test_topic_schema_guards_what_cannot_change() -> None:
    schema = schema_of("Topic")
    assert node(schema, "spec")["required"] == ["cluster"]
    assert "self >= oldSelf" in rules(node(schema, "spec.partitions"))
    assert "oldSelf.replicationFactor" in rules(node(schema, "spec"))
    assert "self == oldSelf" in rules(node(schema, "spec.cluster"))
    assert "oldSelf.spec.topicName" in rules(schema)  # the effective name never changes
    assert node(schema, "spec.replicationFactor")["maximum"] == 32767


STATUS_FIELDS = {
    "KafkaCluster": {
        "conditions": "array",
        "observedGeneration": "integer",
        "clusterId": "string",
        "controllerId": "integer",
        "bootstrapServers": "string",
        "replicas": "integer",
        "readyBrokers": "integer",
        "selector": "string",
        "brokers": "array",
    },
    "Topic": {
        "conditions": "array",
        "observedGeneration": "integer",
        "topicId": "string",
        "topicName": "string",
        "partitions": "integer",
    },
    "SparkJob": {
        "conditions": "array",
        "observedGeneration": "integer",
        "state": "string",
        "attempts": "integer",
        "attemptNumber": "integer",
        "submissionFailures": "integer",
        "submissionJob": "string",
        "driverPod": "string",
        "sparkApplicationId": "string",
        "lastError": "string",
        "lastSubmissionTime": "string",
        "terminationTime": "string",
    },
}


@pytest.mark.parametrize("kind", sorted(STATUS_FIELDS))
def test_status_declares_what_the_operator_writes(kind: str) -> None:
    status = node(schema_of(kind), "status")
    declared = {name: field["type"] for name, field in status["properties"].items()}
    assert declared == STATUS_FIELDS[kind]
    condition = status["properties"]["conditions"]["items"]["properties"]
    assert set(condition) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }
    # exactly the keys model.Condition.as_json writes
    example = model.Condition("Ready", "True", "Ready", "").as_json("2026-01-01T00:00:00Z", 1)
    assert set(example) == set(condition)


def test_brokers_status_entries_have_the_fields_the_operator_reports() -> None:
    entry = node(schema_of("KafkaCluster"), "status.brokers")["items"]["properties"]
    assert set(entry) == {"id", "pod", "ready", "leaders", "claim", "claimUid"}


def field_at(schema: Schema, json_path: str) -> Schema:
    """The schema node a printer column's or the scale subresource's JSONPath reads; a
    filter such as [?(@.type=="Ready")] selects array items."""
    parts = re.findall(r"\.([A-Za-z]+)(\[\?\(@\.[a-z]+==\"[A-Za-z]+\"\)\])?", json_path)
    assert "".join(f".{name}{flt}" for name, flt in parts) == json_path, json_path
    for name, item_filter in parts:
        schema = schema["properties"][name]
        if item_filter:
            schema = schema["items"]
    return schema


@pytest.mark.parametrize("kind", ["KafkaCluster", "Topic", "SparkJob"])
def test_printer_columns_read_declared_fields_of_their_type(kind: str) -> None:
    (version,) = crd(kind)["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    for column in version["additionalPrinterColumns"]:
        if column["jsonPath"] == ".metadata.creationTimestamp":
            assert column["type"] == "date"
            continue
        assert field_at(schema, column["jsonPath"])["type"] == column["type"], column


def test_kafkacluster_columns_are_the_documented_ones() -> None:
    (version,) = crd("KafkaCluster")["spec"]["versions"]
    shown = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert shown == ["Brokers", "Ready", "Controller", "Status", "Age"]
    (version,) = crd("Topic")["spec"]["versions"]
    shown = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert shown == ["Cluster", "Topic", "Partitions", "Replication", "Ready", "Age"]
    (version,) = crd("SparkJob")["spec"]["versions"]
    shown = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert shown == ["State", "Attempts", "Driver", "Age"]


def test_scale_subresource_reads_spec_brokers_and_the_status_the_operator_writes() -> None:
    (version,) = crd("KafkaCluster")["spec"]["versions"]
    scale = version["subresources"]["scale"]
    schema = version["schema"]["openAPIV3Schema"]
    assert scale["specReplicasPath"] == ".spec.brokers"
    assert field_at(schema, scale["specReplicasPath"])["type"] == "integer"
    assert field_at(schema, scale["statusReplicasPath"])["type"] == "integer"
    assert field_at(schema, scale["labelSelectorPath"])["type"] == "string"


# --- the examples -----------------------------------------------------------------------

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))


def unknown_fields(value: Any, schema: Schema, path: str) -> Iterator[str]:
    """Every field of `value` the schema does not declare (the apiserver would prune it
    without a word), and every value of the wrong type."""
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            yield f"{path}: {value!r} is neither an integer nor a string"
        return
    expected: tuple[type, ...] = {
        "object": (dict,),
        "array": (list,),
        "string": (str,),
        "integer": (int,),
        "boolean": (bool,),
        "number": (int, float),
    }[schema["type"]]
    if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
        yield f"{path}: {value!r} is not of type {schema['type']}"
        return
    if isinstance(value, dict):
        for key, child in value.items():
            if key in schema.get("properties", {}):
                yield from unknown_fields(child, schema["properties"][key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                yield from unknown_fields(child, schema["additionalProperties"], f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                yield f"{path}.{key}: not in the schema"
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from unknown_fields(item, schema["items"], f"{path}[{index}]")


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_fields_all_exist_in_the_schema(path: Path) -> None:
    for doc in documents(path):
        schema = schema_of(doc["kind"])
        assert list(unknown_fields(doc["spec"], node(schema, "spec"), "spec")) == []
        for required in node(schema, "spec").get("required", []):
            assert required in doc["spec"], f"{path.name}: spec.{required} is required"


def test_the_schema_walk_finds_a_misspelt_example_field() -> None:
    schema = node(schema_of("KafkaCluster"), "spec")
    spec = {"brokers": 3, "storage": {"size": "1Gi", "delete_claim": True}, "replicas": 3}
    assert sorted(unknown_fields(spec, schema, "spec")) == [
        "spec.replicas: not in the schema",
        "spec.storage.delete_claim: not in the schema",
    ]
    assert list(unknown_fields({"brokers": "3"}, schema, "spec")) == [
        "spec.brokers: '3' is not of type integer"
    ]


def examples(kind: str) -> list[dict[str, Any]]:
    return [doc for path in EXAMPLE_FILES for doc in documents(path) if doc["kind"] == kind]


def as_property(value: str | int | float | bool) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_examples_are_the_documented_ones() -> None:
    (cluster,) = examples("KafkaCluster")
    assert cluster["metadata"]["name"] == "my-cluster"
    assert cluster["spec"]["brokers"] == 3
    assert cluster["spec"]["config"]["min.insync.replicas"] == 2
    assert cluster["spec"]["config"]["default.replication.factor"] == 3
    by_name = {t["metadata"]["name"]: t["spec"] for t in examples("Topic")}
    assert by_name["orders"]["partitions"] == 6
    assert by_name["orders"]["replicationFactor"] == 3
    assert any("retention" in key for key in by_name["orders"]["config"])
    assert any(t.get("config", {}).get("cleanup.policy") == "compact" for t in by_name.values())
    assert {t["cluster"] for t in by_name.values()} == {"my-cluster"}


def test_example_configs_are_valid_for_the_broker() -> None:
    """The operator refuses unknown keys and bad values in status: the examples must not
    be refused. Checked with the broker's own definitions."""
    (cluster,) = examples("KafkaCluster")
    for key, value in cluster["spec"].get("config", {}).items():
        assert key in definitions.BROKER_CONFIGS, f"{key}: not a broker config"
        definitions.BROKER_CONFIGS[key].parse(as_property(value))
    for topic in examples("Topic"):
        config = topic["spec"].get("config", {})
        topics.validate_topic_configs({k: as_property(v) for k, v in config.items()})
        assert topic["spec"]["replicationFactor"] <= cluster["spec"]["brokers"]


# --- operator/deploy ----------------------------------------------------------------------


def deploy(kind: str) -> dict[str, Any]:
    (doc,) = [d for p in sorted(DEPLOY.glob("*.yaml")) for d in documents(p) if d["kind"] == kind]
    return doc


def test_rbac_binds_the_operators_service_account_to_its_role() -> None:
    account = deploy("ServiceAccount")["metadata"]["name"]
    binding = deploy("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == deploy("ClusterRole")["metadata"]["name"]
    assert [s["name"] for s in binding["subjects"]] == [account]
    pod = deploy("Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account


def granted(group: str, resource: str) -> set[str]:
    verbs: set[str] = set()
    for rule in deploy("ClusterRole")["rules"]:
        if group in rule["apiGroups"] and resource in rule["resources"]:
            verbs |= set(rule["verbs"])
    return verbs


def test_cluster_role_covers_the_operators_own_resources() -> None:
    for kind in ("KafkaCluster", "Topic", "SparkJob"):
        plural = crd(kind)["spec"]["names"]["plural"]
        assert {"get", "list", "watch", "patch"} <= granted(model.GROUP, plural)
        assert {"get", "patch"} <= granted(model.GROUP, f"{plural}/status")
        assert "update" in granted(model.GROUP, f"{plural}/finalizers")
    assert {"get", "patch"} <= granted(model.GROUP, "kafkaclusters/scale")
    assert {"get", "list", "watch", "delete"} <= granted("", "pods")
    assert {"create", "patch", "delete"} <= granted("apps", "statefulsets")
    assert {"create", "patch"} <= granted("", "events")
    for peering in crd_plurals("kopf.dev"):
        assert {"list", "watch", "patch"} <= granted("kopf.dev", peering)
    assert all("*" not in r["verbs"] + r["resources"] for r in deploy("ClusterRole")["rules"])


def crd_plurals(group: str) -> list[str]:
    return [
        doc["spec"]["names"]["plural"]
        for path in sorted(CRDS.glob("*.yaml"))
        for doc in documents(path)
        if doc["spec"]["group"] == group
    ]


def test_the_deployment_peers_through_the_shipped_peering_object() -> None:
    container = deploy("Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["STROM_OPERATOR_PEERING"] == deploy("ClusterKopfPeering")["metadata"]["name"]
    assert env["STROM_OPERATOR_NAMESPACES"] == ""  # every namespace
    assert sorted(crd_plurals("kopf.dev")) == ["clusterkopfpeerings", "kopfpeerings"]


def test_the_operator_pod_is_locked_down_probed_and_scraped() -> None:
    template = deploy("Deployment")["spec"]["template"]
    pod = template["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "strom/operator:0.1.0"
    assert container["command"] == ["strom-operator"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert ports[container["livenessProbe"]["httpGet"]["port"]] == 8080
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == ports["metrics"] == 9405
    assert {"requests", "limits"} <= set(container["resources"])


def test_cluster_role_covers_what_a_sparkjob_becomes_and_what_its_driver_is_granted() -> None:
    """The apiserver refuses a Role that grants more than its creator holds (RBAC's
    escalation check): the operator must hold every verb of the driver's Role."""
    for rule in sparkjobs.DRIVER_RULES:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert set(rule["verbs"]) <= granted(group, resource), resource
    every = {"get", "list", "watch", "create", "patch", "update", "delete"}
    assert every <= granted("batch", "jobs")
    assert every <= granted("", "serviceaccounts")
    for resource in ("roles", "rolebindings"):
        assert every <= granted("rbac.authorization.k8s.io", resource)
    assert "bind" not in granted("rbac.authorization.k8s.io", "roles")  # no shortcut
    assert "escalate" not in granted("rbac.authorization.k8s.io", "roles")


# --- the SparkJob schema ------------------------------------------------------------------


def test_sparkjob_defaults_match_the_operators_model() -> None:
    schema = schema_of("SparkJob")
    defaults = sparkjobs.RestartPolicy()
    assert node(schema, "spec")["required"] == ["cluster", "image", "mainApplicationFile"]
    assert node(schema, "spec.imagePullPolicy")["default"] == "IfNotPresent"
    restart = "spec.restartPolicy"
    assert node(schema, f"{restart}.type")["default"] == defaults.type.value
    assert node(schema, f"{restart}.type")["enum"] == [t.value for t in sparkjobs.RestartType]
    assert node(schema, f"{restart}.onFailureRetries")["default"] == defaults.on_failure_retries
    assert (
        node(schema, f"{restart}.onFailureRetryIntervalSeconds")["default"]
        == defaults.on_failure_interval_s
    )
    assert (
        node(schema, f"{restart}.onSubmissionFailureRetries")["default"]
        == defaults.on_submission_failure_retries
    )
    assert (
        node(schema, f"{restart}.onSubmissionFailureRetryIntervalSeconds")["default"]
        == defaults.on_submission_failure_interval_s
    )
    for role in ("driver", "executor"):
        assert node(schema, f"spec.{role}.cores")["default"] == sparkjobs.Resources().cores
        assert node(schema, f"spec.{role}.memory")["default"] == sparkjobs.Resources().memory
    assert node(schema, "spec.executor.instances")["default"] == 1
    assert node(schema, "spec.checkpoint.mountPath")["default"] == "/checkpoint"
    assert node(schema, "status.state")["enum"] == [s.value for s in State]


def test_sparkjob_schema_refuses_the_conf_the_operator_sets() -> None:
    conf_rules = rules(node(schema_of("SparkJob"), "spec.sparkConf"))
    for key in sparkjobs.OPERATOR_CONF:
        assert f"'{key}'" in conf_rules, key
    assert "spark.kubernetes.driver.label.strom.io/" in conf_rules
    checkpoint = rules(node(schema_of("SparkJob"), "spec.checkpoint"))
    assert "has(self.claimName) != has(self.size)" in checkpoint


def violations(value: Any, schema: Schema, path: str) -> Iterator[str]:
    """What the apiserver's OpenAPI validation refuses: unknown fields and wrong types
    (unknown_fields), a missing required field, a value outside its enum, below its
    minimum, shorter than minLength, not matching its pattern. CEL rules are the
    apiserver's alone (e2e/k8s/test_crds.py)."""
    yield from unknown_fields(value, schema, path)
    yield from _checks(value, schema, path)


def _checks(value: Any, schema: Schema, path: str) -> Iterator[str]:
    if "enum" in schema and value not in schema["enum"]:
        yield f"{path}: {value!r} not in {schema['enum']}"
    if "minimum" in schema and isinstance(value, int) and value < schema["minimum"]:
        yield f"{path}: {value} is below {schema['minimum']}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            yield f"{path}: shorter than {schema['minLength']}"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            yield f"{path}: {value!r} does not match {schema['pattern']}"
    if isinstance(value, dict):
        for required in schema.get("required", []):
            if required not in value:
                yield f"{path}.{required}: Required value"
        for key, child in value.items():
            child_schema = schema.get("properties", {}).get(key, schema.get("additionalProperties"))
            if isinstance(child_schema, dict):
                yield from _checks(child, child_schema, f"{path}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            yield from _checks(item, schema["items"], f"{path}[{index}]")


def test_the_sparkjob_example_is_valid_and_parses_in_the_operator() -> None:
    (example,) = examples("SparkJob")
    assert list(violations(example["spec"], node(schema_of("SparkJob"), "spec"), "spec")) == []
    example["metadata"].update(namespace="default", uid="u")
    parsed = sparkjobs.parse_sparkjob(example)
    assert parsed.cluster == "my-cluster"  # the KafkaCluster example's
    assert parsed.main_application_file == "local:///opt/strom/spark/jobs/clickstream.py"
    assert parsed.restart.type is sparkjobs.RestartType.ON_FAILURE
    assert parsed.checkpoint is not None and parsed.checkpoint.size == "1Gi"


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"image": None}, "spec.image: Required value"),
        ({"mainApplicationFile": None}, "spec.mainApplicationFile: Required value"),
        ({"imagePullPolicy": "Sometimes"}, "spec.imagePullPolicy: 'Sometimes' not in"),
        ({"restartPolicy": {"type": "OnError"}}, "spec.restartPolicy.type: 'OnError' not in"),
        ({"restartPolicy": {"onFailureRetries": -1}}, "spec.restartPolicy.onFailureRetries: -1"),
        ({"executor": {"instances": -2}}, "spec.executor.instances: -2 is below 0"),
        ({"driver": {"cores": 0}}, "spec.driver.cores: 0 is below 1"),
        ({"driver": {"memory": "lots"}}, "spec.driver.memory: 'lots' does not match"),
        ({"cluster": "My_Cluster"}, "spec.cluster: 'My_Cluster' does not match"),
        ({"checkpoint": {"size": "1Gi", "mountPath": "checkpoint"}}, "mountPath"),
        ({"sparkConf": {"spark.executor.cores": 2}}, "is not of type string"),
        ({"driver": {"env": [{"value": "x"}]}}, "spec.driver.env[0].name: Required value"),
        ({"restartPolicy": {"type": "OnFailure", "retries": 3}}, "retries: not in the schema"),
    ],
)
def test_the_sparkjob_schema_refuses_bad_specs(change: dict[str, Any], refusal: str) -> None:
    (example,) = examples("SparkJob")
    spec = {**example["spec"], **change}
    spec = {key: value for key, value in spec.items() if value is not None}
    found = list(violations(spec, node(schema_of("SparkJob"), "spec"), "spec"))
    assert any(refusal in text for text in found), found
