"""One reconcile of a Topic resource, and its deletion.

The operator manages only the Kafka topics it created for a Topic resource: a resource
owns its topic when its status.topicId is the topic's id. A topic that exists without
that (created with the CLI or by an application) is left alone and the resource says so
(TopicManagedElsewhere), and so is the second of two resources naming the same topic.
Drift (a config or a partition count changed by hand) is undone by the timer: the
resource is the source of truth for what it names; configs it does not name are removed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from strom_operator import cluster_reconciler, events, kafka_admin, metrics
from strom_operator.reconcile import model, spec, status, topics
from strom_operator.runtime import Runtime, now_iso

logger = logging.getLogger(__name__)

KIND = "Topic"


async def reconcile(runtime: Runtime, body: Mapping[str, Any]) -> model.JsonObject:
    """Bring the Kafka topic to the resource and write the resource's status."""
    meta = body["metadata"]
    with metrics.reconcile(KIND) as outcome:
        new_status = await _reconcile(runtime, body, outcome)
        await runtime.kube.patch_status(KIND, meta["namespace"], meta["name"], new_status)
        metrics.record_status(KIND, meta["namespace"], meta["name"], new_status)
        return new_status


async def _reconcile(
    runtime: Runtime, body: Mapping[str, Any], outcome: metrics.Outcome
) -> model.JsonObject:
    old = dict(body.get("status") or {})
    generation = int(body["metadata"].get("generation") or 0)

    def merged(conditions: list[model.Condition]) -> list[model.JsonObject]:
        return status.merge_conditions(
            old.get("conditions") or [], conditions, now_iso(), generation
        )

    def written(conditions: list[model.Condition]) -> model.JsonObject:
        # a failed pass keeps what the last good one saw: topicId is the claim on the topic
        kept = {key: old[key] for key in ("topicName", "topicId", "partitions") if key in old}
        return {**kept, "conditions": merged(conditions), "observedGeneration": generation}

    try:
        topic = spec.parse_topic(body)
    except model.SpecError as error:
        outcome.refused(KIND, error.reason)
        refusal = model.Refusal(error.reason, str(error))
        return written(status.topic_conditions([], error=refusal))

    session = await _session(runtime, topic)
    if isinstance(session, model.Refusal):
        outcome.failed(KIND, session.reason)
        return written(status.topic_conditions([], error=session))
    try:
        observed = await session.observe_topic(topic.topic_name)
        others = await _other_claims(runtime, body, topic)
        owned = observed is not None and old.get("topicId") == observed.topic_id
        if observed is None:
            managed_elsewhere = any(other < _age(body) for other in others.values())
        else:
            managed_elsewhere = not owned or observed.topic_id in others
        brokers = await _broker_count(runtime, topic)
        plan = topics.plan_topic(
            topic, observed, broker_count=brokers, managed_elsewhere=managed_elsewhere
        )
        await _carry_out(body, session, topic, plan)
        if plan.changes:
            observed = await session.observe_topic(topic.topic_name)
    except kafka_admin.AdminError as error:
        reason = error.reason
        outcome.failed(KIND, reason)
        return written(status.topic_conditions([], error=model.Refusal(reason, str(error))))
    if plan.refusals:
        outcome.refused(KIND, plan.refusals[0].reason)
    conditions = status.topic_conditions(plan.refusals, changed=plan.changes)
    return status.topic_status(topic, None if managed_elsewhere else observed, merged(conditions))


async def delete(runtime: Runtime, body: Mapping[str, Any]) -> None:
    """The finalizer's work: delete the Kafka topic this resource owns. Nothing to do
    (the finalizer is released) when the cluster is gone or the topic is not ours."""
    metrics.forget(KIND, body["metadata"]["namespace"], body["metadata"]["name"])
    try:
        topic = spec.parse_topic(body)
    except model.SpecError:
        return
    topic_id = (body.get("status") or {}).get("topicId")
    if not topic_id:
        return
    session = await _session(runtime, topic)
    if isinstance(session, model.Refusal):
        if session.reason == "ClusterNotFound":
            return
        raise kopf.TemporaryError(session.message, delay=runtime.settings.reconcile_interval_s)
    try:
        observed = await session.observe_topic(topic.topic_name)
        if observed is not None and observed.topic_id == topic_id:
            await session.delete_topic(topic.topic_name)
            events.info(body, "TopicDeleted", f"topic {topic.topic_name}")
            metrics.action(KIND, "delete")
    except kafka_admin.AdminError as error:
        raise kopf.TemporaryError(str(error), delay=runtime.settings.reconcile_interval_s) from None


async def _carry_out(
    body: Mapping[str, Any],
    session: kafka_admin.Session,
    topic: model.TopicSpec,
    plan: topics.TopicPlan,
) -> None:
    name = topic.topic_name
    if plan.create is not None:
        await session.create_topic(
            name,
            partitions=plan.create.partitions,
            replication_factor=plan.create.replication_factor,
            configs=plan.create.configs,
        )
        events.info(body, "TopicCreated", f"topic {name}")
        metrics.action(KIND, "create")
        return
    if plan.create_partitions is not None:
        await session.grow_topic(name, plan.create_partitions)
        events.info(body, "PartitionsAdded", f"{name}: {plan.create_partitions}")
        metrics.action(KIND, "grow")
    if plan.set_configs or plan.delete_configs:
        await session.alter_topic_configs(name, plan.set_configs, plan.delete_configs)
        changes = [f"{k}={v}" for k, v in sorted(plan.set_configs.items())]
        changes += [f"-{k}" for k in plan.delete_configs]
        events.info(body, "ConfigChanged", f"{name}: {', '.join(changes)}")
        metrics.action(KIND, "config")


async def _session(runtime: Runtime, topic: model.TopicSpec) -> kafka_admin.Session | model.Refusal:
    cluster = await runtime.kube.get_or_none("KafkaCluster", topic.namespace, topic.cluster)
    if cluster is None:
        return model.Refusal(
            "ClusterNotFound", f"KafkaCluster {topic.cluster} not found in {topic.namespace}"
        )
    names = model.ClusterNames(topic.cluster, topic.namespace)
    bootstrap = await cluster_reconciler.bootstrap_servers(runtime, names)
    if not bootstrap:
        return model.Refusal("BrokersUnreachable", f"no broker pod of {topic.cluster} is ready")
    try:
        return kafka_admin.Session(bootstrap, timeout=runtime.settings.kafka_timeout_s)
    except kafka_admin.AdminError as error:
        return model.Refusal("BrokersUnreachable", str(error))


async def _broker_count(runtime: Runtime, topic: model.TopicSpec) -> int:
    cluster = await runtime.kube.get("KafkaCluster", topic.namespace, topic.cluster)
    return int((cluster.get("spec") or {}).get("brokers") or 1)


async def _other_claims(
    runtime: Runtime, body: Mapping[str, Any], topic: model.TopicSpec
) -> dict[str, tuple[str, str]]:
    """The other Topic resources naming the same topic of the same cluster: each one's
    topicId (or "" while it has none) mapped to its age key."""
    claims: dict[str, tuple[str, str]] = {}
    for other in await runtime.kube.list("Topic", topic.namespace):
        if other["metadata"]["name"] == body["metadata"]["name"]:
            continue
        other_spec = other.get("spec") or {}
        if other_spec.get("cluster") != topic.cluster:
            continue
        if (other_spec.get("topicName") or other["metadata"]["name"]) != topic.topic_name:
            continue
        topic_id = (other.get("status") or {}).get("topicId") or ""
        claims[topic_id] = min(claims.get(topic_id, _age(other)), _age(other))
    return claims


def _age(body: Mapping[str, Any]) -> tuple[str, str]:
    """Older first: by creation time, then by name (kmock sets no creation time)."""
    meta = body["metadata"]
    return str(meta.get("creationTimestamp") or ""), str(meta["name"])
