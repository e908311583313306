"""One reconcile of a SparkJob, and its deletion.

Each pass, under the job's lock and on the object as the apiserver has it now (the timer,
the resource's own events and its driver pod's and Job's events all come here): the
service account, RBAC, pod templates and checkpoint PVC are made or brought back; the
latest attempt's submission Job and driver pod are read; `sparkjob_status.plan` decides;
the old attempt is stopped, the new one submitted, Events posted, the status written.

Submitting means creating the attempt's batch/v1 Job, which runs spark-submit in the
job's image under the job's account (reconcile/sparkjobs.py says why not in-process).
Deleting a SparkJob deletes what it owns through owner references; the driver pods are
Spark's, not ours, so the finalizer deletes them (and their executors go with them).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any

from strom_operator import events, k8s, metrics
from strom_operator.reconcile import model, sparkjobs, status
from strom_operator.reconcile.sparkjob_status import (
    Previous,
    observe_driver,
    observe_submission,
    plan,
)
from strom_operator.runtime import Runtime, now_iso

logger = logging.getLogger(__name__)

KIND = "SparkJob"


async def reconcile(runtime: Runtime, namespace: str, name: str) -> float | None:
    """Reconcile the SparkJob `namespace/name` and write its status. Returns the seconds
    until an action falls due (a retry's interval), or None: nothing before the timer."""
    # keyed apart from the KafkaClusters' memory: "/" is in no object's name
    memory = runtime.memory(namespace, f"{KIND}/{name}")
    async with memory.lock:
        body = await runtime.kube.get_or_none(KIND, namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        with metrics.reconcile(KIND) as outcome:
            new_status, requeue = await _reconcile(runtime, body, outcome)
            await runtime.kube.patch_status(KIND, namespace, name, new_status)
            metrics.record_status(KIND, namespace, name, new_status)
            return requeue


async def _reconcile(
    runtime: Runtime, body: Mapping[str, Any], outcome: metrics.Outcome
) -> tuple[model.JsonObject, float | None]:
    old = dict(body.get("status") or {})
    generation = int(body["metadata"].get("generation") or 1)

    def merged(conditions: list[model.Condition]) -> list[model.JsonObject]:
        return status.merge_conditions(
            old.get("conditions") or [], conditions, now_iso(), generation
        )

    try:
        job = sparkjobs.parse_sparkjob(body)
    except model.SpecError as error:
        outcome.refused(KIND, error.reason)
        if old.get("lastError") != str(error):
            events.warning(body, error.reason, str(error))
        refused = [
            model.Condition("Running", "False", error.reason, str(error)),
            model.Condition("Completed", "True", error.reason, str(error)),
        ]
        written = {"state": "Failed", "lastError": str(error), "observedGeneration": generation}
        return {**written, "conditions": merged(refused)}, None

    kube = runtime.kube
    for desired in sparkjobs.owned_objects(job, entrypoint=runtime.settings.spark_entrypoint):
        await _make(body, kube, desired)
    cluster = await kube.get_or_none("KafkaCluster", job.namespace, job.cluster)
    previous = Previous.from_status(old)
    number = previous.attempt_number
    submission = driver = None
    if number:
        job_body = await kube.get_or_none("Job", job.namespace, job.submission_job(number))
        submission = observe_submission(job_body)
        driver = observe_driver(
            await kube.get_or_none("Pod", job.namespace, job.driver_pod(number))
        )
    decided = plan(
        job,
        previous,
        submission=submission,
        driver=driver,
        cluster_found=cluster is not None,
        now=datetime.datetime.now(tz=datetime.UTC),
    )
    if decided.delete is not None:
        await _stop_attempt(kube, job, decided.delete)
    if decided.submit is not None and cluster is not None:
        bootstrap = sparkjobs.bootstrap_servers(job, cluster)
        master = runtime.settings.spark_master
        submit = sparkjobs.submission_job(job, decided.submit, master=master, bootstrap=bootstrap)
        if await _create_once(kube, submit):  # the plan's Event says so
            metrics.action(KIND, "submit")
    for event in decided.events:
        (events.warning if event.warning else events.info)(body, event.reason, event.message)
    failures = [event.reason for event in decided.events if event.warning]
    if failures:
        outcome.failed(KIND, failures[0])
    return {**decided.status, "conditions": merged(decided.conditions)}, decided.requeue_after


async def delete(runtime: Runtime, body: Mapping[str, Any]) -> None:
    """The finalizer's work: the pods Spark made for this job (drivers; executors too,
    though deleting a driver deletes its executors). The rest is owned by the SparkJob."""
    meta = body["metadata"]
    metrics.forget(KIND, meta["namespace"], meta["name"])
    selector = {sparkjobs.JOB_LABEL: meta["name"]}
    for pod in await runtime.kube.list("Pod", meta["namespace"], selector):
        if await runtime.kube.delete("Pod", meta["namespace"], pod["metadata"]["name"]):
            events.info(body, "PodDeleted", f"pod {pod['metadata']['name']}")
            metrics.action(KIND, "pod_deleted")


async def _stop_attempt(kube: k8s.Client, job: sparkjobs.SparkJobSpec, number: int) -> None:
    """An attempt's driver pod (its executors follow it) and its submission Job."""
    await kube.delete("Pod", job.namespace, job.driver_pod(number))
    await kube.delete("Job", job.namespace, job.submission_job(number))
    metrics.action(KIND, "attempt_stopped")


async def _make(owner: Mapping[str, Any], kube: k8s.Client, desired: model.JsonObject) -> None:
    """Create the object, or bring it back to `desired` (a PVC is only created: its spec
    is mostly immutable); an Event for what changed."""
    if desired["kind"] == "PersistentVolumeClaim":
        result = k8s.Ensured.CREATED if await _create_once(kube, desired) else k8s.Ensured.UNCHANGED
    else:
        _, result = await kube.ensure(desired)
    if result is not k8s.Ensured.UNCHANGED:
        what = f"{desired['kind']} {desired['metadata']['name']}"
        events.info(owner, result.value.capitalize(), f"{what} {result.value}")
        metrics.action(KIND, f"{desired['kind'].lower()}_{result.value}")


async def _create_once(kube: k8s.Client, desired: model.JsonObject) -> bool:
    """Create the object unless it exists (made by an earlier pass): whether it was made."""
    meta = desired["metadata"]
    if await kube.get_or_none(desired["kind"], meta["namespace"], meta["name"]) is not None:
        return False
    try:
        await kube.create(desired)
    except k8s.Conflict:
        return False
    return True
