"""Which consumer groups this broker coordinates, following the metadata.

A group is coordinated by the leader of the `__consumer_offsets` partition that holds it
(Kafka's rule). When the leadership of such a partition comes to this broker, its groups
are rebuilt from the local replica's log (everything a follower copied); when it moves
away, they are dropped here and their members find the new coordinator
(NOT_COORDINATOR). A deleted topic's committed offsets go with it.
"""

from __future__ import annotations

import logging

from strom.clock import Clock
from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import topics
from strom.coordinator import groups as group_coordinator

log = logging.getLogger(__name__)


def offsets_partitions_led(image: images.MetadataImage, node_id: int) -> set[int]:
    topic = image.topics.get(topics.OFFSETS_TOPIC)
    if topic is None:
        return set()
    return {index for index, p in topic.partitions.items() if p.leader == node_id}


class GroupPlacement:
    """Metadata publisher: loads and unloads groups as offsets leaderships move."""

    name = "group coordinator"

    def __init__(
        self,
        groups: group_coordinator.GroupCoordinator,
        node_id: int,
        clock: Clock,
    ) -> None:
        self._groups = groups
        self._node_id = node_id
        self._clock = clock
        self._led: set[int] = set()

    def load(self, image: images.MetadataImage) -> int:
        """At startup: coordinate the groups of the partitions led here; how many."""
        self._led = offsets_partitions_led(image, self._node_id)
        self._groups.load(self._led, self._clock.time_ms())
        return len(self._groups.groups)

    def publish(self, delta: deltas.MetadataDelta, image: images.MetadataImage) -> None:
        now = self._clock.time_ms()
        for removed in delta.removed_topics.values():
            dropped = self._groups.forget_topic(removed.name, now)
            if dropped:
                log.info(
                    "dropped %d committed offset(s) of deleted topic %s", dropped, removed.name
                )
        led = offsets_partitions_led(image, self._node_id)
        if led == self._led:
            return
        gained, lost = led - self._led, self._led - led
        self._led = led
        if lost:
            gone = self._groups.unload(lost)
            log.info(
                "no longer coordinating %d group(s): %s partition(s) %s lead elsewhere",
                gone,
                topics.OFFSETS_TOPIC,
                sorted(lost),
            )
        if gained:
            before = len(self._groups.groups)
            self._groups.load(gained, now)
            log.info(
                "coordinating %d more group(s): leading %s partition(s) %s",
                len(self._groups.groups) - before,
                topics.OFFSETS_TOPIC,
                sorted(gained),
            )
