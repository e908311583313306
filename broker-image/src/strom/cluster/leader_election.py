"""Partition leaders as brokers come and go: the controller's elections from the ISR.

Kafka's rule (PartitionChangeBuilder, clean elections only): when a broker is fenced (its
session expired, or it shut down), it leaves every ISR it is in, unless it is the last
member, and each partition it led gets the first live replica of the remaining ISR as its
leader; with none, the partition has no leader (-1, offline) and keeps its last ISR member,
so that when that broker is unfenced again it leads again and nothing acknowledged is lost.
Pure functions of the image, returning PartitionChangeRecords for the controller to commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Set

from kio.static.primitive import i32

from strom.cluster import image as images
from strom.cluster import records

NO_LEADER = -1
_UNCHANGED = -2


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
        broker = image.brokers.get(node_id)
        return node_id not in fenced and broker is not None and not broker.fenced

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
        leader=i32(_UNCHANGED if leader == partition.leader else leader),
    )
