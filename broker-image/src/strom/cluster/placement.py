"""Where a new partition's replicas go: spread over the live brokers, leaders too.

Kafka's striped placement, without racks for now: partition p of a topic gets the
brokers starting at (start + p) in the sorted broker list, so replicas and preferred
leaders are spread evenly; `start` rotates between topics so that small topics do not
all lead on the first broker.
"""

from __future__ import annotations

from collections.abc import Sequence

from strom.cluster import topics


def place(
    brokers: Sequence[int], first_partition: int, count: int, replication_factor: int, start: int
) -> list[tuple[int, ...]]:
    """Replica lists (preferred leader first) for partitions first..first+count-1."""
    if replication_factor > len(brokers):
        raise topics.InvalidReplicationFactorError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{len(brokers)} broker(s) are registered."
        )
    ordered = sorted(brokers)
    size = len(ordered)
    return [
        tuple(ordered[(start + partition + r) % size] for r in range(replication_factor))
        for partition in range(first_partition, first_partition + count)
    ]
