"""Metadata snapshots: an image's records rebuild it, the snapshot file is Kafka's layout
and refuses corruption, a loaded snapshot replaces the image with a delta that tells
publishers exactly what differs, and the snapshot policy is Kafka's rule.

Images come from seeded random histories of realistic records (hypothesis is not a test
dependency): brokers registering, fenced, unfenced and leaving, topics created with
configs and partitions, partitions added and changed, configs altered, topics deleted and
names reused, producer id blocks."""

from __future__ import annotations

import dataclasses
import random
import struct
import uuid
from typing import Any

import pytest
from kio.static.primitive import i8, i32, i64, u16
from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import loader as loaders
from strom.cluster import records, snapshots
from strom.config import broker
from strom.records import batches

CLUSTER_ID = "snapshot-test-cluster"
TOPIC_NAMES = ("orders", "payments", "clicks", "audit", "__consumer_offsets")
TOPIC_CONFIGS = {
    "cleanup.policy": ("delete", "compact"),
    "retention.ms": ("1000", "86400000"),
    "segment.bytes": ("1048576",),
}


class History:
    """A random, valid sequence of metadata records and the image it builds (one delta
    per action, so every record is chosen against the state before it)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.image = images.MetadataImage(CLUSTER_ID)
        self.records: list[records.MetadataRecord] = []

    def run(self, steps: int) -> images.MetadataImage:
        actions = (
            self.register_broker,
            self.fence_or_unfence,
            self.unregister_broker,
            self.create_topic,
            self.create_topic,
            self.add_partition,
            self.change_partition,
            self.change_partition,
            self.alter_topic_config,
            self.alter_broker_config,
            self.delete_topic,
            self.allocate_producer_ids,
        )
        for _ in range(steps):
            batch = self.rng.choice(actions)()
            if batch:
                self.apply(batch)
        return self.image

    def apply(self, batch: list[records.MetadataRecord]) -> None:
        delta = deltas.MetadataDelta(self.image)
        for record in batch:
            delta.replay(record, len(self.records))
            self.records.append(record)
        self.image = delta.apply()

    def register_broker(self) -> list[records.MetadataRecord]:
        node_id = self.rng.randint(1, 5)
        current = self.image.brokers.get(node_id)
        endpoint = records.BrokerEndpoint(
            name="PLAINTEXT", host=f"broker-{node_id}", port=u16(9092), security_protocol=0
        )
        return [
            records.RegisterBrokerRecord(
                broker_id=i32(node_id),
                incarnation_id=uuid.UUID(int=self.rng.getrandbits(128)),
                broker_epoch=i64(current.epoch + 1 if current else self.rng.randint(0, 99)),
                end_points=(endpoint,) * self.rng.randint(0, 1),
                rack=self.rng.choice((None, "rack-a", "rack-b")),
                fenced=self.rng.random() < 0.5,
                in_controlled_shutdown=self.rng.random() < 0.1,
            )
        ]

    def _some_broker(self) -> images.BrokerImage | None:
        brokers = sorted(self.image.brokers)
        return self.image.brokers[self.rng.choice(brokers)] if brokers else None

    def fence_or_unfence(self) -> list[records.MetadataRecord]:
        broker = self._some_broker()
        if broker is None:
            return []
        kind = records.UnfenceBrokerRecord if broker.fenced else records.FenceBrokerRecord
        return [kind(id=i32(broker.node_id), epoch=i64(broker.epoch))]

    def unregister_broker(self) -> list[records.MetadataRecord]:
        broker = self._some_broker()
        if broker is None or self.rng.random() < 0.5:
            return []
        return [
            records.UnregisterBrokerRecord(
                broker_id=i32(broker.node_id), broker_epoch=i64(broker.epoch)
            )
        ]

    def _partition(self, topic_id: uuid.UUID, index: int) -> records.PartitionRecord:
        replicas = tuple(i32(r) for r in self.rng.sample(range(1, 6), self.rng.randint(1, 3)))
        return records.PartitionRecord(
            partition_id=i32(index),
            topic_id=topic_id,
            replicas=replicas,
            isr=replicas,
            leader=replicas[0],
            leader_epoch=i32(0),
            partition_epoch=i32(0),
        )

    def create_topic(self) -> list[records.MetadataRecord]:
        name = self.rng.choice(TOPIC_NAMES)
        if name in self.image.topics:
            return []
        topic_id = uuid.UUID(int=self.rng.getrandbits(128))
        batch: list[records.MetadataRecord] = [records.TopicRecord(name=name, topic_id=topic_id)]
        for key in self.rng.sample(sorted(TOPIC_CONFIGS), self.rng.randint(0, 2)):
            batch.append(_config(records.TOPIC_RESOURCE, name, key, self._value(key)))
        batch += [self._partition(topic_id, index) for index in range(self.rng.randint(1, 4))]
        return batch

    def _value(self, key: str) -> str:
        return self.rng.choice(TOPIC_CONFIGS[key])

    def _some_topic(self) -> images.TopicImage | None:
        names = sorted(self.image.topics)
        return self.image.topics[self.rng.choice(names)] if names else None

    def add_partition(self) -> list[records.MetadataRecord]:
        topic = self._some_topic()
        if topic is None:
            return []
        return [self._partition(topic.topic_id, topic.partition_count)]

    def change_partition(self) -> list[records.MetadataRecord]:
        topic = self._some_topic()
        if topic is None:
            return []
        index = self.rng.randrange(topic.partition_count)
        replicas = topic.partitions[index].replicas
        isr = self.rng.sample(replicas, self.rng.randint(0, len(replicas)))
        leader = self.rng.choice([*isr, images.NO_LEADER, -2])
        return [
            records.PartitionChangeRecord(
                partition_id=i32(index),
                topic_id=topic.topic_id,
                isr=None if self.rng.random() < 0.3 else tuple(i32(r) for r in isr),
                leader=i32(leader),
            )
        ]

    def alter_topic_config(self) -> list[records.MetadataRecord]:
        topic = self._some_topic()
        if topic is None:
            return []
        key = self.rng.choice(sorted(TOPIC_CONFIGS))
        value = None if self.rng.random() < 0.3 else self._value(key)
        return [_config(records.TOPIC_RESOURCE, topic.name, key, value)]

    def alter_broker_config(self) -> list[records.MetadataRecord]:
        resource = self.rng.choice(("", "1", "2", "3"))
        key = self.rng.choice(("log.retention.ms", "num.io.threads", "min.insync.replicas"))
        value = None if self.rng.random() < 0.3 else str(self.rng.randint(1, 9))
        return [_config(records.BROKER_RESOURCE, resource, key, value)]

    def delete_topic(self) -> list[records.MetadataRecord]:
        topic = self._some_topic()
        if topic is None or self.rng.random() < 0.5:
            return []
        return [records.RemoveTopicRecord(topic_id=topic.topic_id)]

    def allocate_producer_ids(self) -> list[records.MetadataRecord]:
        broker = self._some_broker()
        if broker is None:
            return []
        return [
            records.ProducerIdsRecord(
                broker_id=i32(broker.node_id),
                broker_epoch=i64(broker.epoch),
                next_producer_id=i64(self.image.next_producer_id + 1000),
            )
        ]


def _config(kind: int, resource: str, name: str, value: str | None) -> records.ConfigRecord:
    return records.ConfigRecord(
        resource_type=i8(kind), resource_name=resource, name=name, value=value
    )


def same_state(left: images.MetadataImage, right: images.MetadataImage) -> bool:
    """Equal in everything but the offset (a snapshot's image takes the snapshot's end)."""
    return dataclasses.replace(left, offset=-1) == dataclasses.replace(right, offset=-1)


# The image as records ------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(60))
def test_an_images_records_rebuild_it(seed: int) -> None:
    history = History(seed)
    image = history.run(random.Random(seed).randint(1, 120))
    rebuilt = snapshots.load_snapshot(
        CLUSTER_ID, snapshots.image_records(image), end_offset=image.offset + 1
    )
    assert same_state(rebuilt, image)
    assert rebuilt.offset == image.offset
    # the snapshot's records, replayed, make the same records again: nothing drifts
    assert snapshots.image_records(rebuilt) == snapshots.image_records(image)


def test_an_empty_image_has_no_records() -> None:
    assert snapshots.image_records(images.MetadataImage(CLUSTER_ID)) == []


def test_fence_state_configs_and_producer_ids_are_in_the_records() -> None:
    history = History(7)
    image = history.run(150)
    assert image.brokers and image.topics and image.broker_configs  # the seed covers them
    written = snapshots.image_records(image)
    registered = [r for r in written if isinstance(r, records.RegisterBrokerRecord)]
    assert {(r.broker_id, r.fenced) for r in registered} == {
        (b.node_id, b.fenced) for b in image.brokers.values()
    }
    producer_ids = [r for r in written if isinstance(r, records.ProducerIdsRecord)]
    assert [r.next_producer_id for r in producer_ids] == [image.next_producer_id]
    # every topic comes before its configs, as replay needs
    first_config = next(i for i, r in enumerate(written) if isinstance(r, records.ConfigRecord))
    assert not any(isinstance(r, records.TopicRecord) for r in written[first_config:])


# The snapshot file ---------------------------------------------------------------------


def sample_records(seed: int = 3, steps: int = 80) -> list[records.MetadataRecord]:
    return snapshots.image_records(History(seed).run(steps))


@pytest.mark.parametrize("max_batch_bytes", [1, 200, snapshots.MAX_BATCH_BYTES])
def test_a_snapshot_file_round_trips(max_batch_bytes: int) -> None:
    written = sample_records()
    data = snapshots.encode_snapshot(
        written, epoch=4, last_contained_timestamp_ms=1234, max_batch_bytes=max_batch_bytes
    )
    assert snapshots.decode_snapshot(data) == written
    assert snapshots.decode_snapshot(memoryview(data)) == written


def test_the_file_is_kafkas_layout() -> None:
    written = sample_records()
    data = snapshots.encode_snapshot(
        written, epoch=4, last_contained_timestamp_ms=1234, max_batch_bytes=300
    )
    headers = list(batches.iter_batches(data))
    assert all(h.partition_leader_epoch == 4 for h in headers)
    assert [h.base_offset for h in headers[1:]] == [h.last_offset + 1 for h in headers[:-1]]
    assert headers[0].base_offset == 0 and headers[-1].last_offset == len(written) + 1
    assert [h.is_control for h in headers] == [True] + [False] * (len(headers) - 2) + [True]
    assert len(headers) > 4
    assert all(h.size <= 300 for h in headers[1:-1] if h.records_count > 1)
    first = next(batches.iter_records(data[: headers[0].size]))
    last = next(batches.iter_records(data[headers[-1].position :]))
    # ControlRecordType key (version 0, type) and the v0 message bodies, as Kafka's
    # ControlRecordUtils writes them: version int16, then a timestamp int64, no tags
    assert first.key == b"\x00\x00\x00\x03" and last.key == b"\x00\x00\x00\x04"
    assert first.value == struct.pack(">hqB", 0, 1234, 0)
    assert last.value == struct.pack(">hB", 0, 0)


def test_an_empty_snapshot_is_a_header_and_a_footer() -> None:
    data = snapshots.encode_snapshot([], epoch=1, last_contained_timestamp_ms=0)
    assert len(list(batches.iter_batches(data))) == 2
    assert snapshots.decode_snapshot(data) == []


def _encoded() -> bytes:
    return snapshots.encode_snapshot(
        sample_records(), epoch=2, last_contained_timestamp_ms=99, max_batch_bytes=400
    )


def _batch_spans(data: bytes) -> list[tuple[int, int]]:
    return [(h.position, h.position + h.size) for h in batches.iter_batches(data)]


def _flip(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x40]) + data[position + 1 :]


def test_a_flipped_byte_is_a_crc_mismatch() -> None:
    data = _encoded()
    for start, end in _batch_spans(data):
        for position in (start + 21, (start + end) // 2, end - 1):
            with pytest.raises(snapshots.CorruptSnapshotError, match="CRC mismatch"):
                snapshots.decode_snapshot(_flip(data, position))


def test_a_snapshot_cut_short_is_refused_wherever_it_is_cut() -> None:
    data = _encoded()
    for cut in range(0, len(data), 7):
        with pytest.raises(snapshots.CorruptSnapshotError):
            snapshots.decode_snapshot(data[:cut])
    ends = [end for _, end in _batch_spans(data)]
    with pytest.raises(snapshots.CorruptSnapshotError, match="no SnapshotFooter"):
        snapshots.decode_snapshot(data[: ends[-2]])


def test_a_snapshot_without_its_header_is_refused() -> None:
    data = _encoded()
    (_, header_end), *_ = _batch_spans(data)
    with pytest.raises(snapshots.CorruptSnapshotError, match="expected offset 0"):
        snapshots.decode_snapshot(data[header_end:])
    rebased = bytearray(data[header_end:])
    position = 0
    for header in batches.iter_batches(data[header_end:]):
        batches.patch_base_offset(rebased, position, header.base_offset - 1)
        position += header.size
    with pytest.raises(snapshots.CorruptSnapshotError, match="does not start with"):
        snapshots.decode_snapshot(bytes(rebased))


def _with_data_batch(values: list[bytes | None], *, after_footer: bool = False) -> bytes:
    """A snapshot whose one data batch holds ``values`` (valid CRCs throughout)."""
    data = snapshots.encode_snapshot([], epoch=1, last_contained_timestamp_ms=0)
    (_, header_end), (footer_start, _) = _batch_spans(data)
    footer = bytearray(data[footer_start:])
    middle = batches.build_batch([(None, v, [], 0) for v in values], base_offset=1)
    if after_footer:
        batches.patch_base_offset(footer, 0, 1)
        middle = batches.build_batch([(None, v, [], 0) for v in values], base_offset=2)
        return data[:header_end] + bytes(footer) + middle
    batches.patch_base_offset(footer, 0, 1 + len(values))
    return data[:header_end] + middle + bytes(footer)


def test_undecodable_records_are_refused_with_their_offset() -> None:
    good = records.encode(records.RemoveTopicRecord(topic_id=uuid.UUID(int=5)))
    assert snapshots.decode_snapshot(_with_data_batch([good])) == [
        records.RemoveTopicRecord(topic_id=uuid.UUID(int=5))
    ]
    for bad, complaint in [
        (b"\x01\x63\x00", "unknown metadata record type 99"),
        (good[:-3], "malformed RemoveTopicRecord"),
        (good + b"\x00", "trailing bytes"),
        (None, "has no value"),
    ]:
        with pytest.raises(
            snapshots.CorruptSnapshotError, match=f"offset 2: .*{complaint}|offset 2 {complaint}"
        ):
            snapshots.decode_snapshot(_with_data_batch([good, bad]))


def test_records_after_the_footer_are_refused() -> None:
    good = records.encode(records.RemoveTopicRecord(topic_id=uuid.UUID(int=5)))
    with pytest.raises(snapshots.CorruptSnapshotError, match="after the snapshot footer"):
        snapshots.decode_snapshot(_with_data_batch([good], after_footer=True))


def _control_batch(kind: int, value: bytes, base_offset: int) -> bytes:
    key = struct.pack(">hh", 0, kind)
    return batches.build_batch([(key, value, [], 0)], base_offset=base_offset, is_control=True)


def test_control_records_must_be_a_header_then_a_footer() -> None:
    header = struct.pack(">hqB", 0, 7, 0)
    footer = struct.pack(">hB", 0, 0)
    assert (
        snapshots.decode_snapshot(_control_batch(3, header, 0) + _control_batch(4, footer, 1)) == []
    )
    for data, complaint in [
        (_control_batch(3, header[:-2], 0) + _control_batch(4, footer, 1), "malformed Snapshot"),
        (_control_batch(3, header, 0) + _control_batch(4, footer + b"x", 1), "trailing bytes"),
        (_control_batch(4, footer, 0), "unexpected control record type 4"),
        (_control_batch(3, header, 0) + _control_batch(2, b"", 1), "control record type 2"),
        (
            _control_batch(3, header, 0)
            + _control_batch(4, footer, 1)
            + _control_batch(4, footer, 2),
            "after the snapshot footer",
        ),
    ]:
        with pytest.raises(snapshots.CorruptSnapshotError, match=complaint):
            snapshots.decode_snapshot(data)


def test_kraft_version_and_voters_control_records_are_skipped() -> None:
    # Kafka with kraft.version 1 writes them in the header's batch: the quorum's business
    data = snapshots.encode_snapshot(sample_records(), epoch=3, last_contained_timestamp_ms=5)
    first = batches.iter_batches(data).__next__()
    header = next(batches.iter_records(data[: first.size]))
    kafkas = [
        (header.key, header.value, [], 5),
        (struct.pack(">hh", 0, 5), b"\x00\x00\x01\x00", [], 5),
        (struct.pack(">hh", 0, 6), b"\x00\x01\x00", [], 5),
    ]
    rest = bytearray(data[first.size :])
    for batch in batches.iter_batches(data[first.size :]):
        batches.patch_base_offset(rest, batch.position, batch.base_offset + 2)
    rewritten = batches.build_batch(kafkas, partition_leader_epoch=3, is_control=True) + rest
    assert snapshots.decode_snapshot(rewritten) == sample_records()


def test_nothing_at_all_is_not_a_snapshot() -> None:
    with pytest.raises(snapshots.CorruptSnapshotError, match="no SnapshotHeader"):
        snapshots.decode_snapshot(b"")


def test_the_driver_writes_an_image_and_reads_it_back() -> None:
    image = History(5).run(90)
    data = snapshots.write_image(image, epoch=2, last_contained_timestamp_ms=10)
    assert snapshots.read_image(CLUSTER_ID, data, image.offset + 1) == image


def test_a_snapshot_whose_records_do_not_apply_is_corrupt() -> None:
    orphan = records.RemoveTopicRecord(topic_id=uuid.UUID(int=9))
    data = snapshots.encode_snapshot([orphan], epoch=1, last_contained_timestamp_ms=0)
    with pytest.raises(snapshots.CorruptSnapshotError, match="do not apply: RemoveTopicRecord"):
        snapshots.read_image(CLUSTER_ID, data, 10)


# Loading a snapshot in place of the image ----------------------------------------------


class Mirror:
    """A publisher that rebuilds the image's state from deltas alone, as the replica
    manager and config cache do: if a delta leaves something out, the mirror drifts."""

    name = "mirror"

    def __init__(self, image: images.MetadataImage) -> None:
        self.partitions = _partitions(image)
        self.topic_configs = {t.name: dict(t.configs) for t in image.topics.values()}
        self.broker_configs = {k: dict(v) for k, v in image.broker_configs.items()}
        self.brokers = dict(image.brokers)
        self.next_producer_id = image.next_producer_id

    def publish(self, delta: deltas.MetadataDelta, image: images.MetadataImage) -> None:
        for removed in delta.removed_topics.values():
            for index in removed.partitions:
                del self.partitions[(removed.name, index)]
            del self.topic_configs[removed.name]
        for topic_id in delta.created_topics:
            self.topic_configs[image.topics_by_id[topic_id].name] = {}
        for topic_id, indexes in delta.changed_partitions.items():
            topic = image.topics_by_id[topic_id]
            for index in indexes:
                self.partitions[(topic.name, index)] = topic.partitions[index]
        for topic_id in delta.changed_topic_configs:
            topic = image.topics_by_id[topic_id]
            self.topic_configs[topic.name] = dict(topic.configs)
        for name in delta.changed_broker_configs:
            self.broker_configs[name] = dict(image.broker_configs.get(name, {}))
            if not self.broker_configs[name]:
                del self.broker_configs[name]
        for node_id in delta.changed_brokers:
            self.brokers.pop(node_id, None)
            if node_id in image.brokers:
                self.brokers[node_id] = image.brokers[node_id]
        if delta.producer_ids_changed:
            self.next_producer_id = image.next_producer_id

    def matches(self, image: images.MetadataImage) -> bool:
        return (
            self.partitions == _partitions(image)
            and self.topic_configs == {t.name: dict(t.configs) for t in image.topics.values()}
            and self.broker_configs == {k: dict(v) for k, v in image.broker_configs.items()}
            and self.brokers == dict(image.brokers)
            and self.next_producer_id == image.next_producer_id
        )


def _partitions(image: images.MetadataImage) -> dict[tuple[str, int], Any]:
    return {
        (topic.name, index): partition
        for topic in image.topics.values()
        for index, partition in topic.partitions.items()
    }


def _snapshot_of(image: images.MetadataImage) -> images.MetadataImage:
    data = snapshots.encode_snapshot(
        snapshots.image_records(image), epoch=1, last_contained_timestamp_ms=0
    )
    return snapshots.load_snapshot(CLUSTER_ID, snapshots.decode_snapshot(data), image.offset + 1)


@pytest.mark.parametrize("seed", range(40))
def test_a_loaded_snapshot_replaces_the_image_and_publishers_see_the_difference(
    seed: int,
) -> None:
    rng = random.Random(seed)
    history = History(seed)
    before = history.run(rng.randint(0, 60))
    # a follower behind the leader, or one whose state came from elsewhere altogether
    after = history.run(rng.randint(0, 60)) if rng.random() < 0.7 else History(seed + 1000).run(80)
    loaded = _snapshot_of(after)
    loader = loaders.MetadataLoader(before)
    mirror = Mirror(before)
    loader.add_publisher(mirror)
    delta = loader.reset(loaded)
    assert loader.image is loaded
    assert delta.is_snapshot and delta.image is before
    assert delta.apply() == loaded  # the delta alone says the same
    assert mirror.matches(loaded)
    unchanged = {
        topic_id
        for topic_id, topic in before.topics_by_id.items()
        if loaded.topics_by_id.get(topic_id) == topic
    }
    assert not unchanged & (delta.changed_partitions.keys() | delta.changed_topic_configs)


def test_a_snapshot_equal_to_the_image_changes_nothing() -> None:
    image = History(11).run(80)
    delta = deltas.replacement(image, _snapshot_of(image))
    assert delta.is_empty
    assert not (delta.changed_partitions or delta.changed_brokers or delta.changed_broker_configs)
    assert not (delta.created_topics or delta.removed_topics or delta.producer_ids_changed)


def test_a_topic_recreated_under_its_name_is_removed_and_created() -> None:
    history = History(0)
    while not history.image.topics:
        history.apply(history.create_topic())
    before = history.image
    (old,) = before.topics.values()
    history.apply([records.RemoveTopicRecord(topic_id=old.topic_id)])
    recreated = uuid.UUID(int=42)
    history.apply(
        [records.TopicRecord(name=old.name, topic_id=recreated), history._partition(recreated, 0)]
    )
    delta = deltas.replacement(before, _snapshot_of(history.image))
    assert delta.removed_topics == {old.topic_id: old}
    assert delta.created_topics == {recreated}
    assert delta.changed_partitions == {recreated: {0}}


def test_a_topic_that_lost_partitions_is_removed_and_created() -> None:
    # Kafka never shrinks a topic; should a snapshot say so, publishers start it afresh
    # rather than keep logs the image no longer names.
    history = History(1)
    history.apply(history.create_topic())
    history.apply(history.add_partition())
    before = history.image
    (topic,) = before.topics.values()
    after = dataclasses.replace(
        before,
        topics={topic.name: dataclasses.replace(topic, partitions={0: topic.partitions[0]})},
        topics_by_id={
            topic.topic_id: dataclasses.replace(topic, partitions={0: topic.partitions[0]})
        },
    )
    loader = loaders.MetadataLoader(before)
    mirror = Mirror(before)
    loader.add_publisher(mirror)
    delta = loader.reset(after)
    assert delta.removed_topics == {topic.topic_id: topic}
    assert delta.created_topics == {topic.topic_id}
    assert mirror.matches(after)


def test_a_snapshot_of_another_cluster_is_refused() -> None:
    with pytest.raises(deltas.DeltaError, match="cluster other"):
        deltas.replacement(images.MetadataImage(CLUSTER_ID), images.MetadataImage("other"))


# When to snapshot ----------------------------------------------------------------------


def test_the_policy_snapshots_on_bytes_or_on_time_with_new_records() -> None:
    policy = snapshots.SnapshotPolicy()
    assert (policy.max_bytes_between_snapshots, policy.max_interval_ms) == (20 << 20, 3_600_000)
    assert not policy.should_snapshot(0, 0)
    assert not policy.should_snapshot((20 << 20) - 1, 3_599_999)
    assert policy.should_snapshot(20 << 20, 0)
    assert policy.should_snapshot(1, 3_600_000)
    # time alone, with nothing committed since the last snapshot, is no reason
    assert not policy.should_snapshot(0, 10 * 3_600_000)
    reason = policy.reason(1, 3_600_000)
    assert reason is not None and "ms since the last snapshot" in reason


def test_the_policy_reads_kafkas_settings() -> None:
    settings = broker.BrokerConfig(
        {
            "metadata.log.max.record.bytes.between.snapshots": "1000",
            "metadata.log.max.snapshot.interval.ms": "5000",
        }
    ).quorum
    policy = snapshots.SnapshotPolicy.from_settings(settings)
    assert (policy.max_bytes_between_snapshots, policy.max_interval_ms) == (1000, 5000)
    defaults = snapshots.SnapshotPolicy.from_settings(broker.BrokerConfig().quorum)
    assert defaults == snapshots.SnapshotPolicy()


def test_an_interval_of_zero_turns_the_time_rule_off() -> None:
    policy = snapshots.SnapshotPolicy(max_bytes_between_snapshots=100, max_interval_ms=0)
    assert not policy.should_snapshot(99, 1 << 40)
    assert policy.should_snapshot(100, 0)
