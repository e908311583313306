"""The metadata loader: committed records in, a new image out, publishers told in order.

Kafka's MetadataLoader does the same between the Raft client and the broker's
publishers. A publisher is anything with `publish(delta, image)`; it runs after the new
image is in place, in registration order (the replica manager before the coordinator,
so logs exist before anyone reads them). A publisher that fails is logged and does not
stop the others: the image is the truth and the next delta retries what it can.
A snapshot (at start, or fetched by a follower that fell behind the leader's log start)
replaces the image through `reset`, which publishes what differs (`delta.replacement`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import records

log = logging.getLogger(__name__)


class Publisher(Protocol):
    name: str

    def publish(self, delta: deltas.MetadataDelta, image: images.MetadataImage) -> None: ...


class MetadataLoader:
    def __init__(self, image: images.MetadataImage) -> None:
        self.image = image
        self._publishers: list[Publisher] = []

    def add_publisher(self, publisher: Publisher) -> None:
        self._publishers.append(publisher)

    def stage(self, entries: Iterable[tuple[int, records.MetadataRecord]]) -> deltas.MetadataDelta:
        """A delta of `entries` over the current image, not yet applied: the controller
        checks that records apply cleanly before it makes them durable."""
        delta = deltas.MetadataDelta(self.image)
        for offset, record in entries:
            delta.replay(record, offset)
        return delta

    def load(self, delta: deltas.MetadataDelta) -> images.MetadataImage:
        """Apply a staged delta of committed records and publish it."""
        if delta.image is not self.image:
            raise deltas.DeltaError("the delta was staged on an image that is no longer current")
        self.image = delta.apply()
        self._publish(delta)
        return self.image

    def reset(self, image: images.MetadataImage) -> deltas.MetadataDelta:
        """Replace the current image by ``image`` (a snapshot's, from
        ``snapshots.load_snapshot``) and publish what differs between the two."""
        delta = deltas.replacement(self.image, image)
        self.image = image
        self._publish(delta)
        return delta

    def _publish(self, delta: deltas.MetadataDelta) -> None:
        for publisher in self._publishers:
            try:
                publisher.publish(delta, self.image)
            except Exception:
                log.exception("metadata publisher %s failed", publisher.name)
