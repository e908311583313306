"""Metadata records as the log stores them, and the images deltas build from them."""

from __future__ import annotations

import uuid

import pytest
from kio.static.primitive import i8, i16, i32, i64, u16
from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import records

TOPIC_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")


def partition(
    index: int, replicas: tuple[int, ...] = (1,), topic_id: uuid.UUID = TOPIC_ID
) -> records.PartitionRecord:
    return records.PartitionRecord(
        partition_id=i32(index),
        topic_id=topic_id,
        replicas=tuple(i32(r) for r in replicas),
        isr=tuple(i32(r) for r in replicas),
        leader=i32(replicas[0]),
        leader_epoch=i32(0),
        partition_epoch=i32(0),
    )


def config(resource_type: int, resource: str, name: str, value: str | None) -> records.ConfigRecord:
    return records.ConfigRecord(
        resource_type=i8(resource_type), resource_name=resource, name=name, value=value
    )


EVERY_RECORD: list[records.MetadataRecord] = [
    records.TopicRecord(name="orders", topic_id=TOPIC_ID),
    partition(3, (1, 2, 3)),
    config(records.TOPIC_RESOURCE, "orders", "retention.ms", "1000"),
    config(records.BROKER_RESOURCE, "", "log.retention.ms", None),
    records.PartitionChangeRecord(partition_id=i32(3), topic_id=TOPIC_ID, leader=i32(2)),
    records.PartitionChangeRecord(partition_id=i32(3), topic_id=TOPIC_ID, isr=(i32(1),)),
    records.RemoveTopicRecord(topic_id=TOPIC_ID),
    records.ProducerIdsRecord(broker_id=i32(1), broker_epoch=i64(0), next_producer_id=i64(2000)),
    records.RegisterBrokerRecord(
        broker_id=i32(2),
        incarnation_id=TOPIC_ID,
        broker_epoch=i64(7),
        end_points=(
            records.BrokerEndpoint(
                name="PLAINTEXT", host="10.0.0.2", port=u16(9092), security_protocol=i16(0)
            ),
        ),
        rack="rack-b",
        fenced=False,
    ),
    records.FenceBrokerRecord(id=i32(2), epoch=i64(7)),
    records.UnfenceBrokerRecord(id=i32(2), epoch=i64(7)),
    records.UnregisterBrokerRecord(broker_id=i32(2), broker_epoch=i64(7)),
]


@pytest.mark.parametrize("record", EVERY_RECORD, ids=lambda r: type(r).__name__)
def test_every_record_round_trips_in_kafkas_frame(record: records.MetadataRecord) -> None:
    data = records.encode(record)
    # frame version 1, then the api key and version as unsigned varints
    assert data[0] == records.FRAME_VERSION
    assert data[1] == type(record).__api_key__
    assert data[2] == type(record).__version__
    assert records.decode(data) == record


def test_the_topic_record_is_byte_for_byte_kafkas() -> None:
    # Kafka's MetadataRecordSerde: frame 1, TopicRecord (2) v0, compact string "t",
    # the uuid, no tagged fields.
    data = records.encode(records.TopicRecord(name="t", topic_id=TOPIC_ID))
    assert data == bytes([1, 2, 0, 2]) + b"t" + TOPIC_ID.bytes + bytes([0])


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        (b"", "truncated"),
        (bytes([2, 2, 0]), "frame version"),
        (bytes([1, 99, 0]), "unknown metadata record type 99"),
        (bytes([1, 2, 7]), "newer than this Strom reads"),
        (bytes([1, 2, 0, 5]), "malformed TopicRecord"),
        (records.encode(records.RemoveTopicRecord(topic_id=TOPIC_ID)) + b"x", "trailing"),
    ],
)
def test_bytes_that_are_not_a_record_are_refused(data: bytes, complaint: str) -> None:
    with pytest.raises(records.RecordDecodeError, match=complaint):
        records.decode(data)


def applied(image: images.MetadataImage, *entries: records.MetadataRecord) -> deltas.MetadataDelta:
    delta = deltas.MetadataDelta(image)
    for offset, entry in enumerate(entries, start=image.offset + 1):
        delta.replay(entry, offset)
    return delta


def test_a_topic_its_partitions_and_configs_become_an_image() -> None:
    empty = images.MetadataImage("cluster")
    delta = applied(
        empty,
        records.TopicRecord(name="orders", topic_id=TOPIC_ID),
        partition(0),
        partition(1),
        config(records.TOPIC_RESOURCE, "orders", "retention.ms", "1000"),
        config(records.BROKER_RESOURCE, "1", "message.max.bytes", "5555"),
        records.ProducerIdsRecord(
            broker_id=i32(1), broker_epoch=i64(0), next_producer_id=i64(1000)
        ),
    )
    image = delta.apply()
    topic = image.topics["orders"]
    assert image.topic_by_id(TOPIC_ID) is topic
    assert topic.partition_count == 2 and topic.replication_factor == 1
    assert dict(topic.configs) == {"retention.ms": "1000"}
    assert image.dynamic_broker_configs("1") == {"message.max.bytes": "5555"}
    assert image.next_producer_id == 1000
    assert image.offset == 5
    assert delta.created_topics == {TOPIC_ID}
    assert delta.changed_partitions == {TOPIC_ID: {0, 1}}
    assert delta.changed_broker_configs == {"1"}
    # The image before is untouched: readers holding it keep a consistent view.
    assert empty.topics == {} and empty.offset == -1


def test_partition_changes_bump_epochs_as_kafka_does() -> None:
    image = applied(
        images.MetadataImage("c"),
        records.TopicRecord(name="t", topic_id=TOPIC_ID),
        partition(0, (1, 2, 3)),
    ).apply()
    shrunk = applied(
        image,
        records.PartitionChangeRecord(partition_id=i32(0), topic_id=TOPIC_ID, isr=(i32(1), i32(2))),
    ).apply()
    state = shrunk.partition("t", 0)
    assert state is not None
    assert state.isr == (1, 2) and state.leader == 1
    assert state.leader_epoch == 0 and state.partition_epoch == 1  # ISR only: same leader epoch
    moved = applied(
        shrunk, records.PartitionChangeRecord(partition_id=i32(0), topic_id=TOPIC_ID, leader=i32(2))
    ).apply()
    state = moved.partition("t", 0)
    assert state is not None
    assert state.leader == 2 and state.leader_epoch == 1 and state.partition_epoch == 2


def test_removing_a_topic_drops_it_and_its_configs() -> None:
    image = applied(
        images.MetadataImage("c"),
        records.TopicRecord(name="t", topic_id=TOPIC_ID),
        partition(0),
        config(records.TOPIC_RESOURCE, "t", "retention.ms", "5"),
    ).apply()
    delta = applied(image, records.RemoveTopicRecord(topic_id=TOPIC_ID))
    after = delta.apply()
    assert after.topics == {} and after.topics_by_id == {}
    assert delta.removed_topics[TOPIC_ID].name == "t"
    # The name may be used again, by a new topic with a new id.
    again = applied(after, records.TopicRecord(name="t", topic_id=uuid.uuid4())).apply()
    assert again.topics["t"].topic_id != TOPIC_ID


def test_config_records_set_and_remove_one_key_at_a_time() -> None:
    image = applied(
        images.MetadataImage("c"),
        config(records.BROKER_RESOURCE, "", "a", "1"),
        config(records.BROKER_RESOURCE, "", "b", "2"),
    ).apply()
    image = applied(image, config(records.BROKER_RESOURCE, "", "a", None)).apply()
    assert image.dynamic_broker_configs("") == {"b": "2"}
    image = applied(image, config(records.BROKER_RESOURCE, "", "b", None)).apply()
    assert "" not in image.broker_configs


@pytest.mark.parametrize(
    "record",
    [
        partition(0, topic_id=uuid.uuid4()),
        records.RemoveTopicRecord(topic_id=uuid.uuid4()),
        config(records.TOPIC_RESOURCE, "nope", "retention.ms", "1"),
        records.TopicRecord(name="t", topic_id=uuid.uuid4()),  # the name is taken
        records.PartitionChangeRecord(partition_id=i32(9), topic_id=TOPIC_ID, leader=i32(1)),
    ],
    ids=[
        "partition-of-unknown-topic",
        "remove-unknown",
        "config-of-unknown",
        "name-taken",
        "change-missing-partition",
    ],
)
def test_records_that_contradict_the_image_are_refused(record: records.MetadataRecord) -> None:
    image = applied(
        images.MetadataImage("c"), records.TopicRecord(name="t", topic_id=TOPIC_ID), partition(0)
    ).apply()
    with pytest.raises(deltas.DeltaError):
        applied(image, record)


def register(
    node_id: int, epoch: int, *, fenced: bool, rack: str | None = None
) -> records.RegisterBrokerRecord:
    return records.RegisterBrokerRecord(
        broker_id=i32(node_id),
        incarnation_id=uuid.uuid4(),
        broker_epoch=i64(epoch),
        end_points=(
            records.BrokerEndpoint(
                name="PLAINTEXT", host=f"10.0.0.{node_id}", port=u16(9092), security_protocol=i16(0)
            ),
        ),
        rack=rack,
        fenced=fenced,
    )


def test_brokers_register_are_fenced_and_unfenced_by_epoch() -> None:
    image = applied(
        images.MetadataImage("c"),
        register(1, 10, fenced=False, rack="a"),
        register(2, 11, fenced=True),
    ).apply()
    assert [b.node_id for b in image.live_brokers()] == [1]
    first = image.brokers[1]
    endpoint = first.endpoint("PLAINTEXT")
    assert endpoint is not None and (endpoint.host, endpoint.port) == ("10.0.0.1", 9092)
    assert first.rack == "a" and first.endpoint("CONTROLLER") is None
    delta = applied(
        image,
        records.UnfenceBrokerRecord(id=i32(2), epoch=i64(11)),
        records.FenceBrokerRecord(id=i32(1), epoch=i64(10)),
    )
    image = delta.apply()
    assert [b.node_id for b in image.live_brokers()] == [2] and delta.changed_brokers == {1, 2}
    # A record for an old incarnation (another epoch) contradicts the image.
    with pytest.raises(deltas.DeltaError):
        applied(image, records.UnfenceBrokerRecord(id=i32(1), epoch=i64(9)))
    gone = applied(image, records.UnregisterBrokerRecord(broker_id=i32(1), broker_epoch=i64(10)))
    assert set(gone.apply().brokers) == {2}
