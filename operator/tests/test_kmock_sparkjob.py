"""SparkJobs reconciled by the real operator on kmock: the RBAC, pod templates, checkpoint
PVC and submission Job it makes; the status from the driver pod's phases; retries per
restartPolicy; a spec change resubmitting; deletion removing the driver pods.

kmock runs no Job controller, no spark-submit and no kubelet: the tests play their part,
creating the driver pod spark-submit would create (with Spark's labels) and setting its
phase as the kubelet would. No broker is needed: a SparkJob only names its cluster.
"""

from __future__ import annotations

import uuid
from typing import Any

import kmock
import pytest
import strom_process
from operator_tier import NAMESPACE, cluster_body, events_posted, eventually
from strom_operator import k8s, settings
from strom_operator.reconcile import model

VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}
SPARK_RESOURCES = {
    "strom.io/v1alpha1/sparkjobs": kmock.ResourceInfo(
        kind="SparkJob", namespaced=True, verbs=VERBS, subresources={"status"}
    ),
    "batch/v1/jobs": kmock.ResourceInfo(kind="Job", namespaced=True, verbs=VERBS),
    "v1/serviceaccounts": kmock.ResourceInfo(kind="ServiceAccount", namespaced=True, verbs=VERBS),
    "rbac.authorization.k8s.io/v1/roles": kmock.ResourceInfo(
        kind="Role", namespaced=True, verbs=VERBS
    ),
    "rbac.authorization.k8s.io/v1/rolebindings": kmock.ResourceInfo(
        kind="RoleBinding", namespaced=True, verbs=VERBS
    ),
}


@pytest.fixture
def bootstrap_servers() -> str:
    return f"127.0.0.1:{strom_process.free_port()}"  # the KafkaCluster's brokers are not needed


@pytest.fixture
async def kube(kube: k8s.Client, kmock: kmock.KubernetesEmulator) -> k8s.Client:
    """conftest's client, with the kinds a SparkJob involves known to kmock before kopf
    starts (it watches only what discovery lists)."""
    for name, info in SPARK_RESOURCES.items():
        kmock.resources[name] = info
    return kube


def sparkjob_body(name: str, **spec: Any) -> model.JsonObject:
    return {
        "apiVersion": model.API_VERSION,
        "kind": "SparkJob",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": str(uuid.uuid4()),
            "resourceVersion": "1",
            "generation": 1,
        },
        "spec": {
            "cluster": "sc",
            "image": "strom/spark:test",
            "mainApplicationFile": "local:///opt/strom/spark/jobs/clickstream.py",
            **spec,
        },
    }


def driver_pod(job: str, attempt: int, phase: str, **status: Any) -> model.JsonObject:
    """The driver pod as spark-submit makes it (Spark's labels and ours) and the kubelet
    reports it."""
    labels = {
        "strom.io/sparkjob": job,
        "strom.io/attempt": str(attempt),
        "spark-role": "driver",
        "spark-app-selector": f"spark-{job}-{attempt}",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{job}-driver-{attempt}", "namespace": NAMESPACE, "labels": labels},
        "spec": {"containers": [{"name": "spark-kubernetes-driver", "image": "strom/spark:test"}]},
        "status": {"phase": phase, **status},
    }


def crashed(exit_code: int, message: str) -> dict[str, Any]:
    terminated = {"reason": "Error", "exitCode": exit_code, "message": message}
    return {
        "containerStatuses": [
            {"name": "spark-kubernetes-driver", "state": {"terminated": terminated}}
        ]
    }


async def set_phase(kube: k8s.Client, name: str, phase: str, **status: Any) -> None:
    await kube.merge_patch("Pod", NAMESPACE, name, {"status": {"phase": phase, **status}})


async def wait_status(kube: k8s.Client, name: str, what: str, **expected: Any) -> model.JsonObject:
    """Wait until the SparkJob's status has every `expected` field; return the status."""

    async def probe() -> model.JsonObject | None:
        found = (await kube.get("SparkJob", NAMESPACE, name)).get("status") or {}
        return found if all(found.get(k) == v for k, v in expected.items()) else None

    return await eventually(probe, f"SparkJob {name}: {what} {expected}")


async def exists(kube: k8s.Client, kind: str, name: str) -> model.JsonObject | None:
    return await kube.get_or_none(kind, NAMESPACE, name)


def conf_of(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


async def test_a_sparkjob_gets_its_objects_and_follows_its_driver_to_success(
    operator: settings.OperatorSettings, kube: k8s.Client, kmock: kmock.KubernetesEmulator
) -> None:
    await kube.create(cluster_body("sc"))
    body = sparkjob_body("clicks", checkpoint={"size": "1Gi"})
    await kube.create(body)

    submit = await eventually(lambda: exists(kube, "Job", "clicks-submit-1"), "the first Job")
    status = await wait_status(kube, "clicks", "submitted", state="Pending", attempts=1)
    assert status["submissionJob"] == "clicks-submit-1"
    owned = {
        "ServiceAccount": "clicks-spark",
        "Role": "clicks-spark",
        "RoleBinding": "clicks-spark",
        "ConfigMap": "clicks-pod-templates",
        "PersistentVolumeClaim": "clicks-checkpoint",
    }
    for kind, name in owned.items():
        obj = await kube.get(kind, NAMESPACE, name)
        [owner] = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("SparkJob", body["metadata"]["uid"]), kind
    [owner] = submit["metadata"]["ownerReferences"]
    assert owner["uid"] == body["metadata"]["uid"]
    role = await kube.get("Role", NAMESPACE, "clicks-spark")
    assert "pods" in role["rules"][0]["resources"]
    binding = await kube.get("RoleBinding", NAMESPACE, "clicks-spark")
    assert [s["name"] for s in binding["subjects"]] == ["clicks-spark"]

    pod = submit["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "clicks-spark"
    command = pod["containers"][0]["command"]
    assert command[:3] == ["strom-spark-submit", "--master", operator.spark_master]
    conf = conf_of(command)
    assert conf["spark.kubernetes.driverEnv.STROM_BOOTSTRAP_SERVERS"] == (
        f"sc-bootstrap.{NAMESPACE}.svc:9092"
    )
    assert conf["spark.kubernetes.driverEnv.STROM_CHECKPOINT_DIR"] == "/checkpoint/clicks"
    assert conf["spark.kubernetes.driver.pod.name"] == "clicks-driver-1"

    await kube.create(driver_pod("clicks", 1, "Pending"))
    await wait_status(
        kube, "clicks", "driver pending", state="Submitted", driverPod="clicks-driver-1"
    )
    await set_phase(kube, "clicks-driver-1", "Running")
    running = await wait_status(kube, "clicks", "driver running", state="Running")
    assert running["sparkApplicationId"] == "spark-clicks-1"
    await set_phase(kube, "clicks-driver-1", "Succeeded")
    done = await wait_status(kube, "clicks", "driver succeeded", state="Succeeded")
    completed = [c for c in done["conditions"] if c["type"] == "Completed"]
    assert completed[0]["status"] == "True"
    reasons = [e["reason"] for e in events_posted(kmock, "clicks")]
    for reason in ("SubmissionJobCreated", "Submitted", "Running", "Succeeded"):
        assert reason in reasons


async def test_on_failure_retries_up_to_its_limit_then_fails(
    operator: settings.OperatorSettings, kube: k8s.Client, kmock: kmock.KubernetesEmulator
) -> None:
    await kube.create(cluster_body("sc"))
    policy = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryIntervalSeconds": 1}
    await kube.create(sparkjob_body("flaky", restartPolicy=policy))
    await eventually(lambda: exists(kube, "Job", "flaky-submit-1"), "the first Job")
    await kube.create(driver_pod("flaky", 1, "Failed", **crashed(1, "Py4JJavaError: boom")))

    retrying = await wait_status(kube, "flaky", "retrying", state="Retrying")
    assert (
        retrying["lastError"] == "spark-kubernetes-driver: Error, exit code 1, Py4JJavaError: boom"
    )
    await eventually(lambda: exists(kube, "Job", "flaky-submit-2"), "the retry's Job")
    await wait_status(kube, "flaky", "second attempt", attempts=2, attemptNumber=2)
    # the failed attempt is cleaned up before the next
    assert await exists(kube, "Pod", "flaky-driver-1") is None
    assert await exists(kube, "Job", "flaky-submit-1") is None

    await kube.create(driver_pod("flaky", 2, "Failed", **crashed(137, "OOMKilled")))
    failed = await wait_status(kube, "flaky", "failed for good", state="Failed", attempts=2)
    assert "exit code 137" in failed["lastError"]
    warnings = [e for e in events_posted(kmock, "flaky") if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == ["Failed", "Failed"]
    await _two_more_passes(kube, kmock, "flaky")
    assert await exists(kube, "Job", "flaky-submit-3") is None
    assert (await kube.get("SparkJob", NAMESPACE, "flaky"))["status"]["state"] == "Failed"


async def test_never_stays_failed(
    operator: settings.OperatorSettings, kube: k8s.Client, kmock: kmock.KubernetesEmulator
) -> None:
    await kube.create(cluster_body("sc"))
    await kube.create(sparkjob_body("once"))
    await eventually(lambda: exists(kube, "Job", "once-submit-1"), "the Job")
    await kube.create(driver_pod("once", 1, "Failed", **crashed(2, "bad args")))
    await wait_status(kube, "once", "failed", state="Failed", attempts=1)
    await _two_more_passes(kube, kmock, "once")
    assert await exists(kube, "Job", "once-submit-2") is None
    assert (await kube.get("SparkJob", NAMESPACE, "once"))["status"]["state"] == "Failed"


async def test_a_spec_change_stops_the_attempt_and_submits_again(
    operator: settings.OperatorSettings, kube: k8s.Client
) -> None:
    await kube.create(cluster_body("sc"))
    await kube.create(sparkjob_body("evolving"))
    await eventually(lambda: exists(kube, "Job", "evolving-submit-1"), "the first Job")
    await kube.create(driver_pod("evolving", 1, "Running"))
    await wait_status(kube, "evolving", "running", state="Running")

    # kmock keeps no generation: the test bumps it, as the apiserver does on a spec change
    change = {"metadata": {"generation": 2}, "spec": {"arguments": ["--window", "5 minutes"]}}
    await kube.merge_patch("SparkJob", NAMESPACE, "evolving", change)
    submit = await eventually(lambda: exists(kube, "Job", "evolving-submit-2"), "a new Job")
    status = await wait_status(kube, "evolving", "resubmitted", attempts=1, observedGeneration=2)
    assert status["attemptNumber"] == 2
    assert submit["spec"]["template"]["spec"]["containers"][0]["command"][-2:] == [
        "--window",
        "5 minutes",
    ]
    assert await exists(kube, "Pod", "evolving-driver-1") is None
    assert await exists(kube, "Job", "evolving-submit-1") is None


async def test_deleting_a_sparkjob_deletes_its_driver_pods(
    operator: settings.OperatorSettings, kube: k8s.Client
) -> None:
    await kube.create(cluster_body("sc"))
    await kube.create(sparkjob_body("doomed"))
    await eventually(lambda: exists(kube, "Job", "doomed-submit-1"), "the Job")
    await kube.create(driver_pod("doomed", 1, "Running"))
    await wait_status(kube, "doomed", "running", state="Running")
    await kube.delete("SparkJob", NAMESPACE, "doomed")

    async def gone() -> bool:
        return (
            await exists(kube, "Pod", "doomed-driver-1") is None
            and await exists(kube, "SparkJob", "doomed") is None
        )

    await eventually(gone, "the driver pod and the SparkJob deleted")


async def test_a_sparkjob_waits_for_its_cluster(
    operator: settings.OperatorSettings, kube: k8s.Client
) -> None:
    await kube.create(sparkjob_body("early", cluster="later"))
    waiting = await wait_status(kube, "early", "waiting", state="Pending")
    assert waiting["lastError"] == f"KafkaCluster later not found in {NAMESPACE}"
    assert await exists(kube, "Job", "early-submit-1") is None
    await kube.create(cluster_body("later"))
    await eventually(
        lambda: exists(kube, "Job", "early-submit-1"), "the Job once the cluster exists"
    )


async def _two_more_passes(kube: k8s.Client, emulator: kmock.KubernetesEmulator, name: str) -> None:
    """Wait until the operator has written the job's status twice more (the timer's passes):
    what a retry would have done by then, it has done."""
    path = f"patch /apis/strom.io/v1alpha1/namespaces/{NAMESPACE}/sparkjobs/{name}/status"
    before = len(emulator[path])

    async def passed() -> bool:
        return len(emulator[path]) >= before + 2

    await eventually(passed, f"two more reconciles of {name}")
