"""Which broker coordinates a group or a transactional id: the leader of its internal
topic's partition."""

import uuid

from strom.cluster import image as images
from strom.cluster import topics
from strom.coordinator import offsets_records, txn_records
from strom.server.coordinator_lookup import coordinator_of


def internal_topic(name: str, leaders: list[int]) -> images.TopicImage:
    return images.TopicImage(
        name,
        uuid.uuid4(),
        {
            index: images.PartitionImage(index, (leader,), (leader,), leader, 0, 0)
            for index, leader in enumerate(leaders)
        },
    )


def image_with(*internal: images.TopicImage) -> images.MetadataImage:
    return images.MetadataImage("cluster", topics={topic.name: topic for topic in internal})


def test_the_leader_of_the_partition_that_holds_the_key() -> None:
    leaders = [10 + index for index in range(50)]
    image = image_with(
        internal_topic(topics.OFFSETS_TOPIC, leaders),
        internal_topic(topics.TRANSACTIONS_TOPIC, [100 + leader for leader in leaders]),
    )
    for key in ("group-a", "txn-1", "", "ü"):
        group_partition = offsets_records.partition_for(key, 50)
        assert coordinator_of(image, key) == leaders[group_partition]
        txn_partition = txn_records.partition_for(key, 50)
        assert coordinator_of(image, key, topics.TRANSACTIONS_TOPIC) == 110 + txn_partition


def test_no_topic_is_none_and_no_leader_is_minus_one() -> None:
    assert coordinator_of(image_with(), "group-a") is None
    assert coordinator_of(image_with(internal_topic(topics.OFFSETS_TOPIC, [])), "g") is None
    leaderless = image_with(internal_topic(topics.TRANSACTIONS_TOPIC, [-1]))
    assert coordinator_of(leaderless, "txn-1", topics.TRANSACTIONS_TOPIC) == -1
