"""A SparkJob run for real: the operator submits the clickstream pipeline to the real
control plane, Spark's driver and executor pods run in the test kubelet, and the job
counts page views from the operator-made KafkaCluster into its output topic.

The real `strom-operator` makes a 1-broker KafkaCluster; the page views are produced from
the host; the SparkJob runs `spark-on-k8s/jobs/clickstream.py --trigger available-now`
(its mainApplicationFile a local:// path on this host: the test kubelet runs containers
from the host, the project and its .venv standing in for the image). The operator's
submission Job runs strom-spark-submit in cluster mode; the driver pod
(strom-spark-entrypoint driver) creates an executor pod (strom-spark-entrypoint executor).
The test asserts what a user sees: the SparkJob Succeeded after one attempt with its
driver pod named, the executor pod Spark made, and the output topic holding exactly the
per-page window counts a plain Python computation gives (strom_spark.windows).

Executor pods, not Spark in local mode in the driver: the cluster-mode submission fixes
spark.master to the Kubernetes master, and the test kubelet runs executor pods as it runs
any pod (env with fieldRefs, the driver as their owner, the pod IPs reachable from each
other), so the job runs as it would on a real cluster. What differs from one, and what the
test sets for it:

- pods cannot reach the apiserver (it listens on 127.0.0.1): a relay in this process
  listens on the node's bridge address at the apiserver's port (the address and port of
  the `kubernetes` Service's endpoints, in the apiserver's serving certificate) and
  forwards to it. The operator submits with --master k8s://https://<node ip>:<port>
  (STROM_OPERATOR_SPARK_MASTER) and the driver creates executors through
  spark.kubernetes.driver.master (instead of https://kubernetes.default.svc: no kube-proxy
  makes a ClusterIP reachable here);
- there is no cluster DNS: the driver advertises its pod IP (strom-spark-entrypoint);
- the "image" is this host's .venv, where the connector jars are not in Spark's jars/ but
  in spark-on-k8s/lib: strom-spark-submit passes them with --jars, which cluster mode
  uploads to spark.kubernetes.file.upload.path (a host folder: pods see the host's
  files). In the Spark image (spark-on-k8s/Dockerfile) they are in Spark's jars/ and
  nothing is uploaded;
- pod resource requests are small (no cgroups here; the node has this machine's 2 cores);
- the queries' checkpoint is a host folder (--checkpoint-dir), which the driver and the
  executor both see, not the SparkJob's checkpoint PVC: in the test kubelet a PVC mounted
  below /var is covered by the overlay of /var that Spark's emptyDir (/var/data/...) gets,
  so each pod wrote into its own overlay; one directly below / (the example's /checkpoint)
  gives the pod a root of its own, where the driver failed to reach the apiserver
  ("PKIX path building failed"). The operator's tier checks the PVC and its mounts.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import ipaddress
import json
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import spark_runs
from api_relay import TcpRelay
from confluent_kafka.admin import AdminClient, NewTopic
from k8s_harness import Cluster, wait_for
from kafka_observer import bootstrap_servers
from operator_process import start_operator

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "strom-sparkjob-e2e"
CLUSTER_NAME = "spark"
JOB = "clickstream"
INPUT, OUTPUT, PARTITIONS = "page-views", "page-view-counts", 3
WINDOW_MS, WATERMARK_MS = 10_000, 20_000
T0 = 1_700_000_000_000
RUN_TIMEOUT_S = 420
JSON = dict[str, Any]

CLUSTER = f"""
apiVersion: strom.io/v1alpha1
kind: KafkaCluster
metadata: {{name: {CLUSTER_NAME}}}
spec:
  brokers: 1
  controllers: 1
  image: strom/broker:e2e
  storage: {{size: 64Mi, deleteClaim: true}}
  config:
    default.replication.factor: 1
    offsets.topic.replication.factor: 1
    min.insync.replicas: 1
"""


def sparkjob(api_url: str, upload_dir: Path, checkpoint_dir: Path) -> str:
    conf = {
        "spark.kubernetes.driver.master": api_url,
        "spark.kubernetes.file.upload.path": f"file://{upload_dir}",
        "spark.kubernetes.driver.request.cores": "100m",
        "spark.kubernetes.executor.request.cores": "100m",
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        # kept after the run, for the test to see which pods Spark made
        "spark.kubernetes.executor.deleteOnTermination": "false",
    }
    body = {
        "apiVersion": "strom.io/v1alpha1",
        "kind": "SparkJob",
        "metadata": {"name": JOB},
        "spec": {
            "cluster": CLUSTER_NAME,
            "image": "strom/spark:e2e",
            "mainApplicationFile": f"local://{ROOT}/spark-on-k8s/jobs/clickstream.py",
            "arguments": [
                *("--input-topic", INPUT, "--output-topic", OUTPUT),
                *("--checkpoint-dir", str(checkpoint_dir)),
                *("--window", "10 seconds", "--watermark", "20 seconds"),
                *("--trigger", "available-now"),
            ],
            "sparkConf": conf,
            "driver": {"cores": 1, "memory": "768m"},
            "executor": {"instances": 1, "cores": 1, "memory": "768m"},
            "restartPolicy": {"type": "Never"},
        },
    }
    return json.dumps(body)


@dataclasses.dataclass(frozen=True)
class SparkCluster:
    cluster: Cluster
    master: str  # the apiserver as pods reach it (through the relay)


@pytest.fixture(scope="module")
def k8s(cluster: Cluster) -> Iterator[SparkCluster]:
    """crds/ applied, the apiserver relayed to the pods, the operator running for
    NAMESPACE, the KafkaCluster created."""
    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("pyspark is not installed (the `spark` extra)")
    if cluster.harness is None or cluster.harness.api is None:
        pytest.skip("runs the Spark pods from this host's .venv: the harness's own kubelet")
    for crd in ("kafkacluster", "topic", "sparkjob"):
        cluster.kubectl("apply", "-f", str(ROOT / "crds" / f"{crd}.yaml"))
    for crd in ("kafkaclusters", "topics", "sparkjobs"):
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}.strom.io")
    cluster.kubectl("create", "namespace", NAMESPACE)
    harness = cluster.harness
    assert harness.subnet is not None
    node_ip = str(next(harness.subnet.hosts()))
    api_port = urllib.parse.urlsplit(harness.api.server).port
    assert api_port is not None
    relay = TcpRelay(node_ip, api_port, ("127.0.0.1", api_port))
    master = f"https://{ipaddress.ip_address(node_ip)}:{api_port}"
    operator = start_operator(
        cluster,
        NAMESPACE,
        harness.logs,
        reconcile_interval_s=2,
        more_settings={"STROM_OPERATOR_SPARK_MASTER": f"k8s://{master}"},
    )
    try:
        cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=CLUSTER)
        yield SparkCluster(cluster, master)
    finally:
        operator.stop(timeout=20)
        relay.close()


def get(cluster: Cluster, *args: str) -> JSON:
    return cluster.get(*args, "-n", NAMESPACE)


def page_views() -> list[Any]:
    """One phase of skewed traffic, 15 s of event time with a tenth of the views up to 4 s
    late: shorter than the watermark delay, so every view counts however Spark cuts its
    micro-batches."""
    from strom_spark.events import Traffic
    from strom_spark.events import page_views as generate

    traffic = Traffic(40, users=300, pages=8, late_fraction=0.1, lateness_ms=(0, 4_000))
    return [view for view in generate(7, 600, T0, traffic) if view.ts < T0 + 15_000]


def sparkjob_status(cluster: Cluster) -> JSON:
    return dict(get(cluster, "sparkjob", JOB).get("status") or {})


def test_a_sparkjob_counts_page_views_with_executor_pods_and_succeeds(
    k8s: SparkCluster, tmp_path: Path
) -> None:
    from strom_spark.windows import expected_counts

    cluster = k8s.cluster
    started = time.monotonic()
    address = wait_for(
        "the bootstrap Service's endpoints",
        lambda: bootstrap_servers(cluster, NAMESPACE, f"{CLUSTER_NAME}-bootstrap"),
        180,
        1,
    )
    admin = AdminClient({"bootstrap.servers": address})
    topics = [
        NewTopic(INPUT, PARTITIONS, 1),
        NewTopic(OUTPUT, PARTITIONS, 1, config={"cleanup.policy": "compact"}),
    ]
    for future in admin.create_topics(topics, request_timeout=30).values():
        future.result(60)
    views = page_views()
    spark_runs.produce(address, INPUT, [(view.key(), view.to_json()) for view in views])
    expected = expected_counts([views], WINDOW_MS, WATERMARK_MS)
    assert expected.dropped == 0 and len(expected.counts) > 8

    upload, checkpoint = tmp_path / "upload", tmp_path / "checkpoint"
    upload.mkdir()
    job = sparkjob(k8s.master, upload, checkpoint)
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=job)

    def ended() -> JSON | None:
        status = sparkjob_status(cluster)
        return (
            status if status.get("state") in ("Succeeded", "Failed", "SubmissionFailed") else None
        )

    status = wait_for("the SparkJob ended", ended, RUN_TIMEOUT_S, 2)
    assert status["state"] == "Succeeded", status
    assert status["attempts"] == 1
    assert status["driverPod"] == f"{JOB}-driver-1"
    driver = get(cluster, "pod", status["driverPod"])
    assert driver["status"]["phase"] == "Succeeded"
    assert driver["metadata"]["labels"]["spark-role"] == "driver"
    assert status.get("sparkApplicationId") == driver["metadata"]["labels"]["spark-app-selector"]
    executors = get(cluster, "pods", "-l", f"spark-role=executor,strom.io/sparkjob={JOB}")["items"]
    assert len(executors) == 1, [e["metadata"]["name"] for e in executors]
    owners = [o["name"] for o in executors[0]["metadata"]["ownerReferences"]]
    assert owners == [status["driverPod"]]
    assert executors[0]["status"]["containerStatuses"][0]["state"].get("terminated")

    # the queries' offsets and the executor's window state, both in the one checkpoint
    assert list((checkpoint / "topic" / "commits").iterdir())
    assert list((checkpoint / "topic" / "state").iterdir())
    table = spark_runs.read_table(address, OUTPUT, PARTITIONS)
    assert table == dict(window.record() for window in expected.counts)
    print(f"\nSparkJob Succeeded: {len(views)} views, {len(table)} windows, "
          f"{time.monotonic() - started:.0f}s from the cluster's bootstrap")  # fmt: skip
