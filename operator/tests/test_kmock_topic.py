"""Topic resources reconciled by the real operator on kmock against a real broker: the
Kafka topic created, grown, a decrease refused, a config changed by hand brought back,
deletion through the finalizer, and a second resource naming the same topic refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import strom_process
from operator_tier import (
    NAMESPACE,
    broker_pod,
    cluster_body,
    eventually,
    topic_body,
    wait_condition,
)
from strom.client import admin
from strom_operator import k8s, metrics, settings
from strom_operator.reconcile import model


@pytest.fixture
async def kafka(broker: strom_process.StromProcess) -> AsyncIterator[admin.AsyncAdmin]:
    yield admin.AsyncAdmin(broker.bootstrap, timeout=10)


@pytest.fixture
async def cluster(operator: settings.OperatorSettings, kube: k8s.Client) -> str:
    await kube.create(cluster_body("tc"))
    await kube.create(broker_pod("tc", 0))
    return "tc"


async def partitions_of(kafka: admin.AsyncAdmin, name: str) -> int:
    if name not in await kafka.topic_names():
        return 0
    return len((await kafka.describe_topics([name]))[name].partitions)


async def test_topic_lifecycle(kube: k8s.Client, kafka: admin.AsyncAdmin, cluster: str) -> None:
    await kube.create(
        topic_body(
            "orders", cluster, partitions=2, replicationFactor=1, config={"retention.ms": "60000"}
        )
    )

    async def created() -> int:
        return await partitions_of(kafka, "orders")

    assert await eventually(created, "the Kafka topic in Metadata") == 2
    status = await eventually(lambda: _status_with(kube, "orders", "topicId"), "status.topicId")
    assert status["topicName"] == "orders"
    assert status["partitions"] == 2

    # grow
    await kube.merge_patch("Topic", NAMESPACE, "orders", {"spec": {"partitions": 3}})

    async def grown() -> bool:
        return await partitions_of(kafka, "orders") == 3

    await eventually(grown, "the topic grown to 3 partitions")

    # a decrease is refused in status, the topic keeps its partitions
    await kube.merge_patch("Topic", NAMESPACE, "orders", {"spec": {"partitions": 1}})

    ready = await wait_condition(
        kube, "Topic", "orders", "Ready", "False", "Ready False after a decrease"
    )
    assert ready["reason"] == "PartitionsDecreaseNotSupported"
    assert await partitions_of(kafka, "orders") == 3

    async def ready_gauge_is(value: float | None) -> bool:
        labels = {"kind": "Topic", "namespace": NAMESPACE, "name": "orders", "type": "Ready"}
        return metrics.REGISTRY.get_sample_value("strom_operator_conditions", labels) == value

    await eventually(lambda: ready_gauge_is(0), "strom_operator_conditions Ready 0")
    await kube.merge_patch("Topic", NAMESPACE, "orders", {"spec": {"partitions": 3}})

    # drift: a config changed by hand (as strom-configs --alter would) is brought back
    await kafka.alter_configs("topic", "orders", {"retention.ms": "1000"}, [])

    async def restored() -> bool:
        entries = (await kafka.topic_configs(["orders"]))["orders"]
        return any(e.name == "retention.ms" and e.value == "60000" for e in entries)

    await eventually(restored, "retention.ms back to 60000 by the drift timer")

    # deletion: the finalizer deletes the Kafka topic, then releases the resource
    await kube.delete("Topic", NAMESPACE, "orders")

    async def gone() -> bool:
        return (
            "orders" not in await kafka.topic_names()
            and await kube.get_or_none("Topic", NAMESPACE, "orders") is None
        )

    await eventually(gone, "the Kafka topic and the resource deleted")
    assert await ready_gauge_is(None)  # a deleted resource's series go


async def test_second_resource_for_the_same_topic_is_refused(
    kube: k8s.Client, kafka: admin.AsyncAdmin, cluster: str
) -> None:
    await kube.create(topic_body("first", cluster, topicName="shared", partitions=1))
    await eventually(lambda: _status_with(kube, "first", "topicId"), "the first one's topicId")
    await kube.create(topic_body("second", cluster, topicName="shared", partitions=4))

    ready = await wait_condition(
        kube, "Topic", "second", "Ready", "False", "the second resource refused"
    )
    assert ready["reason"] == "TopicManagedElsewhere"
    assert await partitions_of(kafka, "shared") == 1


async def test_topic_created_outside_the_operator_is_left_alone(
    kube: k8s.Client, kafka: admin.AsyncAdmin, cluster: str
) -> None:
    await kafka.create_topic("handmade", partitions=1, replication_factor=1)
    await kube.create(topic_body("handmade", cluster, partitions=3))

    ready = await wait_condition(
        kube, "Topic", "handmade", "Ready", "False", "the resource refused"
    )
    assert ready["reason"] == "TopicManagedElsewhere"
    assert await partitions_of(kafka, "handmade") == 1


async def _status_with(kube: k8s.Client, name: str, field: str) -> model.JsonObject | None:
    status = (await kube.get("Topic", NAMESPACE, name)).get("status") or {}
    return status if status.get(field) else None


async def test_replication_factor_above_the_brokers_is_refused_in_status(
    kube: k8s.Client, kafka: admin.AsyncAdmin, cluster: str
) -> None:
    """The schema cannot know the cluster's size: a Topic asking for more replicas than
    the KafkaCluster has brokers is Ready False with the reason, and no topic is made."""
    await kube.create(topic_body("too-wide", cluster, partitions=1, replicationFactor=3))
    refused = await wait_condition(kube, "Topic", "too-wide", "Ready", "False", "RF refused")
    assert refused["reason"] == "ReplicationFactorTooHigh"
    assert "3" in refused["message"] and "1" in refused["message"]
    assert "too-wide" not in await kafka.topic_names()
