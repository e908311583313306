"""Which transactional ids this broker coordinates, following the metadata.

An id is coordinated by the leader of the `__transaction_state` partition that holds it
(Kafka's rule), with that partition's leader epoch as the coordinator epoch: the markers
of an older coordinator are then refused by the partitions. When such a leadership comes
to this broker (or its epoch changes), the partition's ids are loaded from the local
replica's log and their prepared transactions finished; when it goes, they are dropped.
"""

from __future__ import annotations

import logging

from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import topics
from strom.coordinator import transactions

log = logging.getLogger(__name__)


def transaction_partitions_led(image: images.MetadataImage, node_id: int) -> dict[int, int]:
    """`__transaction_state` partitions led here -> their leader epoch."""
    topic = image.topics.get(topics.TRANSACTIONS_TOPIC)
    if topic is None:
        return {}
    return {
        index: partition.leader_epoch
        for index, partition in topic.partitions.items()
        if partition.leader == node_id
    }


class TxnPlacement:
    """Metadata publisher: loads and unloads transactional ids as leaderships move."""

    name = "transaction coordinator"

    def __init__(self, coordinator: transactions.TransactionCoordinator, node_id: int) -> None:
        self._coordinator = coordinator
        self._node_id = node_id
        self._led: dict[int, int] = {}

    def load(self, image: images.MetadataImage) -> int:
        """At startup: coordinate the ids of the partitions led here; how many."""
        return self._follow(image)

    def publish(self, delta: deltas.MetadataDelta, image: images.MetadataImage) -> None:
        self._follow(image)

    def _follow(self, image: images.MetadataImage) -> int:
        led = transaction_partitions_led(image, self._node_id)
        if led == self._led:
            return 0
        lost = [index for index, epoch in self._led.items() if led.get(index) != epoch]
        gained = [index for index, epoch in led.items() if self._led.get(index) != epoch]
        self._led = led
        for index in lost:
            self._coordinator.unload(index)
        if lost:
            log.info(
                "no longer coordinating transactions of %s partition(s) %s",
                topics.TRANSACTIONS_TOPIC,
                sorted(lost),
            )
        loaded = 0
        for index in sorted(gained):
            loaded += self._coordinator.load(index, led[index])
        if gained:
            log.info(
                "coordinating %d transactional id(s): leading %s partition(s) %s",
                loaded,
                topics.TRANSACTIONS_TOPIC,
                sorted(gained),
            )
        return loaded
