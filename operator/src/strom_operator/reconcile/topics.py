"""A Topic resource against the topic the brokers have: what to create, grow or
reconfigure, and what cannot be done.

The resource is the source of truth: a config override set on the topic by hand (with
the CLI, say) but absent from the resource is deleted, and a value changed by hand is
set back (drift). A refusal stops only the change it names; whatever else is safe is
still planned: configs are synced and partitions grown even when a partition decrease
or a replication factor change is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from strom.config import definitions

from strom_operator.reconcile.model import ObservedTopic, Refusal, TopicSpec


@dataclasses.dataclass(frozen=True)
class CreateTopic:
    partitions: int | None  # None: the brokers' num.partitions
    replication_factor: int | None  # None: the brokers' default.replication.factor
    configs: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class TopicPlan:
    """What to do for one Topic resource, in this order: create, or grow and
    reconfigure; `refusals` go to the status (empty plan and no refusal: in sync)."""

    create: CreateTopic | None = None
    create_partitions: int | None = None  # grow the topic to this many partitions
    set_configs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    delete_configs: tuple[str, ...] = ()
    refusals: tuple[Refusal, ...] = ()

    @property
    def changes(self) -> bool:
        return bool(
            self.create or self.create_partitions or self.set_configs or self.delete_configs
        )


def rendered(name: str, value: str) -> str:
    """A topic config value as the broker renders it (DescribeConfigs), so that "1.0" and
    "1", " delete, compact" and "delete,compact" compare equal; a value the broker would
    refuse stays as written (the broker's refusal then names it)."""
    definition = definitions.TOPIC_CONFIGS.get(name)
    if definition is None:
        return value
    try:
        parsed = definition.parse(value)
    except definitions.ConfigError:
        return value
    return definitions.render(definition, parsed) or value


def plan_topic(
    spec: TopicSpec, observed: ObservedTopic | None, *, broker_count: int, managed_elsewhere: bool
) -> TopicPlan:
    """The plan for `spec` given the topic as the brokers describe it (None: no such
    topic). `managed_elsewhere`: the topic exists but belongs to someone else (created
    outside the operator, or claimed by another Topic resource): left alone, refused."""
    name = spec.topic_name
    if managed_elsewhere:
        return TopicPlan(
            refusals=(
                Refusal(
                    "TopicManagedElsewhere",
                    f"topic {name} was not created by this resource; the operator leaves it alone",
                ),
            )
        )
    rf = spec.replication_factor
    if rf is not None and rf > broker_count:
        too_high = Refusal(
            "ReplicationFactorTooHigh",
            f"replicationFactor {rf} is above the {broker_count} broker(s) of cluster "
            f"{spec.cluster}",
        )
        if observed is None:
            return TopicPlan(refusals=(too_high,))
        refusals: list[Refusal] = [too_high]
    else:
        refusals = []
    if observed is None:
        return TopicPlan(create=CreateTopic(spec.partitions, rf, dict(spec.config)))
    grow_to: int | None = None
    if spec.partitions is not None and spec.partitions < observed.partitions:
        refusals.append(
            Refusal(
                "PartitionsDecreaseNotSupported",
                f"topic {name} has {observed.partitions} partitions and Kafka cannot remove "
                f"partitions; set partitions to {observed.partitions} or more",
            )
        )
    elif spec.partitions is not None and spec.partitions > observed.partitions:
        grow_to = spec.partitions
    if rf is not None and rf != observed.replication_factor and rf <= broker_count:
        refusals.append(
            Refusal(
                "ReplicationFactorChangeNotSupported",
                f"topic {name} has replication factor {observed.replication_factor}, not "
                f"{rf}: changing it needs a partition reassignment, which the operator "
                f"does not do for topics",
            )
        )
    set_configs = {
        key: value
        for key, value in sorted(spec.config.items())
        if key not in observed.overrides
        or rendered(key, observed.overrides[key]) != rendered(key, value)
    }
    delete_configs = tuple(sorted(key for key in observed.overrides if key not in spec.config))
    return TopicPlan(
        create_partitions=grow_to,
        set_configs=set_configs,
        delete_configs=delete_configs,
        refusals=tuple(refusals),
    )
