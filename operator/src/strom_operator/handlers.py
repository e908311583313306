"""The kopf side: which events of which resources run which reconcile. Nothing else.

`build_registry(settings)` registers every handler on a registry of its own (the timers'
interval comes from the settings): KafkaCluster create/update/resume and a timer, broker
pod events (a lost or returning pod is seen at once, not at the next timer), Topic
create/update/resume, a drift timer and the finalizer's delete; SparkJob
create/update/resume, a timer, the events of its driver pods and submission Jobs (a phase
change is seen at once) and the finalizer's delete. The reconcilers find the shared
`runtime.Runtime` in kopf's memo.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from strom_operator import cluster_reconciler, sparkjob_reconciler, topic_reconciler
from strom_operator.reconcile import model, sparkjobs
from strom_operator.runtime import Runtime

CLUSTERS = (model.GROUP, model.VERSION, "kafkaclusters")
TOPICS = (model.GROUP, model.VERSION, "topics")
SPARKJOBS = (model.GROUP, model.VERSION, "sparkjobs")
# Spark labels its pods spark-role=driver or executor; the operator follows the drivers
DRIVER_POD_LABELS: dict[str, Any] = {
    sparkjobs.JOB_LABEL: kopf.PRESENT,
    sparkjobs.ROLE_LABEL: "driver",
}
BROKER_POD_LABELS = {
    "app.kubernetes.io/name": "strom",
    "app.kubernetes.io/component": "broker",
}
INSTANCE_LABEL = "app.kubernetes.io/instance"


def runtime_of(memo: Any) -> Runtime:
    runtime = getattr(memo, "runtime", None)
    if not isinstance(runtime, Runtime):
        raise RuntimeError("the operator was started without its runtime in kopf's memo")
    return runtime


async def login(memo: Any, **_: Any) -> kopf.ConnectionInfo:
    """kopf uses the credentials the operator's own client was made with."""
    return runtime_of(memo).connection


async def reconcile_cluster(body: kopf.Body, memo: Any, **_: Any) -> None:
    await cluster_reconciler.reconcile(runtime_of(memo), body)


async def broker_pod_changed(
    labels: kopf.Labels, namespace: str | None, memo: Any, **_: Any
) -> None:
    """A broker pod appeared, changed or went away: reconcile its cluster now."""
    runtime = runtime_of(memo)
    cluster = labels.get(INSTANCE_LABEL)
    if not cluster or not namespace:
        return
    body = await runtime.kube.get_or_none("KafkaCluster", namespace, cluster)
    if body is not None and not body["metadata"].get("deletionTimestamp"):
        await cluster_reconciler.reconcile(runtime, body)


async def reconcile_topic(body: kopf.Body, memo: Any, **_: Any) -> None:
    await topic_reconciler.reconcile(runtime_of(memo), body)


async def delete_topic(body: kopf.Body, memo: Any, **_: Any) -> None:
    await topic_reconciler.delete(runtime_of(memo), body)


async def reconcile_sparkjob(name: str | None, namespace: str | None, memo: Any, **_: Any) -> None:
    # nothing returned: kopf would write a handler's result into the status
    await _sparkjob_pass(runtime_of(memo), namespace, name)


async def sparkjob_timer(name: str | None, namespace: str | None, memo: Any, **_: Any) -> None:
    """The timer's pass; a retry due before the next pass is submitted on time."""
    runtime = runtime_of(memo)
    due = await _sparkjob_pass(runtime, namespace, name)
    if due is not None and due < runtime.settings.reconcile_interval_s:
        await asyncio.sleep(due)  # kopf cancels the timer's task when it stops
        await _sparkjob_pass(runtime, namespace, name)


async def sparkjob_part_changed(
    labels: kopf.Labels, namespace: str | None, memo: Any, **_: Any
) -> None:
    """A driver pod or a submission Job changed: reconcile its SparkJob now."""
    await _sparkjob_pass(runtime_of(memo), namespace, labels.get(sparkjobs.JOB_LABEL))


async def _sparkjob_pass(runtime: Runtime, namespace: str | None, name: str | None) -> float | None:
    if not name or not namespace:
        return None
    return await sparkjob_reconciler.reconcile(runtime, namespace, name)


async def delete_sparkjob(body: kopf.Body, memo: Any, **_: Any) -> None:
    await sparkjob_reconciler.delete(runtime_of(memo), body)


def build_registry(interval_s: float) -> kopf.OperatorRegistry:
    """Every handler, on a registry of its own; timers every `interval_s` seconds."""
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(login)

    for on in (kopf.on.create, kopf.on.update, kopf.on.resume):
        on(*CLUSTERS, registry=registry, id="reconcile")(reconcile_cluster)
    kopf.timer(
        *CLUSTERS, registry=registry, id="timer", interval=interval_s, initial_delay=interval_s
    )(reconcile_cluster)
    kopf.on.event("v1", "pods", registry=registry, labels=BROKER_POD_LABELS)(broker_pod_changed)

    for on in (kopf.on.create, kopf.on.update, kopf.on.resume):
        on(*TOPICS, registry=registry, id="reconcile")(reconcile_topic)
    kopf.timer(
        *TOPICS, registry=registry, id="drift", interval=interval_s, initial_delay=interval_s
    )(reconcile_topic)
    kopf.on.delete(*TOPICS, registry=registry, id="delete")(delete_topic)

    for on in (kopf.on.create, kopf.on.update, kopf.on.resume):
        on(*SPARKJOBS, registry=registry, id="reconcile")(reconcile_sparkjob)
    kopf.timer(
        *SPARKJOBS, registry=registry, id="timer", interval=interval_s, initial_delay=interval_s
    )(sparkjob_timer)
    kopf.on.event("v1", "pods", registry=registry, labels=DRIVER_POD_LABELS)(sparkjob_part_changed)
    kopf.on.event(
        "batch", "v1", "jobs", registry=registry, labels={sparkjobs.JOB_LABEL: kopf.PRESENT}
    )(sparkjob_part_changed)
    kopf.on.delete(*SPARKJOBS, registry=registry, id="delete")(delete_sparkjob)
    return registry
