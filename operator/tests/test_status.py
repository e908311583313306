"""Status conditions (transition times kept like metav1) and the KafkaCluster's status."""

from __future__ import annotations

from strom_operator.reconcile.model import (
    BrokerPod,
    ClusterNames,
    ClusterSpec,
    Condition,
    KafkaState,
    ListenerSpec,
    MetricsSpec,
    ObservedTopic,
    PartitionState,
    Refusal,
    SpecError,
    StorageSpec,
    TemplateSpec,
    TopicSpec,
)
from strom_operator.reconcile.status import (
    Activity,
    cluster_conditions,
    cluster_status,
    merge_conditions,
    topic_conditions,
    topic_status,
)

T0, T1 = "2026-11-23T10:00:00Z", "2026-11-23T11:00:00Z"


def pod(i: int, *, ready: bool = True, claim: bool = True) -> BrokerPod:
    return BrokerPod(i, f"c-broker-{i}", True, ready, False, "r", claim)


STATE = KafkaState(
    "cluster-uuid",
    1,
    frozenset({0, 1, 2}),
    (
        PartitionState("t", 0, (0, 1, 2), (0, 1, 2), 0, 2),
        PartitionState("t", 1, (1, 2, 0), (0, 1, 2), 1, 2),
        PartitionState("t", 2, (2, 0, 1), (0, 1, 2), 1, 2),
    ),
    frozenset(),
)


def by_type(conditions: list[Condition]) -> dict[str, Condition]:
    return {c.type: c for c in conditions}


def test_transition_time_kept_while_the_status_does_not_change() -> None:
    first = merge_conditions([], [Condition("Ready", "False", "BrokerPodNotReady", "a")], T0, 1)
    assert first[0]["lastTransitionTime"] == T0
    same = merge_conditions(first, [Condition("Ready", "False", "RollingRestart", "b")], T1, 2)
    assert same[0]["lastTransitionTime"] == T0
    assert same[0]["reason"] == "RollingRestart" and same[0]["observedGeneration"] == 2
    flipped = merge_conditions(same, [Condition("Ready", "True", "ClusterReady", "c")], T1, 2)
    assert flipped[0]["lastTransitionTime"] == T1


def test_conditions_of_other_types_are_kept() -> None:
    old = [{"type": "Custom", "status": "True", "lastTransitionTime": T0}]
    merged = merge_conditions(old, [Condition("Ready", "True", "ClusterReady", "")], T1, 1)
    assert [c["type"] for c in merged] == ["Ready", "Custom"]


def test_a_healthy_cluster_is_ready() -> None:
    conditions = by_type(
        cluster_conditions(desired_brokers=3, pods=[pod(0), pod(1), pod(2)], state=STATE)
    )
    assert conditions["Ready"].status == "True"
    assert conditions["Reconciling"].status == "False"
    assert conditions["Degraded"].status == "False"


def test_a_lost_pod_makes_the_cluster_degraded() -> None:
    conditions = by_type(
        cluster_conditions(desired_brokers=3, pods=[pod(0), pod(1, ready=False)], state=STATE)
    )
    assert conditions["Degraded"].status == "True"
    assert conditions["Degraded"].reason == "BrokerPodNotReady"
    assert "c-broker-1" in conditions["Degraded"].message
    assert "broker 2" in conditions["Degraded"].message
    assert conditions["Ready"].status == "False"


def test_unreachable_brokers_are_degraded() -> None:
    conditions = by_type(cluster_conditions(desired_brokers=1, pods=[pod(0)], state=None))
    assert (conditions["Degraded"].status, conditions["Degraded"].reason) == (
        "True",
        "BrokersUnreachable",
    )


def test_activities_reconcile_and_refusals_and_spec_errors_take_ready_down() -> None:
    pods = [pod(0), pod(1), pod(2)]
    rolling = by_type(
        cluster_conditions(
            desired_brokers=3,
            pods=pods,
            state=STATE,
            activity=Activity("RollingRestart", "c-broker-0"),
        )
    )
    assert (rolling["Reconciling"].status, rolling["Reconciling"].reason) == (
        "True",
        "RollingRestart",
    )
    assert rolling["Ready"].reason == "RollingRestart"
    refused = by_type(
        cluster_conditions(
            desired_brokers=3,
            pods=pods,
            state=STATE,
            refusal=Refusal("ScaleDownRefused", "lower the replication factor"),
            activity=Activity("Draining", "x"),
        )
    )
    assert (refused["Ready"].status, refused["Ready"].reason) == ("False", "ScaleDownRefused")
    invalid = by_type(
        cluster_conditions(
            desired_brokers=3,
            pods=pods,
            state=STATE,
            spec_error=SpecError("InvalidConfig", "unknown broker config key: foo"),
        )
    )
    assert invalid["Ready"].reason == "InvalidConfig"
    assert "foo" in invalid["Ready"].message


def test_topic_conditions() -> None:
    ok = by_type(topic_conditions([]))
    assert ok["Ready"].status == "True"
    refused = by_type(
        topic_conditions(
            [
                Refusal("PartitionsDecreaseNotSupported", "a"),
                Refusal("ReplicationFactorChangeNotSupported", "b"),
            ],
            changed=True,
        )
    )
    assert refused["Ready"].reason == "PartitionsDecreaseNotSupported"
    assert refused["Ready"].message == "a; b"
    assert refused["Reconciling"].status == "True"
    failed = by_type(topic_conditions([], error=Refusal("BrokersUnreachable", "timeout")))
    assert (failed["Ready"].status, failed["Ready"].reason) == ("False", "BrokersUnreachable")


def test_cluster_status_fields() -> None:
    names = ClusterNames("c", "ns")
    spec = ClusterSpec(
        names=names,
        uid="u",
        generation=4,
        brokers=3,
        controllers=3,
        image="strom:1",
        storage=StorageSpec("1Gi", 2**30, None, False),
        resources={},
        config={},
        listeners=(ListenerSpec("PLAINTEXT", 9092),),
        rack_topology_key=None,
        metrics=MetricsSpec(True, 9404),
        template=TemplateSpec(),
    )
    pods = [
        pod(0),
        pod(1, ready=False, claim=False),
        BrokerPod(2, "c-broker-2", True, True, False, "r", True, "uid-of-claim-2"),
    ]
    status = cluster_status(spec, pods, STATE, [{"type": "Ready"}])
    assert status["observedGeneration"] == 4
    assert status["clusterId"] == "cluster-uuid" and status["controllerId"] == 1
    assert status["bootstrapServers"] == "c-bootstrap.ns.svc:9092"
    assert (status["replicas"], status["readyBrokers"]) == (3, 2)
    assert status["selector"] == names.selector_string
    assert status["brokers"][0] == {
        "id": 0,
        "pod": "c-broker-0",
        "ready": True,
        "leaders": 1,
        "claim": "data-c-broker-0",
    }
    assert status["brokers"][1] == {"id": 1, "pod": "c-broker-1", "ready": False, "leaders": 2}
    # kept in the status so that a restarted operator still sees a replaced volume
    assert status["brokers"][2]["claimUid"] == "uid-of-claim-2"
    unknown = cluster_status(spec, pods, None, [])
    assert "leaders" not in unknown["brokers"][0] and "controllerId" not in unknown


def test_topic_status_fields() -> None:
    spec = TopicSpec("c", "ns", "orders", 6, 3, {}, 7)
    missing = topic_status(spec, None, [])
    assert missing == {"conditions": [], "observedGeneration": 7, "topicName": "orders"}
    found = topic_status(spec, ObservedTopic("orders", "AAAAAAAAAAAAAAAAAAAAAQ", 6, 3, {}), [])
    assert (found["topicId"], found["partitions"]) == ("AAAAAAAAAAAAAAAAAAAAAQ", 6)
