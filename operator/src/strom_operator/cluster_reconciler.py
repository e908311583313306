"""One reconcile of a KafkaCluster: read the spec, the owned objects, the pods and the
brokers; carry out the pure planners' decisions one step at a time; write the status.

Run on create/update/resume, on the timer and on broker pod events (handlers), always
under the cluster's lock. Each step that changes something posts an Event on the
KafkaCluster. Order matters: the ConfigMap before the StatefulSet (new pods read it),
draining before shrinking, one pod restart or one reassignment per pass.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from strom_operator import events, k8s, kafka_admin, metrics
from strom_operator.reconcile import balancing, manifests, model, rolling, scaling, spec, status
from strom_operator.runtime import ClusterMemory, Runtime, now_iso
from strom_operator.settings import BrokerAddress

logger = logging.getLogger(__name__)

KIND = "KafkaCluster"
REVISION_LABEL = "controller-revision-hash"
IMMUTABLE_STATEFULSET_FIELDS = (
    "selector",
    "serviceName",
    "volumeClaimTemplates",
    "podManagementPolicy",
)


@dataclasses.dataclass
class Pass:
    """What one reconcile found and decided, for the status."""

    spec: model.ClusterSpec
    pods: list[model.BrokerPod] = dataclasses.field(default_factory=list)
    state: model.KafkaState | None = None
    refusal: model.Refusal | None = None
    activity: status.Activity | None = None
    unreachable: str | None = None


async def reconcile(runtime: Runtime, body: Mapping[str, Any]) -> model.JsonObject:
    """Reconcile one KafkaCluster and write its status; returns the status written."""
    meta = body["metadata"]
    memory = runtime.memory(meta["namespace"], meta["name"])
    if not memory.claim_uids:
        memory.claim_uids.update(_claim_uids_in_status(body))
    async with memory.lock:
        with metrics.reconcile(KIND) as outcome:
            new_status = await _reconcile(runtime, memory, body, outcome)
            await runtime.kube.patch_status(KIND, meta["namespace"], meta["name"], new_status)
            metrics.record_status(KIND, meta["namespace"], meta["name"], new_status)
            return new_status


async def _reconcile(
    runtime: Runtime, memory: ClusterMemory, body: Mapping[str, Any], outcome: metrics.Outcome
) -> model.JsonObject:
    old_conditions = list((body.get("status") or {}).get("conditions") or [])
    generation = int(body["metadata"].get("generation") or 0)
    try:
        cluster = spec.parse_cluster(body)
    except model.SpecError as error:
        outcome.refused(KIND, error.reason)
        conditions = status.cluster_conditions(
            desired_brokers=0, pods=[], state=None, spec_error=error
        )
        if old_conditions == [] or _reason(old_conditions, "Ready") != error.reason:
            events.warning(body, error.reason, str(error))
        return {
            "conditions": status.merge_conditions(
                old_conditions, conditions, now_iso(), generation
            ),
            "observedGeneration": generation,
        }

    step = Pass(cluster)
    kube = runtime.kube
    names = cluster.names
    live_sts = await kube.get_or_none("StatefulSet", names.namespace, names.statefulset)
    current = int(live_sts["spec"]["replicas"]) if live_sts else cluster.brokers
    for desired in (
        manifests.configmap(cluster, nodes=current),
        manifests.headless_service(cluster),
        manifests.bootstrap_service(cluster),
        manifests.pdb(cluster),
    ):
        await _ensure(body, kube, desired)
    step.pods = await observe_pods(kube, names, max(current, cluster.brokers))

    bootstrap = await bootstrap_servers(runtime, names)
    session: kafka_admin.Session | None = None
    if bootstrap:
        try:
            session = kafka_admin.Session(bootstrap, timeout=runtime.settings.kafka_timeout_s)
            step.state = await session.observe()
        except kafka_admin.AdminError as error:
            step.unreachable = str(error)
            session = None
            outcome.failed(KIND, "BrokersUnreachable")

    try:
        replicas = await _replicas(runtime, body, step, session, current)
    except kafka_admin.AdminError as error:
        _kafka_failed(body, step, outcome, error)
        replicas = current
    sts = manifests.statefulset(cluster, config_hash=manifests.config_hash(cluster))
    sts["spec"]["replicas"] = replicas
    if live_sts is not None:
        # the apiserver refuses any change to these; a larger storage size is carried out
        # on the PVCs themselves (_grow_storage)
        for immutable in IMMUTABLE_STATEFULSET_FIELDS:
            sts["spec"].pop(immutable, None)
    live_sts = await _ensure(body, kube, sts)
    if session is not None and step.state is not None:
        try:
            await _dynamic_config(body, session, cluster)
            await _roll(body, runtime, step, live_sts)
            await _balance(body, runtime, memory, step, session)
        except kafka_admin.AdminError as error:
            _kafka_failed(body, step, outcome, error)
    await _grow_storage(body, runtime, step)
    _report_loss(body, memory, step)

    conditions = status.cluster_conditions(
        desired_brokers=cluster.brokers,
        pods=step.pods,
        state=step.state,
        refusal=step.refusal,
        activity=step.activity,
    )
    if step.refusal is not None:
        outcome.refused(KIND, step.refusal.reason)
    new_status = status.cluster_status(
        cluster,
        step.pods,
        step.state,
        status.merge_conditions(old_conditions, conditions, now_iso(), generation),
    )
    if step.unreachable is not None:
        for condition in new_status["conditions"]:
            if condition["reason"] == "BrokersUnreachable":
                condition["message"] = step.unreachable
    return new_status


# --- observing ----------------------------------------------------------------------------


async def observe_pods(
    kube: k8s.Client, names: model.ClusterNames, count: int
) -> list[model.BrokerPod]:
    """The broker pods 0..count-1 as they are now (absent ones with exists False)."""
    pods = {
        p["metadata"]["name"]: p for p in await kube.list("Pod", names.namespace, names.selector)
    }
    claims = {
        c["metadata"]["name"]: c for c in await kube.list("PersistentVolumeClaim", names.namespace)
    }
    observed: list[model.BrokerPod] = []
    for broker_id in range(count):
        pod = pods.get(names.pod(broker_id))
        claim = claims.get(names.claim(broker_id))
        claim_uid = claim["metadata"].get("uid") if claim else None
        if pod is None:
            observed.append(
                model.BrokerPod(
                    broker_id,
                    names.pod(broker_id),
                    False,
                    False,
                    False,
                    None,
                    claim is not None,
                    claim_uid,
                )
            )
            continue
        meta = pod["metadata"]
        observed.append(
            model.BrokerPod(
                broker_id=broker_id,
                name=meta["name"],
                exists=True,
                ready=_ready(pod),
                deleting=bool(meta.get("deletionTimestamp")),
                revision=(meta.get("labels") or {}).get(REVISION_LABEL),
                claim_exists=claim is not None,
                claim_uid=claim_uid,
            )
        )
    return observed


async def bootstrap_servers(runtime: Runtime, names: model.ClusterNames) -> str:
    """How this operator reaches the cluster's brokers (settings.broker_address)."""
    configured = runtime.settings
    if configured.bootstrap_servers:
        return configured.bootstrap_servers
    if configured.broker_address is BrokerAddress.SERVICE:
        return names.bootstrap_dns
    pods = await runtime.kube.list("Pod", names.namespace, names.selector)
    ips = sorted(
        ip for pod in pods if _ready(pod) for ip in [(pod.get("status") or {}).get("podIP")] if ip
    )
    return ",".join(f"{ip}:{model.KAFKA_PORT}" for ip in ips)


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


# --- acting -------------------------------------------------------------------------------


async def _ensure(
    owner: Mapping[str, Any], kube: k8s.Client, desired: model.JsonObject
) -> model.JsonObject:
    live, result = await kube.ensure(desired)
    if result is not k8s.Ensured.UNCHANGED:
        what = f"{desired['kind']} {desired['metadata']['name']}"
        events.info(owner, result.value.capitalize(), f"{what} {result.value}")
        metrics.action(KIND, f"{desired['kind'].lower()}_{result.value}")
    return live


async def _replicas(
    runtime: Runtime,
    body: Mapping[str, Any],
    step: Pass,
    session: kafka_admin.Session | None,
    current: int,
) -> int:
    """The StatefulSet's replicas for this pass: the spec's, except while scaling down,
    where the leaving brokers are drained first (and a refusal keeps them)."""
    target = step.spec.brokers
    if target >= current:
        if target > current:
            step.activity = status.Activity("ScalingUp", f"{current} -> {target} brokers")
        return target
    if session is None or step.state is None:
        step.activity = status.Activity("Draining", "waiting for the brokers to answer")
        return current
    leaving = frozenset(range(target, current))
    plan = scaling.drain(step.state, leaving, frozenset(range(target)))
    if isinstance(plan, model.Refusal):
        step.refusal = plan
        events.warning(body, plan.reason, plan.message)
        return current
    if plan is None:
        events.info(body, "ScalingDown", f"{current} -> {target} brokers")
        metrics.action(KIND, "scale_down")
        return target
    step.activity = status.Activity("Draining", plan.reason)
    await _carry_out(body, runtime, runtime.memory(*_key(body)), step, session, plan)
    return current


async def _dynamic_config(
    body: Mapping[str, Any], session: kafka_admin.Session, cluster: model.ClusterSpec
) -> None:
    """spec.config's dynamic part as the cluster-wide broker default: no restart. The
    resource is the source of truth, as for topics: a cluster-wide default the spec does
    not name (removed from the spec, or set by hand with kafka-configs.sh --entity-default)
    is deleted, and the brokers fall back to their properties files."""
    desired = spec.dynamic_config(cluster)
    current = await session.cluster_defaults()
    changed = {key: value for key, value in desired.items() if current.get(key) != value}
    removed = sorted(key for key in current if key not in desired)
    if changed or removed:
        await session.alter_cluster_defaults(changed, removed)
        applied = [f"{key}={value}" for key, value in sorted(changed.items())]
        applied += [f"{key} removed" for key in removed]
        events.info(body, "ConfigApplied", "dynamic broker config: " + ", ".join(applied))
        metrics.action(KIND, "dynamic_config")


async def _roll(
    body: Mapping[str, Any], runtime: Runtime, step: Pass, sts: Mapping[str, Any]
) -> None:
    """Restart one stale pod if the roller's rules allow it now."""
    target = (sts.get("status") or {}).get("updateRevision")
    if not target:
        return  # no StatefulSet controller has looked at it yet
    decision = rolling.next_restart(step.pods, target, step.state)
    if isinstance(decision, model.Done):
        return
    if isinstance(decision, model.Wait):
        step.activity = step.activity or status.Activity("RollingRestart", decision.reason)
        return
    names = step.spec.names
    await runtime.kube.delete("Pod", names.namespace, names.pod(decision.broker_id))
    step.activity = status.Activity("RollingRestart", decision.reason)
    events.info(body, "RollingRestart", decision.reason)
    metrics.action(KIND, "restart")


async def _balance(
    body: Mapping[str, Any],
    runtime: Runtime,
    memory: ClusterMemory,
    step: Pass,
    session: kafka_admin.Session,
) -> None:
    """Leaders and replicas: over the survivors when a pod is lost, off a broker whose
    volume is gone, back to preferred when all are back, onto new brokers after a scale-up.
    One plan per pass; nothing new while a reassignment runs."""
    state = step.state
    assert state is not None
    if state.reassigning:
        step.activity = step.activity or status.Activity(
            "Reassigning", f"{len(state.reassigning)} partition(s) moving"
        )
        return
    if memory.throttles is not None:
        brokers, topics = memory.throttles
        cleared = scaling.clear_throttles(scaling.ThrottleConfigs(brokers, topics))
        await session.delete_configs(cleared.brokers, cleared.topics)
        memory.throttles = None
    if step.activity is not None and step.activity.reason in ("Draining", "RollingRestart"):
        return
    ready = frozenset(p.broker_id for p in step.pods if p.exists and p.ready)
    desired = frozenset(range(step.spec.brokers))
    survivors = (state.live_brokers & ready) if ready else state.live_brokers
    lost_volume = frozenset(
        p.broker_id
        for p in step.pods
        if p.claim_uid is not None and memory.claim_uids.get(p.broker_id) not in (None, p.claim_uid)
    )
    memory.claim_uids.update({p.broker_id: p.claim_uid for p in step.pods if p.claim_uid})
    plan: model.Reassignment | model.Refusal | None
    if lost_volume:
        plan = balancing.evacuate(state, lost_volume, survivors - lost_volume)
    elif desired - survivors:
        plan = balancing.balance_leaders(state, survivors)
    else:
        plan = balancing.restore_preferred(state) or scaling.spread(
            state, desired, runtime.settings.max_moves
        )
    if isinstance(plan, model.Refusal):
        step.refusal = step.refusal or plan
        return
    if plan is not None:
        await _carry_out(body, runtime, memory, step, session, plan)


async def _carry_out(
    body: Mapping[str, Any],
    runtime: Runtime,
    memory: ClusterMemory,
    step: Pass,
    session: kafka_admin.Session,
    plan: model.Reassignment,
) -> None:
    """One step of a plan, across reconciles: start the moves not yet started (throttled),
    and once every partition has its planned replicas, elect the preferred leaders."""
    state = step.state
    assert state is not None
    current = {p.key: p.replicas for p in state.partitions}
    pending = {tp: tuple(r) for tp, r in plan.moves.items() if current.get(tp) != tuple(r)}
    to_start = {tp: r for tp, r in pending.items() if tp not in state.reassigning}
    if to_start:
        starting = dataclasses.replace(plan, moves=to_start)
        rate = runtime.settings.throttle_bytes_per_s
        throttles = scaling.throttle_configs(starting, state, rate)
        if rate and (throttles.brokers or throttles.topics):
            await session.set_configs(throttles.brokers, throttles.topics)
            memory.throttles = (throttles.brokers, throttles.topics)
        await session.reassign(to_start)
        events.info(body, "Reassigning", f"{len(to_start)} partition(s): {plan.reason}")
        metrics.action(KIND, "reassignment")
    if pending:
        step.activity = step.activity or status.Activity("Reassigning", plan.reason)
        return
    if plan.elect:
        await session.elect_preferred(plan.elect)
        events.info(body, "LeadersElected", f"{len(plan.elect)} partition(s): {plan.reason}")
        metrics.action(KIND, "election")


async def _grow_storage(body: Mapping[str, Any], runtime: Runtime, step: Pass) -> None:
    """A larger spec.storage.size: each PVC's request grows where its StorageClass allows
    volume expansion (a shrink is refused by the schema; a class without expansion is a
    refusal in status)."""
    names = step.spec.names
    wanted = step.spec.storage
    for pod in step.pods:
        if not pod.claim_exists:
            continue
        claim = await runtime.kube.get_or_none(
            "PersistentVolumeClaim", names.namespace, names.claim(pod.broker_id)
        )
        if claim is None:
            continue
        requested = ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
        size = requested.get("storage")
        if size is None or spec.parse_quantity(str(size)) >= wanted.size_bytes:
            continue
        class_name = (claim.get("spec") or {}).get("storageClassName")
        storage_class = (
            await runtime.kube.get_or_none("StorageClass", None, class_name) if class_name else None
        )
        if not (storage_class or {}).get("allowVolumeExpansion"):
            step.refusal = step.refusal or model.Refusal(
                "StorageCannotGrow",
                f"storage class {class_name or '(none)'} does not allow volume expansion: "
                f"{claim['metadata']['name']} stays at {size}",
            )
            continue
        await runtime.kube.merge_patch(
            "PersistentVolumeClaim",
            names.namespace,
            claim["metadata"]["name"],
            {"spec": {"resources": {"requests": {"storage": wanted.size}}}},
        )
        events.info(
            body,
            "StorageGrown",
            f"{claim['metadata']['name']}: {size} -> {wanted.size}",
        )
        metrics.action(KIND, "storage_grown")


def _kafka_failed(
    body: Mapping[str, Any], step: Pass, outcome: metrics.Outcome, error: kafka_admin.AdminError
) -> None:
    """An admin call failed midway: the rest waits for the next pass, the status says why."""
    reason = error.reason
    step.refusal = step.refusal or model.Refusal(reason, str(error))
    outcome.failed(KIND, reason)
    events.warning(body, reason, str(error))


def _report_loss(body: Mapping[str, Any], memory: ClusterMemory, step: Pass) -> None:
    """One Warning Event when a broker pod is lost, one Normal when all are back."""
    lost = [pod.name for pod in step.pods[: step.spec.brokers] if not (pod.exists and pod.ready)]
    if lost and not memory.degraded:
        events.warning(body, "BrokerPodNotReady", "not ready: " + ", ".join(lost))
    elif not lost and memory.degraded:
        events.info(body, "BrokersReady", "every broker pod is ready")
    memory.degraded = bool(lost)


def _claim_uids_in_status(body: Mapping[str, Any]) -> dict[int, str]:
    """The PVC uids the last status recorded: what an operator that just started knows of
    the volumes before it has seen them itself."""
    brokers = (body.get("status") or {}).get("brokers") or []
    return {
        int(entry["id"]): str(entry["claimUid"])
        for entry in brokers
        if isinstance(entry, Mapping) and "id" in entry and entry.get("claimUid")
    }


def _reason(conditions: Sequence[Mapping[str, Any]], kind: str) -> str | None:
    for condition in conditions:
        if condition.get("type") == kind:
            return str(condition.get("reason"))
    return None


def _key(body: Mapping[str, Any]) -> tuple[str, str]:
    return body["metadata"]["namespace"], body["metadata"]["name"]
