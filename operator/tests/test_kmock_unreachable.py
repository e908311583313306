"""Brokers the operator cannot reach are a status condition, not a crash: the cluster is
Degraded (BrokersUnreachable, with the client's reason) and a Topic is not Ready."""

from __future__ import annotations

import pytest
import strom_process
from operator_tier import broker_pod, cluster_body, topic_body, wait_condition
from strom_operator import k8s, settings


@pytest.fixture
def bootstrap_servers() -> str:
    return f"127.0.0.1:{strom_process.free_port()}"  # nothing listens there


async def test_unreachable_brokers_are_reported(
    operator: settings.OperatorSettings, kube: k8s.Client
) -> None:
    await kube.create(cluster_body("gone"))
    await kube.create(broker_pod("gone", 0))
    await kube.create(topic_body("lost", "gone", partitions=1))

    degraded = await wait_condition(kube, "KafkaCluster", "gone", "Degraded", "True", "no broker")
    assert degraded["reason"] == "BrokersUnreachable"
    assert operator.bootstrap_servers is not None
    assert operator.bootstrap_servers in degraded["message"]
    # the owned objects are there all the same: they do not need the brokers
    assert await kube.get("StatefulSet", "strom-test", "gone-broker")

    ready = await wait_condition(kube, "Topic", "lost", "Ready", "False", "no broker")
    assert ready["reason"] == "BrokersUnreachable"
