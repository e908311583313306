"""KafkaCluster and Topic objects read into specs: defaults, and every refusal as a user
reads it in the resource's status."""

from __future__ import annotations

import base64
import copy
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from strom_operator.reconcile import model, spec

UID = "6f1c2b1e-8a44-4e0b-9a51-0d3c0c6a1e2f"


def cluster_body(**fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": model.API_VERSION,
        "kind": "KafkaCluster",
        "metadata": {"name": "my-cluster", "namespace": "kafka", "uid": UID, "generation": 4},
        "spec": fields,
    }


def refusal(body: dict[str, Any]) -> model.SpecError:
    with pytest.raises(model.SpecError) as caught:
        spec.parse_cluster(body)
    return caught.value


def test_an_empty_spec_gets_the_crd_defaults() -> None:
    cluster = spec.parse_cluster(cluster_body())

    assert cluster.names == model.ClusterNames("my-cluster", "kafka")
    assert (cluster.uid, cluster.generation) == (UID, 4)
    assert (cluster.brokers, cluster.controllers) == (3, 3)
    assert cluster.image == "strom/broker:0.1.0"
    assert cluster.storage == model.StorageSpec("10Gi", 10 * 2**30, None, False)
    assert cluster.listeners == (model.ListenerSpec("PLAINTEXT", 9092),)
    assert cluster.metrics == model.MetricsSpec(enabled=True, port=9404)
    assert cluster.config == {}
    assert cluster.resources == {}
    assert cluster.rack_topology_key is None
    assert cluster.template == model.TemplateSpec()


@pytest.mark.parametrize(("brokers", "controllers"), [(1, 1), (2, 2), (3, 3), (7, 3)])
def test_controllers_default_to_at_most_three_brokers(brokers: int, controllers: int) -> None:
    assert spec.parse_cluster(cluster_body(brokers=brokers)).controllers == controllers


def test_every_field_is_read() -> None:
    cluster = spec.parse_cluster(
        cluster_body(
            brokers=5,
            controllers=1,
            image="registry.example/strom:1.2",
            storage={"size": "1.5Gi", "storageClassName": "fast", "deleteClaim": True},
            resources={"requests": {"cpu": "500m", "memory": "1Gi"}},
            config={"num.partitions": 6, "auto.create.topics.enable": False},
            listeners=[{"name": "INTERNAL", "port": 9095}, {"name": "EXTERNAL", "port": 9096}],
            rack={"topologyKey": "topology.kubernetes.io/zone"},
            metrics={"enabled": False, "port": 9500},
            template={
                "pod": {
                    "labels": {"team": "payments"},
                    "annotations": {"note": "x"},
                    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                    "affinity": {"nodeAffinity": {}},
                    "priorityClassName": "high",
                }
            },
        )
    )

    assert (cluster.brokers, cluster.controllers, cluster.image) == (
        5,
        1,
        "registry.example/strom:1.2",
    )
    assert cluster.storage == model.StorageSpec("1.5Gi", 3 * 2**29, "fast", True)
    assert cluster.resources == {"requests": {"cpu": "500m", "memory": "1Gi"}}
    assert cluster.config == {"num.partitions": "6", "auto.create.topics.enable": "false"}
    assert [(x.name, x.port) for x in cluster.listeners] == [("INTERNAL", 9095), ("EXTERNAL", 9096)]
    assert cluster.rack_topology_key == "topology.kubernetes.io/zone"
    assert cluster.metrics == model.MetricsSpec(enabled=False, port=9500)
    assert cluster.template == model.TemplateSpec(
        pod_labels={"team": "payments"},
        pod_annotations={"note": "x"},
        tolerations=({"key": "dedicated", "operator": "Exists"},),
        affinity={"nodeAffinity": {}},
        priority_class_name="high",
    )


def test_config_values_from_yaml_are_rendered_as_the_broker_writes_them() -> None:
    cluster = spec.parse_cluster(
        cluster_body(
            config={
                "log.cleaner.enable": True,
                "unclean.leader.election.enable": "FALSE",
                "log.cleaner.min.cleanable.ratio": 0.25,
                "log.retention.ms": " 86400000 ",
                "log.cleanup.policy": ["compact", "delete"],
            }
        )
    )

    assert cluster.config == {
        "log.cleaner.enable": "true",
        "unclean.leader.election.enable": "false",
        "log.cleaner.min.cleanable.ratio": "0.25",
        "log.retention.ms": "86400000",
        "log.cleanup.policy": "compact,delete",
    }


def test_config_splits_into_dynamic_and_static_by_the_brokers_definitions() -> None:
    cluster = spec.parse_cluster(
        cluster_body(
            config={
                "min.insync.replicas": 2,  # AlterConfigs can change it
                "log.retention.ms": 3600000,  # dynamic too
                "num.partitions": 6,  # read at start only
                "auto.create.topics.enable": False,  # read at start only
            }
        )
    )

    assert spec.dynamic_config(cluster) == {
        "min.insync.replicas": "2",
        "log.retention.ms": "3600000",
    }
    assert spec.static_config(cluster) == {
        "num.partitions": "6",
        "auto.create.topics.enable": "false",
    }


def test_an_unknown_config_key_is_refused_with_the_brokers_suggestion() -> None:
    error = refusal(cluster_body(config={"log.retention.hour": 24}))

    assert error.reason == "UnknownConfig"
    assert str(error) == (
        "spec.config: unknown configuration key 'log.retention.hour'"
        " (did you mean 'log.retention.hours'?)"
    )


def test_a_topic_config_given_as_a_broker_config_names_the_broker_default() -> None:
    error = refusal(cluster_body(config={"retention.ms": 1000}))

    assert error.reason == "UnknownConfig"
    assert "'retention.ms': it is a topic config; the broker default is 'log.retention.ms'" in (
        str(error)
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"min.insync.replicas": 0}, "spec.config: min.insync.replicas: must be at least 1, got 0"),
        (
            {"auto.create.topics.enable": "yes"},
            "spec.config: auto.create.topics.enable: expected true or false, got 'yes'",
        ),
        (
            {"num.partitions": "six"},
            "spec.config: num.partitions: expected an integer (INT), got 'six'",
        ),
        (
            {"compression.type": "brotli"},
            "spec.config: compression.type: must be one of uncompressed, zstd, lz4, snappy,"
            " gzip, producer, got 'brotli'",
        ),
        (
            {"log.retention.ms": {"hours": 1}},
            "spec.config: log.retention.ms needs a string, number or boolean, got {'hours': 1}",
        ),
        (
            {"default.replication.factor": 4},
            "spec.config: default.replication.factor=4 is more than spec.brokers (3)",
        ),
    ],
)
def test_an_invalid_config_value_is_refused_by_the_brokers_validation(
    config: dict[str, Any], message: str
) -> None:
    error = refusal(cluster_body(config=config))

    assert error.reason == "InvalidConfig"
    assert str(error) == message


@pytest.mark.parametrize("key", sorted(spec.OPERATOR_KEYS))
def test_keys_the_operator_sets_are_refused(key: str) -> None:
    error = refusal(cluster_body(config={key: "1"}))

    assert error.reason == "OperatorOwnedConfig"
    assert str(error).startswith(f"spec.config: {key} is set by the operator (from ")
    assert str(error).endswith("); remove it from spec.config")


def test_the_refusal_of_an_operator_key_says_where_to_set_it() -> None:
    assert str(refusal(cluster_body(config={"listeners": "PLAINTEXT://:9092"}))) == (
        "spec.config: listeners is set by the operator (from spec.listeners);"
        " remove it from spec.config"
    )


@pytest.mark.parametrize("key", ["zookeeper.connect", "port", "inter.broker.protocol.version"])
def test_zookeeper_era_keys_are_refused(key: str) -> None:
    error = refusal(cluster_body(config={key: "x"}))

    assert error.reason == "UnknownConfig"
    assert str(error).startswith(
        f"spec.config: {key} is one of the keys Kafka 4 removed (ZooKeeper era): {key} -> "
    )


@pytest.mark.parametrize(
    ("storage", "message"),
    [
        ({"size": "ten gigs"}, "spec.storage.size: 'ten gigs' is not a Kubernetes quantity"),
        ({"size": "10GB"}, "spec.storage.size: '10GB' is not a Kubernetes quantity"),
        ({"size": "0"}, "spec.storage.size '0' is not positive"),
    ],
)
def test_a_storage_size_that_is_not_a_quantity_is_refused(
    storage: dict[str, Any], message: str
) -> None:
    error = refusal(cluster_body(storage=storage))

    assert error.reason == "InvalidStorageSize"
    assert str(error).startswith(message)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"brokers": 0}, "spec.brokers must be at least 1, got 0"),
        ({"brokers": "3"}, "spec.brokers must be an integer, got '3'"),
        (
            {"brokers": 2, "controllers": 3},
            "spec.controllers (3) is more than spec.brokers (2): the controllers are the first"
            " brokers' pods",
        ),
        ({"listeners": []}, "spec.listeners must be a non-empty list"),
        (
            {"listeners": [{"name": "plain", "port": 9092}]},
            "spec.listeners[0].name 'plain': up to 15 upper-case letters",
        ),
        (
            {"listeners": [{"name": "CONTROLLER", "port": 9094}]},
            "spec.listeners[0].name 'CONTROLLER' is reserved",
        ),
        (
            {"listeners": [{"name": "PLAIN", "port": 9093}]},
            "spec.listeners[0].port 9093 is the controller quorum's port",
        ),
        (
            {"listeners": [{"name": "A", "port": 9092}, {"name": "B", "port": 9092}]},
            "spec.listeners[1]: B:9092 repeats the name or port of A:9092",
        ),
        (
            {"listeners": [{"name": "A", "port": 9404}]},
            "spec.listeners: A uses port 9404, the port of spec.metrics",
        ),
        ({"rack": {}}, "spec.rack.topologyKey is required (a non-empty string)"),
        (
            {"resources": {"limits": {"memory": "2 GB"}}},
            "spec.resources.limits.memory: '2 GB' is not a Kubernetes quantity",
        ),
    ],
)
def test_an_impossible_spec_is_refused(fields: dict[str, Any], message: str) -> None:
    error = refusal(cluster_body(**fields))

    assert error.reason == "InvalidSpec"
    assert str(error).startswith(message)


def test_a_cluster_without_a_uid_is_refused() -> None:
    body = cluster_body()
    del body["metadata"]["uid"]

    assert str(refusal(body)) == "metadata.uid is required (a non-empty string)"


# --- cluster ids ------------------------------------------------------------------------


def test_the_cluster_id_is_the_uid_in_kafkas_uuid_text() -> None:
    cluster_id = spec.cluster_id(UID)

    assert len(cluster_id) == 22
    assert base64.urlsafe_b64decode(cluster_id + "==") == uuid.UUID(UID).bytes
    assert spec.cluster_id(UID) == cluster_id  # no state: the same object, the same id
    assert spec.cluster_id(str(uuid.UUID(int=1))) != cluster_id


def test_a_uid_that_is_not_a_uuid_still_gives_a_stable_cluster_id() -> None:
    assert spec.cluster_id("kmock-uid-1") == spec.cluster_id("kmock-uid-1")
    assert len(spec.cluster_id("kmock-uid-1")) == 22
    assert spec.cluster_id("kmock-uid-1") != spec.cluster_id("kmock-uid-2")


def test_a_cluster_id_never_starts_with_a_dash() -> None:
    # 0xf8 as the first byte encodes as '-' in URL-safe base64
    uid = str(uuid.UUID(bytes=b"\xf8" + b"\x01" * 15))

    assert spec.cluster_id(uid).startswith("_")
    assert len(spec.cluster_id(uid)) == 22


# --- quantities -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("10Gi", 10 * 2**30),
        ("1.5Gi", 3 * 2**29),
        ("512Mi", 512 * 2**20),
        ("1Ki", 1024),
        ("2Ti", 2 * 2**40),
        ("1Pi", 2**50),
        ("1Ei", 2**60),
        ("500M", 500_000_000),
        ("1k", 1000),
        ("1G", 10**9),
        ("3T", 3 * 10**12),
        ("1P", 10**15),
        ("1E", 10**18),
        ("1e9", 10**9),
        ("2E3", 2000),
        ("1000", 1000),
        ("0.5", 1),  # rounded up, as Quantity.Value() does
        ("1500m", 2),
        ("2500000u", 3),
        ("1000000000n", 1),
        ("1000000001n", 2),
        (".5Ki", 512),
    ],
)
def test_parse_quantity(text: str, value: int) -> None:
    assert spec.parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "10 Gi", "10GB", "1.2.3", "10gi", "1e", "--1"])
def test_parse_quantity_refuses_what_kubernetes_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        spec.parse_quantity(text)


@pytest.mark.parametrize("text", ["8Ei", "1e999999"])
def test_parse_quantity_refuses_more_than_64_bits(text: str) -> None:
    with pytest.raises(ValueError, match="is too large for a Kubernetes quantity"):
        spec.parse_quantity(text)


# --- topics -----------------------------------------------------------------------------


def topic_body(name: str = "orders", **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": model.API_VERSION,
        "kind": "Topic",
        "metadata": {"name": name, "namespace": "kafka", "generation": 2},
        "spec": {"cluster": "my-cluster", **fields},
    }


def test_a_topic_name_defaults_to_the_objects_name() -> None:
    topic = spec.parse_topic(topic_body())

    assert topic == model.TopicSpec(
        cluster="my-cluster",
        namespace="kafka",
        topic_name="orders",
        partitions=None,
        replication_factor=None,
        config={},
        generation=2,
    )


def test_a_topic_reads_every_field_and_renders_its_config() -> None:
    topic = spec.parse_topic(
        topic_body(
            topicName="Orders_v2",
            partitions=6,
            replicationFactor=3,
            config={"retention.ms": 86400000, "cleanup.policy": ["compact", "delete"]},
        )
    )

    assert (topic.topic_name, topic.partitions, topic.replication_factor) == ("Orders_v2", 6, 3)
    assert topic.config == {"retention.ms": "86400000", "cleanup.policy": "compact,delete"}


@pytest.mark.parametrize(
    ("fields", "reason", "message"),
    [
        (
            {"config": {"retention.hours": 1}},
            "UnknownConfig",
            "spec.config: unknown topic configuration 'retention.hours' (did you mean"
            " 'retention.ms'?)",
        ),
        (
            {"config": {"log.retention.ms": 1}},
            "UnknownConfig",
            "spec.config: unknown topic configuration 'log.retention.ms': it is a broker config;"
            " the topic config is 'retention.ms'",
        ),
        (
            {"config": {"min.insync.replicas": 0}},
            "InvalidConfig",
            "spec.config: min.insync.replicas: must be at least 1, got 0",
        ),
        (
            {"config": {"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5}},
            "InvalidConfig",
            "spec.config: min.compaction.lag.ms: 10 is larger than max.compaction.lag.ms 5",
        ),
        ({"partitions": 0}, "InvalidSpec", "spec.partitions must be at least 1, got 0"),
        (
            {"replicationFactor": 40000},
            "InvalidSpec",
            "spec.replicationFactor must be 1 to 32767, got 40000",
        ),
        (
            {"topicName": "a/b"},
            "InvalidTopicName",
            "spec.topicName 'a/b': a Kafka topic name is 1 to 249 letters, digits, '.', '_' or"
            " '-', and not '.' or '..'",
        ),
        ({"topicName": ".."}, "InvalidTopicName", "spec.topicName '..'"),
        ({"cluster": None}, "InvalidSpec", "spec.cluster is required (a non-empty string)"),
    ],
)
def test_a_bad_topic_is_refused(fields: dict[str, Any], reason: str, message: str) -> None:
    with pytest.raises(model.SpecError) as caught:
        spec.parse_topic(topic_body(**fields))

    assert caught.value.reason == reason
    assert str(caught.value).startswith(message)


# --- the CRDs and their examples ------------------------------------------------------

CRDS = Path(__file__).resolve().parents[2] / "crds"


def schema_of(crd_file: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS / crd_file).read_text())
    (version,) = crd["spec"]["versions"]
    spec_schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec_schema


def defaulted(schema: dict[str, Any], value: Any) -> Any:
    """What the API server stores: `value` with the schema's defaults filled in."""
    if value is None and "default" in schema:
        value = copy.deepcopy(schema["default"])
    if isinstance(value, dict) and "properties" in schema:
        for key, child in schema["properties"].items():
            filled = defaulted(child, value.get(key))
            if filled is not None:
                value[key] = filled
    if isinstance(value, list) and "items" in schema:
        value = [defaulted(schema["items"], item) for item in value]
    return value


def test_the_operators_defaults_are_the_crds() -> None:
    """An object the API server defaulted and one it did not mean the same cluster."""
    stored = defaulted(schema_of("kafkacluster.yaml"), {})

    assert spec.parse_cluster(cluster_body(**stored)) == spec.parse_cluster(cluster_body())


@pytest.mark.parametrize("example", sorted(p.name for p in (CRDS / "examples").glob("*.yaml")))
def test_the_examples_pass_the_operators_checks(example: str) -> None:
    """The schema cannot know the broker's config keys: the operator's reading of every
    example (as written, and as the API server stores it) must accept it."""
    body = yaml.safe_load((CRDS / "examples" / example).read_text())
    body["metadata"].update(namespace="kafka", uid=UID)
    if body["kind"] == "KafkaCluster":
        stored = {**body, "spec": defaulted(schema_of("kafkacluster.yaml"), body["spec"])}
        assert spec.parse_cluster(stored) == spec.parse_cluster(body)
    else:
        stored = {**body, "spec": defaulted(schema_of("topic.yaml"), body["spec"])}
        assert spec.parse_topic(stored) == spec.parse_topic(body)
