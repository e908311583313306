"""A SparkJob's spec, the objects the operator makes for it (the spark-submit command line,
RBAC, pod templates, the checkpoint PVC), and its status and retries from the attempt's
Job and driver pod, per restartPolicy and with the intervals' times."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from strom_operator.reconcile import model, sparkjobs
from strom_operator.reconcile.sparkjob_status import (
    Driver,
    Plan,
    Previous,
    Submission,
    observe_driver,
    observe_submission,
    plan,
)

NS = "analytics"
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
MASTER = "k8s://https://kubernetes.default.svc"
BOOTSTRAP = f"events-bootstrap.{NS}.svc:9092"


def body(**spec: Any) -> model.JsonObject:
    return {
        "apiVersion": "strom.io/v1alpha1",
        "kind": "SparkJob",
        "metadata": {"name": "clicks", "namespace": NS, "uid": "u-1", "generation": 1},
        "spec": {
            "cluster": "events",
            "image": "strom/spark:0.1.0",
            "mainApplicationFile": "local:///opt/strom/spark/jobs/clickstream.py",
            **spec,
        },
    }


def job(**spec: Any) -> sparkjobs.SparkJobSpec:
    return sparkjobs.parse_sparkjob(body(**spec))


def conf_of(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


# --- the spec -----------------------------------------------------------------------------


def test_defaults_are_the_crds() -> None:
    parsed = job()
    assert parsed.image_pull_policy == "IfNotPresent"
    assert (parsed.driver.cores, parsed.driver.memory) == (1, "512m")
    assert (parsed.executor_instances, parsed.executor.cores, parsed.executor.memory) == (
        1,
        1,
        "512m",
    )
    assert parsed.restart == sparkjobs.RestartPolicy(sparkjobs.RestartType.NEVER, 3, 10, 3, 10)
    assert parsed.checkpoint is None
    assert parsed.job_service_account == parsed.driver_account == "clicks-spark"


@pytest.mark.parametrize(
    ("spec", "reason", "words"),
    [
        ({"sparkConf": {"spark.kubernetes.namespace": "x"}}, "OperatorOwnedConf", "namespace"),
        (
            {"sparkConf": {"spark.kubernetes.driver.label.strom.io/attempt": "9"}},
            "OperatorOwnedConf",
            "strom.io/attempt",
        ),
        ({"checkpoint": {"claimName": "c", "size": "1Gi"}}, "InvalidSpec", "claimName or size"),
        ({"executor": {"instances": -1}}, "InvalidSpec", "spec.executor.instances"),
        ({"restartPolicy": {"type": "Sometimes"}}, "InvalidSpec", "Sometimes"),
        ({"image": ""}, "InvalidSpec", "spec.image"),
    ],
)
def test_a_spec_the_operator_cannot_carry_out_is_refused(
    spec: dict[str, Any], reason: str, words: str
) -> None:
    with pytest.raises(model.SpecError) as refused:
        job(**spec)
    assert refused.value.reason == reason
    assert words in str(refused.value)


# --- the objects --------------------------------------------------------------------------


def test_the_bootstrap_address_is_the_clusters_bootstrap_service_on_its_first_listener() -> None:
    parsed = job()
    assert sparkjobs.bootstrap_servers(parsed, {"spec": {}}) == BOOTSTRAP
    assert model.ClusterNames("events", NS).bootstrap_dns == BOOTSTRAP  # the status' address
    listeners = {"spec": {"listeners": [{"name": "INTERNAL", "port": 9192}]}}
    assert sparkjobs.bootstrap_servers(parsed, listeners) == f"events-bootstrap.{NS}.svc:9192"


def test_spark_submit_runs_in_cluster_mode_with_the_operators_conf_then_the_users() -> None:
    parsed = job(
        arguments=["--window", "1 minute"],
        sparkConf={"spark.sql.shuffle.partitions": "6", "spark.driver.memory": "2g"},
        driver={"cores": 2, "memory": "1g", "env": [{"name": "LOG_LEVEL", "value": "debug"}]},
        executor={"instances": 3, "cores": 2, "memory": "3g"},
        checkpoint={"size": "1Gi", "mountPath": "/state"},
    )
    argv = sparkjobs.spark_submit_command(parsed, 4, master=MASTER, bootstrap=BOOTSTRAP)
    assert argv[:8] == [
        "strom-spark-submit",
        "--master",
        MASTER,
        "--deploy-mode",
        "cluster",
        "--name",
        "clicks",
        "--conf",
    ]
    assert argv[-3:] == ["local:///opt/strom/spark/jobs/clickstream.py", "--window", "1 minute"]
    conf = conf_of(argv)
    assert conf["spark.kubernetes.namespace"] == NS
    assert conf["spark.kubernetes.driver.pod.name"] == "clicks-driver-4"
    assert conf["spark.kubernetes.submission.waitAppCompletion"] == "false"
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "clicks-spark"
    assert conf["spark.kubernetes.container.image"] == "strom/spark:0.1.0"
    assert conf["spark.kubernetes.container.image.pullPolicy"] == "IfNotPresent"
    assert conf["spark.kubernetes.driver.podTemplateFile"] == "/etc/strom/pod-templates/driver.yaml"
    assert (
        conf["spark.kubernetes.executor.podTemplateFile"]
        == "/etc/strom/pod-templates/executor.yaml"
    )
    for role in ("driver", "executor"):
        assert conf[f"spark.kubernetes.{role}.label.strom.io/sparkjob"] == "clicks"
        assert conf[f"spark.kubernetes.{role}.label.strom.io/attempt"] == "4"
    assert conf["spark.kubernetes.driverEnv.STROM_BOOTSTRAP_SERVERS"] == BOOTSTRAP
    assert conf["spark.executorEnv.STROM_BOOTSTRAP_SERVERS"] == BOOTSTRAP
    assert conf["spark.kubernetes.driverEnv.STROM_CHECKPOINT_DIR"] == "/state/clicks"
    assert conf["spark.executorEnv.STROM_CHECKPOINT_DIR"] == "/state/clicks"
    assert conf["spark.kubernetes.driverEnv.LOG_LEVEL"] == "debug"
    assert conf["spark.driver.cores"] == "2"
    assert conf["spark.executor.instances"] == "3"
    assert (conf["spark.executor.cores"], conf["spark.executor.memory"]) == ("2", "3g")
    assert conf["spark.sql.shuffle.partitions"] == "6"
    # the user's sparkConf comes last: it wins over spec.driver.memory
    assert conf["spark.driver.memory"] == "2g"
    assert argv.count("spark.driver.memory=2g") == 1


def test_without_a_checkpoint_no_checkpoint_dir_is_given() -> None:
    argv = sparkjobs.spark_submit_command(job(), 1, master=MASTER, bootstrap=BOOTSTRAP)
    assert not [key for key in conf_of(argv) if "STROM_CHECKPOINT_DIR" in key]


def test_the_submission_job_runs_spark_submit_once_as_the_jobs_account() -> None:
    parsed = job(serviceAccount="analytics-spark", driver={"serviceAccount": "driver-sa"})
    submit = sparkjobs.submission_job(parsed, 2, master=MASTER, bootstrap=BOOTSTRAP)
    assert (submit["apiVersion"], submit["kind"]) == ("batch/v1", "Job")
    assert submit["metadata"]["name"] == "clicks-submit-2"
    assert submit["metadata"]["labels"]["strom.io/attempt"] == "2"
    assert submit["spec"]["backoffLimit"] == 0
    pod = submit["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "analytics-spark"
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["image"] == "strom/spark:0.1.0"
    assert container["command"] == sparkjobs.spark_submit_command(
        parsed, 2, master=MASTER, bootstrap=BOOTSTRAP
    )
    assert conf_of(container["command"])[
        "spark.kubernetes.authenticate.driver.serviceAccountName"
    ] == ("driver-sa")
    assert container["volumeMounts"][0]["mountPath"] == "/etc/strom/pod-templates"
    assert pod["volumes"][0]["configMap"]["name"] == "clicks-pod-templates"
    _assert_owned(submit)


def _assert_owned(obj: model.JsonObject) -> None:
    [owner] = obj["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "SparkJob",
        "clicks",
        "u-1",
        True,
    )
    assert obj["metadata"]["labels"]["strom.io/sparkjob"] == "clicks"
    assert obj["metadata"]["namespace"] == NS


def test_the_owned_objects_give_the_driver_what_it_needs() -> None:
    objects = sparkjobs.owned_objects(
        job(checkpoint={"size": "2Gi", "storageClassName": "fast"}), entrypoint="run-spark"
    )
    by_kind = {o["kind"]: o for o in objects}
    assert list(by_kind) == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "PersistentVolumeClaim",
    ]
    for obj in objects:
        _assert_owned(obj)
    assert by_kind["ServiceAccount"]["metadata"]["name"] == "clicks-spark"
    [rule] = by_kind["Role"]["rules"]
    assert set(rule["resources"]) == {"pods", "services", "configmaps", "persistentvolumeclaims"}
    assert {"create", "get", "list", "watch", "delete", "deletecollection"} <= set(rule["verbs"])
    binding = by_kind["RoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "clicks-spark",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "clicks-spark", "namespace": NS}
    ]
    claim = by_kind["PersistentVolumeClaim"]
    assert claim["metadata"]["name"] == "clicks-checkpoint"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "2Gi"}},
        "storageClassName": "fast",
    }
    templates = by_kind["ConfigMap"]
    assert templates["metadata"]["name"] == "clicks-pod-templates"
    for name, container in (
        ("driver.yaml", "spark-kubernetes-driver"),
        ("executor.yaml", "spark-kubernetes-executor"),
    ):
        pod = json.loads(templates["data"][name])  # JSON is YAML: what Spark reads
        (spec_container,) = pod["spec"]["containers"]
        assert spec_container["name"] == container
        assert spec_container["command"] == ["run-spark"]
        assert spec_container["volumeMounts"] == [
            {"name": "checkpoint", "mountPath": "/checkpoint"}
        ]
        assert pod["spec"]["volumes"] == [
            {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "clicks-checkpoint"}}
        ]


def test_a_given_account_and_claim_are_used_not_made() -> None:
    parsed = job(
        serviceAccount="mine",
        driver={"serviceAccount": "drivers"},
        checkpoint={"claimName": "shared"},
    )
    objects = sparkjobs.owned_objects(parsed, entrypoint="e")
    assert [o["kind"] for o in objects] == ["Role", "RoleBinding", "ConfigMap"]
    assert [s["name"] for s in objects[1]["subjects"]] == ["mine", "drivers"]
    pod = json.loads(objects[2]["data"]["driver.yaml"])
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "shared"


# --- what the attempt's objects say -----------------------------------------------------


def driver_pod(phase: str, **status: Any) -> model.JsonObject:
    return {
        "metadata": {"name": "clicks-driver-1", "labels": {"spark-app-selector": "spark-0a1b"}},
        "status": {"phase": phase, **status},
    }


def test_the_driver_pod_gives_its_phase_application_id_and_failure() -> None:
    assert observe_driver(driver_pod("Running")) == Driver(
        "clicks-driver-1", "Running", None, "spark-0a1b"
    )
    terminated = {"reason": "Error", "exitCode": 1, "message": "Py4JJavaError: no topic\n"}
    failed = driver_pod(
        "Failed",
        containerStatuses=[
            {"name": "spark-kubernetes-driver", "state": {"terminated": terminated}}
        ],
    )
    observed = observe_driver(failed)
    assert observed is not None
    assert observed.error == "spark-kubernetes-driver: Error, exit code 1, Py4JJavaError: no topic"
    evicted = observe_driver(driver_pod("Failed", reason="Evicted", message="node low on memory"))
    assert evicted is not None and evicted.error == "node low on memory"


def test_the_submission_job_gives_its_failure_message() -> None:
    failed = {
        "status": {
            "conditions": [
                {"type": "Failed", "status": "True", "message": "Job has reached the backoff limit"}
            ]
        }
    }
    assert observe_submission(failed) == Submission(
        False, True, "Job has reached the backoff limit", None
    )
    done = {
        "status": {
            "completionTime": "2026-01-01T00:00:05Z",
            "conditions": [{"type": "Complete", "status": "True"}],
        }
    }
    assert observe_submission(done) == Submission(
        True, False, "", T0 + datetime.timedelta(seconds=5)
    )
    assert observe_submission(None) is None


# --- status and retries -------------------------------------------------------------------


class Run:
    """A SparkJob's passes: each plan's status is the next pass's previous status."""

    def __init__(self, parsed: sparkjobs.SparkJobSpec) -> None:
        self.job = parsed
        self.status: model.JsonObject = {}
        self.now = T0

    def step(
        self,
        *,
        submission: Submission | None = None,
        driver: Driver | None = None,
        after_s: float = 0,
        cluster_found: bool = True,
    ) -> Plan:
        self.now += datetime.timedelta(seconds=after_s)
        result = plan(
            self.job,
            Previous.from_status(self.status),
            submission=submission,
            driver=driver,
            cluster_found=cluster_found,
            now=self.now,
        )
        self.status = {k: v for k, v in result.status.items() if v is not None}
        return result

    def driver(self, phase: str, error: str | None = None) -> Driver:
        number = self.status["attemptNumber"]
        return Driver(self.job.driver_pod(number), phase, error, f"spark-{number}")


RUNNING_JOB = Submission(False, False, "", None)


def test_the_first_pass_submits_attempt_one_and_the_driver_phases_give_the_state() -> None:
    run = Run(job())
    first = run.step()
    assert first.submit == 1 and first.delete is None
    assert run.status["state"] == "Pending"
    assert run.status["attempts"] == 1
    assert run.status["submissionJob"] == "clicks-submit-1"
    assert [e.reason for e in first.events] == ["SubmissionJobCreated"]

    assert run.step(submission=RUNNING_JOB).submit is None
    assert run.status["state"] == "Pending"
    run.step(submission=RUNNING_JOB, driver=run.driver("Pending"))
    assert run.status["state"] == "Submitted"
    assert run.status["driverPod"] == "clicks-driver-1"
    running = run.step(driver=run.driver("Running"))
    assert run.status["state"] == "Running"
    assert run.status["sparkApplicationId"] == "spark-1"
    assert [(e.reason, e.warning) for e in running.events] == [("Running", False)]
    assert {c.type: c.status for c in running.conditions} == {
        "Running": "True",
        "Completed": "False",
    }
    assert run.step(driver=run.driver("Running")).events == ()  # no change, no Event

    done = run.step(driver=run.driver("Succeeded"))
    assert run.status["state"] == "Succeeded"
    assert run.status["terminationTime"] == "2026-01-01T00:00:00Z"
    assert done.requeue_after is None and done.submit is None
    assert {c.type: c.status for c in done.conditions} == {"Running": "False", "Completed": "True"}
    # the driver pod cleaned up afterwards: still Succeeded, no new Event
    again = run.step(after_s=600)
    assert (run.status["state"], again.events, again.submit) == ("Succeeded", (), None)


def test_never_stays_failed_with_the_drivers_error() -> None:
    run = Run(job())
    run.step()
    failed = run.step(driver=run.driver("Failed", "driver: Error, exit code 1"))
    assert run.status["state"] == "Failed"
    assert run.status["lastError"] == "driver: Error, exit code 1"
    assert [(e.reason, e.warning) for e in failed.events] == [("Failed", True)]
    later = run.step(after_s=3600, driver=run.driver("Failed", "driver: Error, exit code 1"))
    assert later.submit is None and run.status["state"] == "Failed"


def test_on_failure_retries_after_the_interval_up_to_the_limit_then_fails() -> None:
    run = Run(
        job(
            restartPolicy={
                "type": "OnFailure",
                "onFailureRetries": 2,
                "onFailureRetryIntervalSeconds": 10,
            }
        )
    )
    run.step()
    for attempt in (1, 2):
        failing = run.step(driver=run.driver("Failed", f"oom {attempt}"))
        assert run.status["state"] == "Retrying"
        assert failing.requeue_after == 10.0
        assert [e.reason for e in failing.events] == ["Failed", "Retrying"]
        early = run.step(after_s=4, driver=run.driver("Failed", f"oom {attempt}"))
        assert early.submit is None and early.requeue_after == 6.0
        retry = run.step(after_s=6)
        assert (retry.submit, retry.delete) == (attempt + 1, attempt)
        assert run.status["attempts"] == attempt + 1
        assert run.status["state"] == "Pending"
        assert run.status["lastError"] == f"oom {attempt}"  # why it was retried
        assert "driverPod" not in run.status and "terminationTime" not in run.status
    last = run.step(driver=run.driver("Failed", "oom 3"))
    assert run.status["state"] == "Failed" and last.requeue_after is None
    assert run.step(after_s=60).submit is None
    assert run.status["attempts"] == 3


def test_on_failure_does_not_rerun_a_success_and_always_does() -> None:
    on_failure = Run(job(restartPolicy={"type": "OnFailure"}))
    on_failure.step()
    on_failure.step(driver=on_failure.driver("Succeeded"))
    assert on_failure.status["state"] == "Succeeded"

    always = Run(
        job(
            restartPolicy={
                "type": "Always",
                "onFailureRetries": 0,
                "onFailureRetryIntervalSeconds": 5,
            }
        )
    )
    always.step()
    for attempt in range(1, 5):  # no limit
        ended = always.step(driver=always.driver("Succeeded" if attempt % 2 else "Failed"))
        assert always.status["state"] == "Retrying" and ended.requeue_after == 5.0
        assert always.step(after_s=5).submit == attempt + 1


def test_a_failed_submission_is_retried_per_its_own_limit_and_interval() -> None:
    policy = {
        "type": "OnFailure",
        "onFailureRetries": 0,
        "onSubmissionFailureRetries": 1,
        "onSubmissionFailureRetryIntervalSeconds": 30,
    }
    run = Run(job(restartPolicy=policy))
    run.step()
    refused = Submission(False, True, "pods is forbidden", None)
    first = run.step(submission=refused)
    assert run.status["state"] == "SubmissionFailed"
    assert run.status["lastError"] == "spark-submit failed: pods is forbidden"
    assert run.status["submissionFailures"] == 1
    assert first.requeue_after == 30.0
    assert [(e.reason, e.warning) for e in first.events] == [
        ("SubmissionFailed", True),
        ("Retrying", False),
    ]
    assert run.step(after_s=29, submission=refused).submit is None
    assert run.status["submissionFailures"] == 1  # counted once
    assert run.step(after_s=1).submit == 2
    final = run.step(submission=refused)
    assert run.status["state"] == "SubmissionFailed"
    assert final.requeue_after is None
    assert {c.type: c.status for c in final.conditions}["Completed"] == "True"


def test_a_driver_that_disappears_or_never_appears_fails_the_attempt() -> None:
    run = Run(job())
    run.step()
    run.step(driver=run.driver("Running"))
    run.step()
    assert run.status["state"] == "Failed"
    assert run.status["lastError"] == "driver pod clicks-driver-1 disappeared"

    silent = Run(job())
    silent.step()
    done = Submission(True, False, "", T0)
    silent.step(submission=done, after_s=30)
    assert silent.status["state"] == "Submitted"
    silent.step(submission=done, after_s=31)
    assert silent.status["state"] == "Failed"
    assert silent.status["lastError"] == "driver pod clicks-driver-1 never appeared"


def test_a_spec_change_stops_the_attempt_and_submits_again_from_one() -> None:
    run = Run(job(restartPolicy={"type": "OnFailure"}))
    run.step()
    run.step(driver=run.driver("Failed", "bad"))
    run.step(after_s=10)
    assert (run.status["attempts"], run.status["attemptNumber"]) == (2, 2)
    run.step(driver=run.driver("Running"))

    changed = body(restartPolicy={"type": "OnFailure"}, arguments=["--window", "5 minutes"])
    changed["metadata"]["generation"] = 2
    run.job = sparkjobs.parse_sparkjob(changed)
    resubmit = run.step(driver=run.driver("Running"))
    assert (resubmit.delete, resubmit.submit) == (2, 3)
    assert run.status["attempts"] == 1
    assert run.status["attemptNumber"] == 3  # a new name: the old pods may still terminate
    assert run.status["observedGeneration"] == 2
    assert "lastError" not in run.status
    assert [e.reason for e in resubmit.events] == ["SpecChanged", "SubmissionJobCreated"]


def test_without_its_cluster_a_job_waits_pending() -> None:
    run = Run(job())
    waiting = run.step(cluster_found=False)
    assert waiting.submit is None
    assert run.status["state"] == "Pending"
    assert run.status["lastError"] == f"KafkaCluster events not found in {NS}"
    assert run.step().submit == 1
