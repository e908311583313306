"""The Strom operator on a real Kubernetes control plane: a KafkaCluster's life, end to end.

crds/ is applied to the real kube-apiserver (which checks the schemas, CEL rules included),
the real `strom-operator` runs on the host with the harness's kubeconfig, and the broker
pods it asks for run in the test kubelet. The tests run in order on one cluster (the
module's warm time is what the whole tier pays) and assert what a user can observe: pods
(phase, uid, start), PVCs and the files in their directories, the brokers' Metadata
(leaders, replicas, ISR) and DescribeConfigs, the records a real client reads back, the
KafkaCluster's status conditions. Never a log line; every wait has a deadline.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from k8s_harness import Cluster, wait_for
from kafka_observer import (
    PartitionView,
    RunningProducer,
    bootstrap_servers,
    broker_config,
    leader_counts,
    metadata,
    read_all,
    replica_counts,
)
from operator_process import start_operator

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "strom-operator-e2e"
NAME = "e2e"
STATEFULSET = f"{NAME}-broker"
BOOTSTRAP = f"{NAME}-bootstrap"
SELECTOR = f"app.kubernetes.io/instance={NAME},app.kubernetes.io/component=broker"
TOPICS = {"orders": 6, "events": 3}  # name: partitions (RF 3 both)
PARTITIONS = sum(TOPICS.values())
ALL = range(3)  # the brokers' ids
READY_TIMEOUT_S = 180
# The operator's timer: a short interval so each observation is followed by an action
# within seconds (the default is 30 s).
RECONCILE_INTERVAL_S = 2
STATIC_KEY, STATIC_VALUE = "queued.max.requests", "600"  # read-only: needs a restart
DYNAMIC_KEY, DYNAMIC_VALUE = "log.retention.ms", "86400000"  # applied with AlterConfigs

CLUSTER = f"""
apiVersion: strom.io/v1alpha1
kind: KafkaCluster
metadata: {{name: {NAME}}}
spec:
  brokers: 3
  image: strom/broker:e2e
  storage: {{size: 64Mi, deleteClaim: false}}
  config:
    min.insync.replicas: 2
    default.replication.factor: 3
    offsets.topic.replication.factor: 3
"""

JSON = dict[str, Any]


def topic_resource(name: str, partitions: int) -> str:
    return f"""
apiVersion: strom.io/v1alpha1
kind: Topic
metadata: {{name: {name}}}
spec: {{cluster: {NAME}, partitions: {partitions}, replicationFactor: 3}}
"""


@pytest.fixture(scope="module")
def k8s(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """crds/ applied, the operator running for NAMESPACE, the KafkaCluster created."""
    if importlib.util.find_spec("strom_operator.main") is None:  # before the operator lands
        pytest.skip("strom_operator.main (the strom-operator entry point) is not there")
    cluster.kubectl("apply", "-f", str(ROOT / "crds" / "kafkacluster.yaml"))
    cluster.kubectl("apply", "-f", str(ROOT / "crds" / "topic.yaml"))
    for crd in ("kafkaclusters.strom.io", "topics.strom.io"):
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    cluster.kubectl("create", "namespace", NAMESPACE)
    log_dir = cluster.harness.logs if cluster.harness else tmp_path_factory.mktemp("operator")
    operator = start_operator(cluster, NAMESPACE, log_dir, RECONCILE_INTERVAL_S)
    try:
        cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=CLUSTER)
        yield cluster
    finally:
        operator.stop(timeout=20)


def kubectl(cluster: Cluster, *args: str, input: str | None = None) -> str:
    return cluster.kubectl(*args, "-n", NAMESPACE, input=input)


def get(cluster: Cluster, *args: str) -> JSON:
    return cluster.get(*args, "-n", NAMESPACE)


def pods(cluster: Cluster) -> dict[str, JSON]:
    items = get(cluster, "pods", "-l", SELECTOR)["items"]
    return {p["metadata"]["name"]: p for p in items}


def is_ready(obj: JSON) -> bool:
    conditions = obj.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def condition(cluster: Cluster, kind: str) -> str | None:
    """The KafkaCluster's status condition `kind` ("True"/"False"), None if not there."""
    status = get(cluster, "kafkacluster", NAME).get("status") or {}
    for c in status.get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def ready_pods(cluster: Cluster, count: int) -> dict[str, JSON] | None:
    current = pods(cluster)
    expected = {f"{STATEFULSET}-{i}" for i in range(count)}
    if set(current) == expected and all(is_ready(p) for p in current.values()):
        return current
    return None


def wait_ready(cluster: Cluster, brokers: int) -> dict[str, JSON]:
    """`brokers` Ready pods and the KafkaCluster's Ready condition True."""
    found = wait_for(
        f"{brokers} Ready broker pods", lambda: ready_pods(cluster, brokers), READY_TIMEOUT_S, 1
    )
    wait_for("KafkaCluster Ready", lambda: condition(cluster, "Ready") == "True", 120, 1)
    return found


def bootstrap(cluster: Cluster) -> str:
    return wait_for(
        "bootstrap Service endpoints",
        lambda: bootstrap_servers(cluster, NAMESPACE, BOOTSTRAP),
        60,
        1,
    )


def claim_dir(cluster: Cluster, claim_name: str) -> Path:
    """The host directory behind a claim (the harness's local-path volume)."""
    volume = cluster.get("pv", get(cluster, "pvc", claim_name)["spec"]["volumeName"])
    return Path(volume["spec"]["local"]["path"])


def balanced(views: dict[str, list[PartitionView]], among: Collection[int]) -> bool:
    """Every partition is led by one of `among`, each of them leading about its share
    (within one of it)."""
    counts = leader_counts(views)
    share = PARTITIONS / len(among)
    return set(counts) <= set(among) and all(abs(counts.get(b, 0) - share) <= 1 for b in among)


def test_cluster_becomes_ready_with_its_objects(k8s: Cluster) -> None:
    ready = wait_ready(k8s, 3)
    for name, p in ready.items():
        assert p["status"]["phase"] == "Running", name
        claims = [v["persistentVolumeClaim"]["claimName"] for v in p["spec"]["volumes"]
                  if "persistentVolumeClaim" in v]  # fmt: skip
        assert claims == [f"data-{name}"]
        assert get(k8s, "pvc", f"data-{name}")["status"]["phase"] == "Bound"
    sts = get(k8s, "statefulset", STATEFULSET)
    assert sts["spec"]["updateStrategy"]["type"] == "OnDelete"
    for kind, name in (("service", f"{NAME}-brokers"), ("service", BOOTSTRAP),
                       ("configmap", f"{NAME}-config"), ("pdb", STATEFULSET)):  # fmt: skip
        owners = get(k8s, kind, name)["metadata"]["ownerReferences"]
        assert [o["kind"] for o in owners] == ["KafkaCluster"], (kind, name)
    status = get(k8s, "kafkacluster", NAME)["status"]
    assert status["replicas"] == 3


def test_topics_reach_kafka_and_records_go_through_the_bootstrap_service(k8s: Cluster) -> None:
    for name, partitions in TOPICS.items():
        kubectl(k8s, "apply", "-f", "-", input=topic_resource(name, partitions))
    address = bootstrap(k8s)

    def created() -> dict[str, list[PartitionView]] | None:
        views = metadata(address, list(TOPICS))
        full = all(len(p.replicas) == 3 and len(p.isr) == 3 for ps in views.values() for p in ps)
        return views if full else None

    views = wait_for("topics in Metadata, 3 in-sync replicas each", created, 60, 1)
    assert {name: len(ps) for name, ps in views.items()} == TOPICS
    for name in TOPICS:
        topic = get(k8s, "topic", name)
        wait_for(f"Topic {name} Ready", lambda n=name: topic_ready(k8s, n), 60, 1)
        assert topic["metadata"]["name"] == name
    with RunningProducer(address, "events", "first") as producer:
        assert producer.acknowledged_after(200, 30)
    assert not producer.failed, producer.failed[:5]
    assert producer.acknowledged <= set(read_all(address, "events", TOPICS["events"]))


def topic_ready(cluster: Cluster, name: str) -> bool:
    status = get(cluster, "topic", name).get("status") or {}
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
    )


def test_lost_leader_pod_comes_back_with_its_data_and_leadership_rebalances(
    k8s: Cluster,
) -> None:
    address = bootstrap(k8s)
    views = metadata(address, list(TOPICS))
    victim = views["events"][0].leader
    pod_name = f"{STATEFULSET}-{victim}"
    old = pods(k8s)[pod_name]
    partition_dir = None
    if k8s.harness is not None:  # a file the broker wrote on its volume before the loss
        partition_dir = claim_dir(k8s, f"data-{pod_name}") / "data" / "events-0"
        segment = min(partition_dir.glob("*.log"))
        written = segment.read_bytes()
        assert written
    # The node is cordoned first, so that the StatefulSet's new pod stays Pending (a lost
    # node, not a quick restart) long enough to see the operator balance the survivors.
    node = old["spec"]["nodeName"]
    survivors = sorted({0, 1, 2} - {victim})
    with RunningProducer(address, "events", "loss") as producer:
        assert producer.acknowledged_after(50, 30)
        k8s.kubectl("cordon", node)
        try:
            kubectl(k8s, "delete", "pod", pod_name, "--wait=false")
            wait_for("Degraded while the pod is gone",
                     lambda: condition(k8s, "Degraded") == "True", 60, 0.5)  # fmt: skip
            wait_for(f"leaders balanced over the survivors {survivors}",
                     lambda: balanced(metadata(address, list(TOPICS)), survivors),
                     60, 0.5)  # fmt: skip
            during = len(producer.acknowledged)
            assert producer.acknowledged_after(during + 50, 30), "the producer stalled"
            so_far = producer.acknowledged_so_far()  # a consumer reads them from the survivors
            assert so_far <= set(read_all(bootstrap(k8s), "events", TOPICS["events"]))
            assert pod_name not in pods(k8s) or not is_ready(pods(k8s)[pod_name])
        finally:
            k8s.kubectl("uncordon", node)

        def back() -> JSON | None:
            p = pods(k8s).get(pod_name)
            return (
                p if p and p["metadata"]["uid"] != old["metadata"]["uid"] and is_ready(p) else None
            )

        new = wait_for(f"{pod_name} back and Ready", back, READY_TIMEOUT_S, 1)
        wait_for("Ready again", lambda: condition(k8s, "Ready") == "True", 120, 1)
        assert condition(k8s, "Degraded") != "True"
        views = wait_for("leadership balanced again",
                         lambda: (v := metadata(address, list(TOPICS))) and balanced(v, ALL) and v,
                         120, 1)  # fmt: skip
    assert not producer.failed, producer.failed[:5]
    claims = [v["persistentVolumeClaim"]["claimName"] for v in new["spec"]["volumes"]
              if "persistentVolumeClaim" in v]  # fmt: skip
    assert claims == [f"data-{pod_name}"]
    if partition_dir is not None:
        assert segment.read_bytes()[: len(written)] == written
    records = read_all(bootstrap(k8s), "events", TOPICS["events"])  # the pod's IP is new
    assert producer.acknowledged <= set(records)
    assert all(len(p.isr) == 3 for ps in views.values() for p in ps)


def test_scale_up_moves_partitions_to_the_new_broker_and_back_down(k8s: Cluster) -> None:
    address = bootstrap(k8s)
    with RunningProducer(address, "orders", "scale") as producer:
        kubectl(k8s, "scale", f"kafkacluster/{NAME}", "--replicas=4")
        wait_for("4 Ready broker pods", lambda: ready_pods(k8s, 4), READY_TIMEOUT_S, 1)
        assert get(k8s, "pvc", f"data-{STATEFULSET}-3")["status"]["phase"] == "Bound"

        # The operator spreads replicas 10 partitions a step until every broker holds its
        # share (replica counts over all topics, __consumer_offsets included, within one)
        def spread() -> Counter[int] | None:
            counts = replica_counts(metadata(address))
            share = sum(counts.values()) / 4
            return counts if all(abs(counts[b] - share) <= 1 for b in range(4)) else None

        moved = wait_for("replicas spread over the 4 brokers", spread, 180, 1)
        assert moved[3] > 0
        # and each of the user's topics has replicas on the new broker, not only the
        # 50 partitions of __consumer_offsets
        views = metadata(address)
        for topic in TOPICS:
            assert any(3 in p.replicas for p in views[topic]), (topic, views[topic])
        wait_for("Ready with 4 brokers", lambda: condition(k8s, "Ready") == "True", 180, 1)

        kubectl(k8s, "scale", f"kafkacluster/{NAME}", "--replicas=3")
        last_on_3 = {"replicas": -1}

        def shrunk() -> bool:
            # Metadata first, the StatefulSet after: if the StatefulSet is at 3, broker 3
            # held nothing when last looked at
            last_on_3["replicas"] = replica_counts(metadata(address)).get(3, 0)
            return bool(get(k8s, "statefulset", STATEFULSET)["spec"]["replicas"] == 3)

        wait_for("StatefulSet back at 3", shrunk, 240, 0.5)
        assert last_on_3["replicas"] == 0, "the StatefulSet shrank before broker 3 was drained"
        wait_ready(k8s, 3)
    assert not producer.failed, producer.failed[:5]
    address = bootstrap(k8s)
    assert set(replica_counts(metadata(address))) == {0, 1, 2}
    assert producer.acknowledged <= set(read_all(address, "orders", TOPICS["orders"]))


def test_static_config_rolls_pods_one_at_a_time_controller_last(k8s: Cluster) -> None:
    address = bootstrap(k8s)
    before = {name: p["metadata"]["uid"] for name, p in wait_ready(k8s, 3).items()}
    controller = get(k8s, "kafkacluster", NAME)["status"]["controllerId"]
    restarted: list[str] = []  # pod names in the order their new uid appeared
    smallest_isr = {"size": 3}
    most_down = {"pods": 0}
    patch = f'{{"spec": {{"config": {{"{STATIC_KEY}": {STATIC_VALUE}}}}}}}'
    with RunningProducer(address, "orders", "roll") as producer:
        assert producer.acknowledged_after(50, 30)
        kubectl(k8s, "patch", "kafkacluster", NAME, "--type=merge", "-p", patch)

        def rolled() -> bool:
            try:  # the pods' IPs change as they restart: the Service's current endpoints
                views = metadata(bootstrap(k8s), list(TOPICS), timeout=2)
                isr = min(len(p.isr) for ps in views.values() for p in ps)
                smallest_isr["size"] = min(smallest_isr["size"], isr)
            except (KafkaException, KeyError):
                pass  # the broker asked was the one restarting: the next poll asks another
            current = pods(k8s)
            down = sum(1 for p in current.values() if not is_ready(p)) + 3 - len(current)
            most_down["pods"] = max(most_down["pods"], down)
            for name, p in current.items():
                if p["metadata"]["uid"] != before[name] and name not in restarted:
                    restarted.append(name)
            return len(restarted) == 3 and all(is_ready(p) for p in current.values())

        wait_for("every pod restarted once", rolled, 600, 0.5)
        wait_for("Ready after the roll", lambda: condition(k8s, "Ready") == "True", 120, 1)
    assert not producer.failed, producer.failed[:5]
    assert restarted[-1] == f"{STATEFULSET}-{controller}", (restarted, controller)
    assert most_down["pods"] <= 1, "two broker pods were down at once"
    assert smallest_isr["size"] >= 2, "a partition fell below min.insync.replicas"
    address = bootstrap(k8s)  # every pod has a new IP now
    assert producer.acknowledged <= set(read_all(address, "orders", TOPICS["orders"]))
    for broker in range(3):
        assert broker_config(address, broker, STATIC_KEY) == STATIC_VALUE


def test_dynamic_config_applies_without_a_restart(k8s: Cluster) -> None:
    address = bootstrap(k8s)
    before = {name: p["metadata"]["uid"] for name, p in wait_ready(k8s, 3).items()}
    patch = f'{{"spec": {{"config": {{"{DYNAMIC_KEY}": {DYNAMIC_VALUE}}}}}}}'
    kubectl(k8s, "patch", "kafkacluster", NAME, "--type=merge", "-p", patch)
    for broker in range(3):
        wait_for(f"broker {broker} reports {DYNAMIC_KEY}={DYNAMIC_VALUE}",
                 lambda b=broker: broker_config(address, b, DYNAMIC_KEY) == DYNAMIC_VALUE,
                 60, 1)  # fmt: skip
    wait_for("Ready", lambda: condition(k8s, "Ready") == "True", 60, 1)
    after = {name: p["metadata"]["uid"] for name, p in pods(k8s).items()}
    assert after == before
    assert all(
        s["restartCount"] == 0 for p in pods(k8s).values() for s in p["status"]["containerStatuses"]
    )


def test_deleting_the_cluster_cascades_but_keeps_the_claims(k8s: Cluster) -> None:
    claims = {c["metadata"]["name"] for c in get(k8s, "pvc")["items"]}
    assert {f"data-{STATEFULSET}-{i}" for i in range(3)} <= claims
    kubectl(k8s, "delete", "kafkacluster", NAME, "--wait=false")
    wait_for(
        "the KafkaCluster gone (its finalizer released)",
        lambda: not kubectl(k8s, "get", "kafkaclusters", "-o", "name").strip(),
        30,
        1,
    )

    def all_gone() -> bool:
        for kind, name in (("statefulset", STATEFULSET), ("service", f"{NAME}-brokers"),
                           ("service", BOOTSTRAP), ("configmap", f"{NAME}-config"),
                           ("pdb", STATEFULSET)):  # fmt: skip
            listed = kubectl(k8s, "get", kind, "--field-selector", f"metadata.name={name}",
                             "-o", "name")  # fmt: skip
            if listed.strip():
                return False
        return not pods(k8s)

    wait_for("the owned objects and the pods deleted", all_gone, 180, 1)
    kept = {c["metadata"]["name"] for c in get(k8s, "pvc")["items"]}
    assert claims <= kept, kept


def test_teardown_leaves_nothing_behind(k8s: Cluster) -> None:
    """The operator process, the pods and the control plane all go with the harness."""
    harness = k8s.harness
    if harness is None:
        pytest.skip("looks at the node's processes: only on the harness's own node")
    assert any(c.name == "strom-operator" and c.proc for c in harness.components)
    harness.stop()
    assert harness.leftovers() == []
