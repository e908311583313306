"""Where a new partition's replicas go: spread over the live brokers, leaders too.

Kafka's striped placement: brokers are put in one order that alternates racks (the
first broker of each rack, then the second of each, ...), and partition p of a topic
gets the brokers starting at (start + p) in that order, so replicas, preferred leaders
and racks are spread evenly; `start` rotates between topics so that small topics do not
all lead on the same broker. With no racks the order is simply by broker id.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from strom.cluster import topics


def rack_alternating(brokers: Sequence[int], racks: Mapping[int, str | None]) -> list[int]:
    """The brokers in an order where consecutive ones are on different racks as far as
    the racks allow (brokers without a rack form one group of their own)."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(brokers):
        by_rack.setdefault(racks.get(broker) or "", []).append(broker)
    groups = [by_rack[rack] for rack in sorted(by_rack)]
    return [
        broker for layer in itertools.zip_longest(*groups) for broker in layer if broker is not None
    ]


def place(
    brokers: Sequence[int],
    first_partition: int,
    count: int,
    replication_factor: int,
    start: int,
    racks: Mapping[int, str | None] | None = None,
) -> list[tuple[int, ...]]:
    """Replica lists (preferred leader first) for partitions first..first+count-1."""
    if replication_factor > len(brokers):
        raise topics.InvalidReplicationFactorError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{len(brokers)} broker(s) are registered."
        )
    ordered = rack_alternating(brokers, racks or {})
    size = len(ordered)
    return [
        tuple(ordered[(start + partition + r) % size] for r in range(replication_factor))
        for partition in range(first_partition, first_partition + count)
    ]
