"""A plain StatefulSet of strom-server on a real Kubernetes control plane.

The manifests in manifests/ are applied with kubectl; the real StatefulSet controller makes
the pods and the claims, the real scheduler places them, the test kubelet runs them. The
tests assert what can be observed: pod phase, IP and readiness, claim names and bindings,
the files in a claim's directory, records read back with a real Kafka client, and — last —
that tearing the harness down leaves no process, namespace, veth or mount behind.

The tests run in order and build on each other (one broker set-up per module).
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from k8s_harness import Cluster, wait_for

HERE = Path(__file__).resolve().parent
NAMESPACE = "strom-e2e"
REPLICAS = 3
TOPIC = "k8s-e2e"
RECORDS = 300
READY_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def brokers(cluster: Cluster) -> Cluster:
    """manifests/ applied in NAMESPACE, rolled out (every replica Ready)."""
    cluster.kubectl("create", "namespace", NAMESPACE)
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", str(HERE / "manifests"))
    cluster.kubectl(
        "rollout", "status", "statefulset/strom", "-n", NAMESPACE,
        f"--timeout={READY_TIMEOUT_S}s", timeout=READY_TIMEOUT_S + 30,
    )  # fmt: skip
    return cluster


def pod(cluster: Cluster, name: str) -> dict:  # type: ignore[type-arg]
    return cluster.get("pod", name, "-n", NAMESPACE)


def is_ready(obj: dict) -> bool:  # type: ignore[type-arg]
    conditions = obj.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def claim(cluster: Cluster, name: str) -> dict:  # type: ignore[type-arg]
    return cluster.get("pvc", name, "-n", NAMESPACE)


def produce(address: str, values: list[str]) -> None:
    errors: list[str] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": f"{address}:9092", "acks": "all"})
    for value in values:
        producer.produce(TOPIC, value=value.encode(), on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0, "records still unacknowledged after 60s"
    assert not errors, errors[:5]


def consume(address: str, expected: int, timeout: float = 60) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": f"{address}:9092",
            "group.id": f"k8s-e2e-{time.monotonic_ns()}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    values: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value().decode())
    finally:
        consumer.close()
    return values


def values_for(name: str) -> list[str]:
    return [f"{name}-{i}" for i in range(RECORDS)]


def claim_dir(cluster: Cluster, claim_name: str) -> Path:
    """The host directory behind a claim (the harness's local-path volume)."""
    volume = cluster.get("pv", claim(cluster, claim_name)["spec"]["volumeName"])
    return Path(volume["spec"]["local"]["path"])


def test_statefulset_pods_are_ready_with_own_ip_and_claim(brokers: Cluster) -> None:
    pods = brokers.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=strom")["items"]
    by_name = {p["metadata"]["name"]: p for p in pods}
    assert sorted(by_name) == [f"strom-{i}" for i in range(REPLICAS)]
    ips = set()
    for name, p in by_name.items():
        assert p["status"]["phase"] == "Running", name
        assert is_ready(p), name
        ips.add(p["status"]["podIP"])
        claims = [v["persistentVolumeClaim"]["claimName"] for v in p["spec"]["volumes"]
                  if "persistentVolumeClaim" in v]  # fmt: skip
        assert claims == [f"data-{name}"]
        pvc = claim(brokers, f"data-{name}")
        assert pvc["status"]["phase"] == "Bound"
        assert pvc["spec"]["volumeName"]
    assert len(ips) == REPLICAS
    if brokers.harness is not None:
        subnet = brokers.harness.subnet
        assert all(ipaddress.ip_address(ip) in subnet for ip in ips), (ips, subnet)


def test_produce_and_consume_through_a_pod_address(brokers: Cluster) -> None:
    address = pod(brokers, "strom-0")["status"]["podIP"]
    produce(address, values_for("strom-0"))
    assert consume(address, RECORDS) == values_for("strom-0")
    if brokers.harness is not None:  # the records are in the claim's directory on the node
        partition = claim_dir(brokers, "data-strom-0") / "data" / f"{TOPIC}-0"
        segments = sorted(partition.glob("*.log"))
        assert segments, sorted(p.name for p in partition.parent.iterdir())
        assert sum(s.stat().st_size for s in segments) > 0


def test_deleted_pod_is_recreated_with_same_claim_and_data(brokers: Cluster) -> None:
    old = pod(brokers, "strom-0")
    old_claim = claim(brokers, "data-strom-0")
    brokers.kubectl("delete", "pod", "strom-0", "-n", NAMESPACE, "--timeout=90s", timeout=120)

    def recreated_and_ready() -> dict | None:  # type: ignore[type-arg]
        p = pod(brokers, "strom-0")
        fresh = p["metadata"]["uid"] != old["metadata"]["uid"]
        return p if fresh and is_ready(p) else None

    new = wait_for("strom-0 recreated and Ready", recreated_and_ready, READY_TIMEOUT_S, every=1)
    assert new["status"]["phase"] == "Running"
    new_claim = claim(brokers, "data-strom-0")
    assert new_claim["metadata"]["uid"] == old_claim["metadata"]["uid"]
    assert new_claim["spec"]["volumeName"] == old_claim["spec"]["volumeName"]
    assert consume(new["status"]["podIP"], RECORDS) == values_for("strom-0")


@pytest.fixture
def harness_only(brokers: Cluster) -> Cluster:
    if brokers.harness is None:
        pytest.skip("looks at the node's processes: only on the harness's own node")
    return brokers


def pod_pid(p: dict) -> int:  # type: ignore[type-arg]
    container_id = p["status"]["containerStatuses"][0]["containerID"]
    assert container_id.startswith("strom://"), container_id
    return int(container_id.removeprefix("strom://"))


def test_crashed_container_restarts_in_the_same_pod(harness_only: Cluster) -> None:
    before = pod(harness_only, "strom-1")
    address = before["status"]["podIP"]
    produce(address, values_for("strom-1"))
    os.kill(pod_pid(before), signal.SIGKILL)

    def restarted_and_ready() -> dict | None:  # type: ignore[type-arg]
        p = pod(harness_only, "strom-1")
        restarts = p["status"]["containerStatuses"][0]["restartCount"]
        return p if restarts >= 1 and is_ready(p) else None

    after = wait_for("strom-1 restarted and Ready", restarted_and_ready, 120, every=1)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["status"]["podIP"] == address
    last = after["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert last["exitCode"] == 128 + signal.SIGKILL
    assert consume(address, RECORDS) == values_for("strom-1")


def test_pod_resolves_headless_service_names(harness_only: Cluster) -> None:
    pods = {f"strom-{i}": pod(harness_only, f"strom-{i}") for i in range(REPLICAS)}
    pid = pod_pid(pods["strom-2"])

    def in_pod(*argv: str) -> str:
        done = subprocess.run(
            ["nsenter", "-t", str(pid), "-n", "-m", "-u", "-r", "--", *argv],
            capture_output=True, text=True, timeout=10, check=True,
        )  # fmt: skip
        return done.stdout

    assert in_pod("hostname").strip() == "strom-2"
    for name, p in pods.items():
        for host in (
            f"{name}.strom-headless",
            f"{name}.strom-headless.{NAMESPACE}.svc.cluster.local",
        ):
            assert in_pod("getent", "hosts", host).split()[0] == p["status"]["podIP"], host
    service_ips = in_pod("getent", "ahostsv4", "strom-headless").split()
    assert {p["status"]["podIP"] for p in pods.values()} <= set(service_ips)


CONFIG = """
apiVersion: v1
kind: ConfigMap
metadata: {name: greeting}
data: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: token}
stringData: {token: s3cret}
"""

CONFIG_POD = """
apiVersion: v1
kind: Pod
metadata: {name: config-check}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  containers:
    - name: check
      image: strom/broker:e2e
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c"]
      args:
        - >-
          test "$(cat /etc/strom-config/greeting)" = hello &&
          test "$(cat /etc/strom-secret/token)" = s3cret &&
          test "$GREETING" = hello && test "$TOKEN" = s3cret
      env:
        - name: GREETING
          valueFrom: {configMapKeyRef: {name: greeting, key: greeting}}
        - name: TOKEN
          valueFrom: {secretKeyRef: {name: token, key: token}}
      volumeMounts:
        - {name: config, mountPath: /etc/strom-config, readOnly: true}
        - {name: secret, mountPath: /etc/strom-secret, readOnly: true}
  volumes:
    - name: config
      configMap: {name: greeting}
    - name: secret
      secret: {secretName: token}
"""


def test_configmap_and_secret_reach_the_container(brokers: Cluster) -> None:
    brokers.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=CONFIG_POD)

    # The ConfigMap and Secret do not exist yet: the kubelet says so, and the pod waits.
    def refused() -> dict | None:  # type: ignore[type-arg]
        p = pod(brokers, "config-check")
        return p if "not found" in (p["status"].get("message") or "") else None

    waiting_pod = wait_for("config-check held back for lack of its config", refused, 60)
    assert waiting_pod["status"]["phase"] == "Pending"
    brokers.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=CONFIG)

    def finished() -> dict | None:  # type: ignore[type-arg]
        p = pod(brokers, "config-check")
        return p if p["status"].get("phase") in ("Succeeded", "Failed") else None

    done = wait_for("pod config-check finished", finished, 120, every=1)
    state = done["status"]["containerStatuses"][0]["state"]
    assert done["status"]["phase"] == "Succeeded", state
    assert state["terminated"]["exitCode"] == 0


PROBED_POD = """
apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 5
  initContainers:
    - name: prepare
      image: strom/broker:e2e
      command: ["sh", "-c", "echo prepared > /scratch/marker"]
      volumeMounts: [{name: scratch, mountPath: /scratch}]
  containers:
    - name: main
      image: strom/broker:e2e
      command: ["sleep", "300"]
      readinessProbe:
        exec: {command: ["grep", "-q", "prepared", "/scratch/marker"]}
        periodSeconds: 1
      volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
    - name: scratch
      emptyDir: {}
"""


def test_init_container_fills_empty_dir_for_exec_probe(brokers: Cluster) -> None:
    brokers.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=PROBED_POD)
    ready = wait_for("pod probed Ready", lambda: is_ready(pod(brokers, "probed")), 120, every=1)
    assert ready
    p = pod(brokers, "probed")
    assert p["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert p["status"]["containerStatuses"][0]["ready"] is True
    # `sleep` ignores nothing: SIGTERM ends it well within the 5 s grace period
    brokers.kubectl("delete", "pod", "probed", "-n", NAMESPACE, "--timeout=60s", timeout=90)
    assert not brokers.kubectl("get", "pods", "-n", NAMESPACE, "--field-selector",
                               "metadata.name=probed", "-o", "name").strip()  # fmt: skip


def test_teardown_leaves_nothing_behind(harness_only: Cluster) -> None:
    harness = harness_only.harness
    assert harness is not None
    assert harness.leftovers(), "before teardown the pods and the control plane are there"
    harness.stop()
    assert harness.leftovers() == []
