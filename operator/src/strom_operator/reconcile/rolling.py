"""The rolling restart's next step: which broker pod may be deleted now, if any.

Strimzi's KafkaRoller rules: one pod at a time, the active controller last, a pod only
when the cluster has recovered from the previous restart (every pod ready, every live
replica back in its ISR, no reassignment moving data), and never a pod whose restart
would take a partition below `min.insync.replicas` (KafkaAvailability).
"""

from __future__ import annotations

from collections.abc import Sequence

from strom_operator.reconcile.model import (
    BrokerPod,
    Done,
    KafkaState,
    PartitionState,
    Restart,
    RollDecision,
    Wait,
)


def _describe(partition: PartitionState) -> str:
    isr = ",".join(str(b) for b in partition.isr)
    replicas = ",".join(str(b) for b in partition.replicas)
    return (
        f"{partition.topic}-{partition.partition} (ISR [{isr}] of replicas [{replicas}], "
        f"min.insync.replicas {partition.min_isr})"
    )


def restart_blockers(broker_id: int, state: KafkaState) -> list[str]:
    """Why restarting `broker_id` now would hurt a partition's availability (empty: it
    would not), one line per partition naming its ISR and min ISR.

    Strimzi's KafkaAvailability.wouldAffectAvailability, case by case:
    - RF <= min.insync.replicas: never a blocker. The partition drops below its min ISR
      whenever any replica restarts, so blocking would stall the roll for ever; Strimzi
      only logs it.
    - ISR already below min ISR: a blocker if the broker holds a replica at all, in the
      ISR or not (in it: the restart would stop the partition for consumers too; out of
      it: it may be the first replica to catch up).
    - ISR exactly at min ISR: a blocker if the broker is in the ISR.
    - Otherwise (spare in-sync replicas, or the broker holds no replica): no blocker.
    """
    blockers: list[str] = []
    for partition in sorted(state.partitions, key=lambda p: p.key):
        if broker_id not in partition.replicas:
            continue
        if len(partition.replicas) <= partition.min_isr:
            continue
        if len(partition.isr) < partition.min_isr:
            blockers.append(
                f"{_describe(partition)} is already below its min ISR and broker "
                f"{broker_id} has a replica"
            )
        elif len(partition.isr) == partition.min_isr and broker_id in partition.isr:
            blockers.append(
                f"{_describe(partition)} would fall below its min ISR without broker {broker_id}"
            )
    return blockers


def _roll_order(pods: Sequence[BrokerPod], controller_id: int | None) -> list[BrokerPod]:
    """Brokers by id, the active controller last (restarting it forces a quorum
    election, so it goes once, at the end, like KafkaRoller)."""
    return sorted(pods, key=lambda pod: (pod.broker_id == controller_id, pod.broker_id))


def _recovering(state: KafkaState, pods: Sequence[BrokerPod]) -> str | None:
    """Why the cluster has not recovered from the last restart yet (None: it has)."""
    for pod in sorted(pods, key=lambda p: p.broker_id):
        if pod.broker_id not in state.live_brokers:
            return f"broker {pod.broker_id} is not registered with the controller yet"
    if state.reassigning:
        first = min(state.reassigning)
        return (
            f"{len(state.reassigning)} partition reassignment(s) in progress "
            f"({first.topic}-{first.partition}, ...)"
        )
    for partition in sorted(state.partitions, key=lambda p: p.key):
        lagging = sorted(
            b for b in partition.replicas if b in state.live_brokers and b not in partition.isr
        )
        if lagging:
            return f"broker {lagging[0]} is not back in the ISR of {_describe(partition)}"
    return None


def next_restart(
    pods: Sequence[BrokerPod], target_revision: str, state: KafkaState | None
) -> RollDecision:
    """The next step of a rolling restart towards `target_revision` (the StatefulSet's
    update revision). Call again after each step: one pod per decision.

    Pods stuck on an old revision and not ready (a bad config, a crash loop) are
    restarted before anything else, as Strimzi restarts stuck pods: they serve nothing,
    and only the new template can unstick them. Without the brokers' view (`state` None)
    that is done only when no pod is ready at all (a cluster that never came up: every
    stale pod is restarted, one decision after the other); otherwise Wait, since the
    min-ISR rule cannot be checked."""
    stale = [pod for pod in pods if pod.revision != target_revision]
    if not stale:
        return Done()
    deleting = sorted(pod.name for pod in pods if pod.deleting)
    if deleting:
        return Wait(f"pod {deleting[0]} is being deleted")
    controller_id = state.controller_id if state is not None else None
    stuck = [pod for pod in _roll_order(stale, controller_id) if pod.exists and not pod.ready]
    if state is None:
        if stuck and not any(pod.ready for pod in pods):
            pod = stuck[0]
            return Restart(pod.broker_id, f"no broker pod is ready; {pod.name} is stale")
        return Wait("the brokers cannot be asked whether a restart is safe")
    for pod in stuck:
        if not restart_blockers(pod.broker_id, state):
            return Restart(pod.broker_id, f"{pod.name} is not ready on an old revision")
    not_ready = sorted(pod.name for pod in pods if not (pod.exists and pod.ready))
    if not_ready:
        return Wait(f"pod {not_ready[0]} is not ready")
    recovering = _recovering(state, pods)
    if recovering is not None:
        return Wait(recovering)
    blocked: list[str] = []
    for pod in _roll_order(stale, controller_id):
        blockers = restart_blockers(pod.broker_id, state)
        if not blockers:
            return Restart(
                pod.broker_id, f"{pod.name} runs revision {pod.revision}, not {target_revision}"
            )
        blocked.append(f"{pod.name}: {blockers[0]}")
    return Wait("no stale pod can restart safely: " + "; ".join(blocked))
