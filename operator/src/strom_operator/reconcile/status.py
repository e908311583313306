"""Status of the resources: conditions (Ready, Reconciling, Degraded, like Strimzi's), the
KafkaCluster's status fields (brokers, controller, `/scale`'s replicas and selector) and
the Topic's (its id and partitions)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from strom_operator.reconcile.model import (
    BrokerPod,
    ClusterSpec,
    Condition,
    JsonObject,
    KafkaState,
    ObservedTopic,
    Refusal,
    SpecError,
    TopicSpec,
)

READY = "Ready"
RECONCILING = "Reconciling"
DEGRADED = "Degraded"


def merge_conditions(
    old: Sequence[JsonObject], new: Sequence[Condition], now_iso: str, generation: int
) -> list[JsonObject]:
    """The new conditions as JSON, each keeping its old `lastTransitionTime` when its
    status did not change (metav1's SetStatusCondition rule); old conditions of other
    types are kept after them, untouched."""
    old_by_type = {c.get("type"): c for c in old}
    merged: list[JsonObject] = []
    for condition in new:
        entry = condition.as_json(now_iso, generation)
        previous = old_by_type.get(condition.type)
        if (
            previous is not None
            and previous.get("status") == condition.status
            and previous.get("lastTransitionTime")
        ):
            entry["lastTransitionTime"] = previous["lastTransitionTime"]
        merged.append(entry)
    new_types = {c.type for c in new}
    merged.extend(dict(c) for c in old if c.get("type") not in new_types)
    return merged


@dataclasses.dataclass(frozen=True)
class Activity:
    """What the operator is doing to a cluster now: reason RollingRestart, ScalingUp,
    Draining, RebalancingLeaders, ... and a message."""

    reason: str
    message: str


def cluster_conditions(
    *,
    desired_brokers: int,
    pods: Sequence[BrokerPod],
    state: KafkaState | None,
    spec_error: SpecError | None = None,
    refusal: Refusal | None = None,
    activity: Activity | None = None,
) -> list[Condition]:
    """Ready, Reconciling and Degraded for a KafkaCluster.

    Degraded: a broker pod missing or not ready (BrokerPodNotReady), or the brokers
    cannot be asked (BrokersUnreachable). Reconciling: `activity`. Ready is True only
    when the spec can be carried out, nothing is refused, every desired pod is ready,
    the brokers answer and nothing is in progress; otherwise its reason is the first
    of: the spec error's (InvalidConfig, ...), the refusal's (ScaleDownRefused, ...),
    Degraded's, the activity's."""
    by_id = {pod.broker_id: pod for pod in pods}
    not_ready = [
        by_id[i].name if i in by_id else f"broker {i}"
        for i in range(desired_brokers)
        if i not in by_id or not (by_id[i].exists and by_id[i].ready)
    ]
    if not_ready:
        degraded = Condition(
            DEGRADED, "True", "BrokerPodNotReady", "not ready: " + ", ".join(not_ready)
        )
    elif state is None:
        degraded = Condition(
            DEGRADED, "True", "BrokersUnreachable", "the brokers did not answer the operator"
        )
    else:
        degraded = Condition(DEGRADED, "False", "BrokersReady", "every broker pod is ready")
    if activity is not None:
        reconciling = Condition(RECONCILING, "True", activity.reason, activity.message)
    else:
        reconciling = Condition(RECONCILING, "False", "Idle", "nothing in progress")
    if spec_error is not None:
        ready = Condition(READY, "False", spec_error.reason, str(spec_error))
    elif refusal is not None:
        ready = Condition(READY, "False", refusal.reason, refusal.message)
    elif degraded.status == "True":
        ready = Condition(READY, "False", degraded.reason, degraded.message)
    elif activity is not None:
        ready = Condition(READY, "False", activity.reason, activity.message)
    else:
        ready = Condition(READY, "True", "ClusterReady", f"{desired_brokers} broker(s) ready")
    return [ready, reconciling, degraded]


def topic_conditions(
    refusals: Sequence[Refusal], *, error: Refusal | None = None, changed: bool = False
) -> list[Condition]:
    """Ready and Reconciling for a Topic. `error`: the brokers refused or could not be
    asked (reason and message from the failure); `changed`: this pass changed the topic.
    Ready is False with the first refusal's reason, every refusal's message joined."""
    if error is not None:
        ready = Condition(READY, "False", error.reason, error.message)
    elif refusals:
        ready = Condition(
            READY, "False", refusals[0].reason, "; ".join(r.message for r in refusals)
        )
    else:
        ready = Condition(READY, "True", "TopicSynced", "the topic matches its resource")
    if changed:
        reconciling = Condition(RECONCILING, "True", "TopicUpdated", "the topic was changed")
    else:
        reconciling = Condition(RECONCILING, "False", "Idle", "nothing in progress")
    return [ready, reconciling]


def cluster_status(
    spec: ClusterSpec,
    pods: Sequence[BrokerPod],
    state: KafkaState | None,
    conditions: list[JsonObject],
) -> JsonObject:
    """The KafkaCluster's status object. `replicas` (the `/scale` subresource's current
    count) counts existing broker pods; `leaders` is left out while the brokers cannot
    be asked, `claim` and `claimUid` while the broker's PVC does not exist."""
    names = spec.names
    brokers: list[JsonObject] = []
    for pod in sorted(pods, key=lambda p: p.broker_id):
        entry: JsonObject = {
            "id": pod.broker_id,
            "pod": pod.name,
            "ready": pod.exists and pod.ready,
        }
        if state is not None:
            entry["leaders"] = state.leaders_of(pod.broker_id)
        if pod.claim_exists:
            entry["claim"] = names.claim(pod.broker_id)
            if pod.claim_uid is not None:
                # remembered across operator restarts: a PVC with another uid later means
                # this broker's volume was lost (cluster_reconciler evacuates it)
                entry["claimUid"] = pod.claim_uid
        brokers.append(entry)
    status: JsonObject = {
        "conditions": conditions,
        "observedGeneration": spec.generation,
        "bootstrapServers": names.bootstrap_dns,
        "replicas": sum(1 for pod in pods if pod.exists),
        "readyBrokers": sum(1 for pod in pods if pod.exists and pod.ready),
        "selector": names.selector_string,
        "brokers": brokers,
    }
    if state is not None and state.cluster_id is not None:
        status["clusterId"] = state.cluster_id
    if state is not None and state.controller_id is not None:
        status["controllerId"] = state.controller_id
    return status


def topic_status(
    spec: TopicSpec, observed: ObservedTopic | None, conditions: list[JsonObject]
) -> JsonObject:
    """The Topic's status object: `topicId` and `partitions` as the brokers report them
    (left out while the topic does not exist)."""
    status: JsonObject = {
        "conditions": conditions,
        "observedGeneration": spec.generation,
        "topicName": spec.topic_name,
    }
    if observed is not None:
        status["topicId"] = observed.topic_id
        status["partitions"] = observed.partitions
    return status
