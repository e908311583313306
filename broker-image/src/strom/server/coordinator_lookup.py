"""Which broker coordinates a key of an internal topic: a group in `__consumer_offsets`,
a transactional id in `__transaction_state`. The request handlers (FindCoordinator, the
group and transaction requests) and the transaction service (KIP-890 verification) ask
it of the metadata image."""

from __future__ import annotations

from strom.cluster import image as images
from strom.cluster import topics
from strom.coordinator import offsets_records


def coordinator_of(
    image: images.MetadataImage, key: str, topic: str = topics.OFFSETS_TOPIC
) -> int | None:
    """The leader of the internal topic's partition that holds the key, as Kafka places
    them (the same hash for both topics): None while the topic does not exist, -1 while
    that partition has no leader."""
    internal = image.topics.get(topic)
    if internal is None or not internal.partitions:
        return None
    index = offsets_records.partition_for(key, internal.partition_count)
    return internal.partitions[index].leader
