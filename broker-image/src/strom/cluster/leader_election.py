"""Partition leaders as brokers come and go: the controller's elections from the ISR.

Kafka's rule (PartitionChangeBuilder, clean elections only): when a broker is fenced (its
session expired, or it shut down) or enters a controlled shutdown, it leaves every ISR it
is in, unless it is the last member, and each partition it led gets the first active
replica of the remaining ISR as its leader; with none, the partition has no leader (-1,
offline) and keeps its last ISR member, so that when that broker is unfenced again it
leads again and nothing acknowledged is lost. An active broker is registered, unfenced
and not in a controlled shutdown: only those lead.

Elections asked for (ElectLeaders) and the automatic leader rebalance are here too:
preferred elections give a partition back to its first replica when that one is active
and in sync; unclean ones give a partition without a leader any active replica.

Pure functions of the image, returning PartitionChangeRecords for the controller to commit.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence, Set

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from strom.cluster import image as images
from strom.cluster import records

log = logging.getLogger(__name__)

NO_LEADER = -1
UNCHANGED = -2  # a PartitionChangeRecord's leader when it stays


Unclean = Callable[[images.TopicImage], bool]


def _never(topic: images.TopicImage) -> bool:
    return False


def after_fencing(
    image: images.MetadataImage, fenced: Set[int], unclean: Unclean = _never
) -> list[records.PartitionChangeRecord]:
    """The changes once the brokers ``fenced`` are fenced. Where ``unclean(topic)``
    (unclean.leader.election.enable) and no in-sync replica is left, the first live
    replica leads instead, alone in the ISR: available again, at the cost of what it had
    not replicated."""

    def live(node_id: int) -> bool:
        return node_id not in fenced and image.is_active_broker(node_id)

    changes = []
    for topic, partition in _partitions(image):
        if partition.leader not in fenced and fenced.isdisjoint(partition.isr):
            continue
        isr = tuple(r for r in partition.isr if r not in fenced) or partition.isr
        leader = partition.leader
        if leader in fenced:
            candidates = [r for r in partition.replicas if r in isr and live(r)]
            leader = candidates[0] if candidates else NO_LEADER
            if leader == NO_LEADER and unclean(topic):
                anyone = [r for r in partition.replicas if live(r)]
                if anyone:
                    leader, isr = anyone[0], (anyone[0],)
        if isr != partition.isr or leader != partition.leader:
            changes.append(_change(topic, partition, isr, leader))
    return changes


def after_unfencing(
    image: images.MetadataImage, unfenced: int, unclean: Unclean = _never
) -> list[records.PartitionChangeRecord]:
    """The changes once ``unfenced`` is unfenced: the partitions without a leader whose
    ISR names it get it back as their leader (with ``unclean(topic)``, any replica)."""
    changes = []
    for topic, partition in _partitions(image):
        if partition.leader != NO_LEADER or unfenced not in partition.replicas:
            continue
        if unfenced in partition.isr:
            changes.append(_change(topic, partition, partition.isr, unfenced))
        elif unclean(topic):
            changes.append(_change(topic, partition, (unfenced,), unfenced))
    return changes


def leads_with_alternative(image: images.MetadataImage, node_id: int) -> bool:
    """`node_id` leads a partition that another active in-sync replica could lead: a
    broker in controlled shutdown may not go yet (Kafka: it still has leaderships)."""
    return any(
        partition.leader == node_id
        and any(r != node_id and image.is_active_broker(r) for r in partition.isr)
        for _, partition in _partitions(image)
    )


class ElectionType(enum.IntEnum):
    """ElectLeaders' election_type (Kafka's ElectionType)."""

    PREFERRED = 0
    UNCLEAN = 1


def elect(
    image: images.MetadataImage,
    topic: images.TopicImage,
    partition: images.PartitionImage,
    election: ElectionType,
) -> tuple[ErrorCode, records.PartitionChangeRecord | None]:
    """One partition's election as ElectLeaders asks for it (ReplicationControlManager
    .electLeader): ELECTION_NOT_NEEDED when the preferred replica leads already (a
    partition with a leader, for an unclean one); PREFERRED_LEADER_NOT_AVAILABLE or
    ELIGIBLE_LEADERS_NOT_AVAILABLE when nothing would change."""
    preferred = partition.replicas[0]
    if election == ElectionType.PREFERRED and partition.leader == preferred:
        return ErrorCode.election_not_needed, None
    if election == ElectionType.UNCLEAN and partition.leader != NO_LEADER:
        return ErrorCode.election_not_needed, None

    def valid(node_id: int) -> bool:
        return node_id in partition.isr and image.is_active_broker(node_id)

    leader, isr = NO_LEADER, partition.isr
    if election == ElectionType.PREFERRED:
        # the preferred replica, else the current leader, else another in-sync one
        order = [preferred, partition.leader, *partition.replicas[1:]]
        leader = next((r for r in order if valid(r)), NO_LEADER)
    else:
        leader = next((r for r in partition.replicas if valid(r)), NO_LEADER)
        if leader == NO_LEADER:
            anyone = [r for r in partition.replicas if image.is_active_broker(r)]
            if anyone:
                leader, isr = anyone[0], (anyone[0],)
    if leader == partition.leader:
        if election == ElectionType.PREFERRED:
            return ErrorCode.preferred_leader_not_available, None
        return ErrorCode.eligible_leaders_not_available, None
    return ErrorCode.none, _change(topic, partition, isr, leader)


def elect_many(
    image: images.MetadataImage,
    election: ElectionType,
    wanted: Mapping[str, Sequence[int]] | None,
) -> tuple[dict[str, dict[int, ErrorCode]], list[records.PartitionChangeRecord]]:
    """ElectLeaders' outcomes per topic and partition, and the changes to commit.
    ``wanted`` None: every partition, leaving out those whose election is not needed
    (as Kafka's controller answers it)."""
    outcomes: dict[str, dict[int, ErrorCode]] = {}
    changes: list[records.PartitionChangeRecord] = []
    if wanted is None:
        wanted = {name: sorted(topic.partitions) for name, topic in image.topics.items()}
        skipped = {ErrorCode.election_not_needed}
    else:
        skipped = set()
    for name, indexes in wanted.items():
        results = outcomes.setdefault(name, {})
        topic = image.topics.get(name)
        for index in indexes:
            partition = topic.partitions.get(index) if topic is not None else None
            if topic is None or partition is None:
                results[index] = ErrorCode.unknown_topic_or_partition
                continue
            code, change = elect(image, topic, partition, election)
            if code not in skipped:
                results[index] = code
            if change is not None:
                changes.append(change)
    return outcomes, changes


def rebalance(
    image: images.MetadataImage, imbalance_percentage: int
) -> list[records.PartitionChangeRecord]:
    """auto.leader.rebalance.enable's preferred elections (Kafka's ZooKeeper controller's
    checkAndTriggerAutoLeaderRebalance): for every broker whose share of the partitions it
    is the preferred replica of, but does not lead, is above
    leader.imbalance.per.broker.percentage, those partitions go back to it where it is
    active and in sync."""
    preferred_of: dict[int, list[tuple[images.TopicImage, images.PartitionImage]]] = {}
    for topic, partition in _partitions(image):
        preferred_of.setdefault(partition.replicas[0], []).append((topic, partition))
    changes: list[records.PartitionChangeRecord] = []
    for node_id, owned in sorted(preferred_of.items()):
        elsewhere = [(t, p) for t, p in owned if p.leader != node_id]
        if len(elsewhere) * 100 <= imbalance_percentage * len(owned):
            continue
        if not image.is_active_broker(node_id):
            continue
        changes.extend(_change(t, p, p.isr, node_id) for t, p in elsewhere if node_id in p.isr)
    return changes


def _partitions(
    image: images.MetadataImage,
) -> Iterator[tuple[images.TopicImage, images.PartitionImage]]:
    for topic in image.topics.values():
        for index in sorted(topic.partitions):
            yield topic, topic.partitions[index]


def _change(
    topic: images.TopicImage,
    partition: images.PartitionImage,
    isr: tuple[int, ...],
    leader: int,
) -> records.PartitionChangeRecord:
    return records.PartitionChangeRecord(
        partition_id=i32(partition.index),
        topic_id=topic.topic_id,
        isr=None if isr == partition.isr else tuple(i32(r) for r in isr),
        leader=i32(UNCHANGED if leader == partition.leader else leader),
    )


def for_broker_changes(
    image: images.MetadataImage,
    changes: Sequence[records.MetadataRecord],
    leaving: Set[int],
    unclean: Unclean = _never,
) -> list[records.PartitionChangeRecord]:
    """The elections that brokers fenced or unfenced by ``changes``, or ``leaving`` in a
    controlled shutdown, call for. With no other active broker nothing can be elected: a
    single node that stops keeps its leaderships rather than writing every partition
    offline and back. Topics where ``unclean`` allowed an unclean choice are warned of."""
    fenced = {int(c.id) for c in changes if isinstance(c, records.FenceBrokerRecord)} | leaving
    others = [b for b in image.brokers.values() if b.is_active and b.node_id not in fenced]
    allowed: dict[str, bool] = {}

    def remembered(topic: images.TopicImage) -> bool:
        if topic.name not in allowed:
            allowed[topic.name] = unclean(topic)
        return allowed[topic.name]

    elected = []
    if fenced and others:
        elected = after_fencing(image, fenced, remembered)
    for change in changes:
        if isinstance(change, records.UnfenceBrokerRecord):
            elected += after_unfencing(image, int(change.id), remembered)
    for name in sorted(name for name, yes in allowed.items() if yes):
        log.warning(
            "unclean leader election allowed for %s: a replica that was not in sync may"
            " lead, and the records it had not replicated are lost",
            name,
        )
    return elected
