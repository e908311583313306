"""Topic plans: create, grow, reconfigure, bring drift back, refuse what Kafka cannot do."""

from __future__ import annotations

from strom_operator.reconcile.model import ObservedTopic, TopicSpec
from strom_operator.reconcile.topics import CreateTopic, TopicPlan, plan_topic


def spec(
    partitions: int | None = 6, rf: int | None = 3, config: dict[str, str] | None = None
) -> TopicSpec:
    return TopicSpec("c", "ns", "orders", partitions, rf, config or {}, 1)


def observed(
    partitions: int = 6, rf: int = 3, overrides: dict[str, str] | None = None
) -> ObservedTopic:
    return ObservedTopic("orders", "id-1", partitions, rf, overrides or {})


def reasons(plan: TopicPlan) -> list[str]:
    return [r.reason for r in plan.refusals]


def test_a_missing_topic_is_created_as_its_spec_says() -> None:
    plan = plan_topic(
        spec(config={"retention.ms": "1000"}), None, broker_count=3, managed_elsewhere=False
    )
    assert plan.create == CreateTopic(6, 3, {"retention.ms": "1000"})
    assert plan.refusals == ()
    # defaults left to the brokers
    unset = plan_topic(spec(None, None), None, broker_count=1, managed_elsewhere=False)
    assert unset.create == CreateTopic(None, None, {})


def test_a_topic_in_sync_needs_nothing() -> None:
    plan = plan_topic(
        spec(config={"retention.ms": "604800000", "cleanup.policy": "compact,delete"}),
        observed(overrides={"retention.ms": "604800000", "cleanup.policy": "compact,delete"}),
        broker_count=3,
        managed_elsewhere=False,
    )
    assert plan == TopicPlan()
    assert not plan.changes


def test_values_compare_as_the_broker_renders_them() -> None:
    plan = plan_topic(
        spec(
            config={
                "min.cleanable.dirty.ratio": "0.50",
                "cleanup.policy": "compact, delete",
                "retention.ms": "+604800000",
            }
        ),
        observed(
            overrides={
                "min.cleanable.dirty.ratio": "0.5",
                "cleanup.policy": "compact,delete",
                "retention.ms": "604800000",
            }
        ),
        broker_count=3,
        managed_elsewhere=False,
    )
    assert plan.set_configs == {}


def test_more_partitions_grow_the_topic() -> None:
    plan = plan_topic(spec(partitions=12), observed(), broker_count=3, managed_elsewhere=False)
    assert plan.create_partitions == 12 and plan.refusals == ()


def test_fewer_partitions_are_refused_and_configs_still_synced() -> None:
    plan = plan_topic(
        spec(partitions=3, config={"retention.ms": "1000"}),
        observed(),
        broker_count=3,
        managed_elsewhere=False,
    )
    assert reasons(plan) == ["PartitionsDecreaseNotSupported"]
    assert "6 partitions" in plan.refusals[0].message
    assert plan.create_partitions is None
    assert plan.set_configs == {"retention.ms": "1000"}


def test_drift_made_by_hand_is_brought_back() -> None:
    # someone changed retention.ms and added segment.ms with the CLI
    plan = plan_topic(
        spec(config={"retention.ms": "1000"}),
        observed(overrides={"retention.ms": "5000", "segment.ms": "60000"}),
        broker_count=3,
        managed_elsewhere=False,
    )
    assert plan.set_configs == {"retention.ms": "1000"}
    assert plan.delete_configs == ("segment.ms",)


def test_a_replication_factor_change_is_refused_with_the_way_out() -> None:
    plan = plan_topic(spec(rf=2, partitions=8), observed(), broker_count=3, managed_elsewhere=False)
    assert reasons(plan) == ["ReplicationFactorChangeNotSupported"]
    assert "reassignment" in plan.refusals[0].message
    assert plan.create_partitions == 8


def test_a_replication_factor_above_the_brokers_is_refused() -> None:
    create = plan_topic(spec(rf=4), None, broker_count=3, managed_elsewhere=False)
    assert create.create is None
    assert reasons(create) == ["ReplicationFactorTooHigh"]
    assert "3 broker(s)" in create.refusals[0].message
    existing = plan_topic(
        spec(rf=4, config={"retention.ms": "1"}),
        observed(),
        broker_count=3,
        managed_elsewhere=False,
    )
    assert reasons(existing) == ["ReplicationFactorTooHigh"]
    assert existing.set_configs == {"retention.ms": "1"}


def test_a_topic_managed_elsewhere_is_left_alone() -> None:
    plan = plan_topic(
        spec(partitions=12, config={"retention.ms": "1"}),
        observed(),
        broker_count=3,
        managed_elsewhere=True,
    )
    assert not plan.changes
    assert reasons(plan) == ["TopicManagedElsewhere"]
