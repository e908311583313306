"""A metadata delta: records replayed on top of an image, then applied into a new image.

Besides the new image, a delta says what changed (topics created and removed, partitions
changed, configs changed), which is what publishers act on: the replica manager opens
and deletes logs, the coordinator forgets removed topics, the config cache refreshes.
Replaying copies only what a record touches, so a delta of one config change on a
cluster with 10,000 partitions costs one topic, not the cluster.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any

from strom.cluster import image as images
from strom.cluster import records


class DeltaError(Exception):
    """A record that contradicts the image (a bug or a corrupt log): never applied."""


@dataclass
class _TopicChange:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, images.PartitionImage]
    configs: dict[str, str]


@dataclass
class MetadataDelta:
    image: images.MetadataImage
    created_topics: set[uuid.UUID] = field(default_factory=set)
    # removed topics as they were in the previous image
    removed_topics: dict[uuid.UUID, images.TopicImage] = field(default_factory=dict)
    changed_partitions: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    changed_topic_configs: set[uuid.UUID] = field(default_factory=set)
    changed_broker_configs: set[str] = field(default_factory=set)
    changed_group_configs: set[str] = field(default_factory=set)
    producer_ids_changed: bool = False
    changed_brokers: set[int] = field(default_factory=set)
    _brokers: dict[int, images.BrokerImage | None] = field(default_factory=dict)
    _topics: dict[uuid.UUID, _TopicChange] = field(default_factory=dict)
    _broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    _group_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    _next_producer_id: int | None = None
    offset: int = -1  # the metadata log offset of the last record
    # A snapshot's state replacing the image's (`replacement`): the offset is the
    # snapshot's, not the larger of the two.
    is_snapshot: bool = False

    def replay(self, record: records.MetadataRecord, offset: int = -1) -> None:
        if isinstance(record, records.TopicRecord):
            self._replay_topic(record)
        elif isinstance(record, records.PartitionRecord):
            self._replay_partition(record)
        elif isinstance(record, records.PartitionChangeRecord):
            self._replay_partition_change(record)
        elif isinstance(record, records.ConfigRecord):
            self._replay_config(record)
        elif isinstance(record, records.RemoveTopicRecord):
            self._replay_remove_topic(record)
        elif isinstance(record, records.RegisterBrokerRecord):
            self._replay_register_broker(record)
        elif isinstance(
            record,
            records.UnregisterBrokerRecord
            | records.FenceBrokerRecord
            | records.UnfenceBrokerRecord
            | records.BrokerRegistrationChangeRecord,
        ):
            self._replay_broker_change(record)
        elif isinstance(record, records.ProducerIdsRecord):
            self._next_producer_id = int(record.next_producer_id)
            self.producer_ids_changed = True
        self.offset = max(self.offset, offset)

    @property
    def is_empty(self) -> bool:
        return not (
            self._topics
            or self.removed_topics
            or self._broker_configs
            or self._group_configs
            or self._brokers
            or self._next_producer_id is not None
        )

    # Topics --------------------------------------------------------------------------

    def _topic(self, topic_id: uuid.UUID) -> _TopicChange:
        change = self._topics.get(topic_id)
        if change is not None:
            return change
        existing = self.image.topics_by_id.get(topic_id)
        if existing is None or topic_id in self.removed_topics:
            raise DeltaError(f"a record names topic id {topic_id}, which does not exist")
        change = _TopicChange(
            existing.name, topic_id, dict(existing.partitions), dict(existing.configs)
        )
        self._topics[topic_id] = change
        return change

    def _topic_named(self, name: str) -> _TopicChange | None:
        for change in self._topics.values():
            if change.name == name:
                return change
        existing = self.image.topics.get(name)
        if existing is None or existing.topic_id in self.removed_topics:
            return None
        return self._topic(existing.topic_id)

    def _replay_topic(self, record: records.TopicRecord) -> None:
        if self._topic_named(record.name) is not None:
            raise DeltaError(f"TopicRecord for {record.name}, which exists already")
        self._topics[record.topic_id] = _TopicChange(record.name, record.topic_id, {}, {})
        self.created_topics.add(record.topic_id)

    def _replay_partition(self, record: records.PartitionRecord) -> None:
        change = self._topic(record.topic_id)
        index = int(record.partition_id)
        change.partitions[index] = images.PartitionImage(
            index=index,
            replicas=tuple(int(r) for r in record.replicas),
            isr=tuple(int(r) for r in record.isr),
            leader=int(record.leader),
            leader_epoch=int(record.leader_epoch),
            partition_epoch=int(record.partition_epoch),
            adding_replicas=tuple(int(r) for r in record.adding_replicas),
            removing_replicas=tuple(int(r) for r in record.removing_replicas),
        )
        self.changed_partitions.setdefault(record.topic_id, set()).add(index)

    def _replay_partition_change(self, record: records.PartitionChangeRecord) -> None:
        change = self._topic(record.topic_id)
        index = int(record.partition_id)
        current = change.partitions.get(index)
        if current is None:
            raise DeltaError(f"PartitionChangeRecord for missing partition {change.name}-{index}")
        change.partitions[index] = merge_partition_change(current, record)
        self.changed_partitions.setdefault(record.topic_id, set()).add(index)

    def _replay_remove_topic(self, record: records.RemoveTopicRecord) -> None:
        if record.topic_id in self.created_topics:
            # created and removed within one delta: as if it never was
            self.created_topics.discard(record.topic_id)
            self._topics.pop(record.topic_id, None)
            self.changed_partitions.pop(record.topic_id, None)
            self.changed_topic_configs.discard(record.topic_id)
            return
        existing = self.image.topics_by_id.get(record.topic_id)
        if existing is None or record.topic_id in self.removed_topics:
            raise DeltaError(f"RemoveTopicRecord for unknown topic id {record.topic_id}")
        self.removed_topics[record.topic_id] = existing
        self._topics.pop(record.topic_id, None)
        self.changed_partitions.pop(record.topic_id, None)
        self.changed_topic_configs.discard(record.topic_id)

    # Brokers -------------------------------------------------------------------------

    def _broker(self, node_id: int) -> images.BrokerImage | None:
        if node_id in self._brokers:
            return self._brokers[node_id]
        return self.image.brokers.get(node_id)

    def _replay_register_broker(self, record: records.RegisterBrokerRecord) -> None:
        node_id = int(record.broker_id)
        self._brokers[node_id] = images.BrokerImage(
            node_id=node_id,
            incarnation_id=record.incarnation_id,
            epoch=int(record.broker_epoch),
            endpoints=tuple(
                images.BrokerEndpoint(e.name, e.host, int(e.port), int(e.security_protocol))
                for e in record.end_points
            ),
            rack=record.rack,
            fenced=bool(record.fenced),
            in_controlled_shutdown=bool(record.in_controlled_shutdown),
        )
        self.changed_brokers.add(node_id)

    def _replay_broker_change(
        self,
        record: records.UnregisterBrokerRecord
        | records.FenceBrokerRecord
        | records.UnfenceBrokerRecord
        | records.BrokerRegistrationChangeRecord,
    ) -> None:
        if isinstance(
            record, records.UnregisterBrokerRecord | records.BrokerRegistrationChangeRecord
        ):
            node_id, epoch = int(record.broker_id), int(record.broker_epoch)
        else:
            node_id, epoch = int(record.id), int(record.epoch)
        current = self._broker(node_id)
        if current is None or current.epoch != epoch:
            raise DeltaError(
                f"{type(record).__name__} for broker {node_id} epoch {epoch}, "
                "which is not registered"
            )
        if isinstance(record, records.UnregisterBrokerRecord):
            self._brokers[node_id] = None
        elif isinstance(record, records.BrokerRegistrationChangeRecord):
            fenced = {-1: False, 1: True}.get(int(record.fenced), current.fenced)
            in_controlled_shutdown = (
                current.in_controlled_shutdown or int(record.in_controlled_shutdown) == 1
            )
            self._brokers[node_id] = dataclasses.replace(
                current, fenced=fenced, in_controlled_shutdown=in_controlled_shutdown
            )
        else:
            fenced = isinstance(record, records.FenceBrokerRecord)
            self._brokers[node_id] = dataclasses.replace(current, fenced=fenced)
        self.changed_brokers.add(node_id)

    # Configs -------------------------------------------------------------------------

    def _replay_config(self, record: records.ConfigRecord) -> None:
        if record.resource_type == records.TOPIC_RESOURCE:
            change = self._topic_named(record.resource_name)
            if change is None:
                raise DeltaError(f"ConfigRecord for unknown topic {record.resource_name}")
            _set_or_remove(change.configs, record.name, record.value)
            self.changed_topic_configs.add(change.topic_id)
        elif record.resource_type == records.BROKER_RESOURCE:
            name = record.resource_name
            layer = self._broker_configs.setdefault(name, self.image.dynamic_broker_configs(name))
            _set_or_remove(layer, record.name, record.value)
            self.changed_broker_configs.add(name)
        elif record.resource_type == records.GROUP_RESOURCE:
            group_id = record.resource_name
            configs = self._group_configs.setdefault(group_id, self.image.group_overrides(group_id))
            _set_or_remove(configs, record.name, record.value)
            self.changed_group_configs.add(group_id)
        else:
            raise DeltaError(f"ConfigRecord for unknown resource type {record.resource_type}")

    # Applying ------------------------------------------------------------------------

    def apply(self) -> images.MetadataImage:
        before = self.image
        topics = dict(before.topics)
        topics_by_id = dict(before.topics_by_id)
        for topic_id, removed in self.removed_topics.items():
            topics.pop(removed.name, None)
            topics_by_id.pop(topic_id, None)
        for topic_id, change in self._topics.items():
            topic = images.TopicImage(
                change.name, topic_id, change.partitions, dict(change.configs)
            )
            topics[change.name] = topic
            topics_by_id[topic_id] = topic
        broker_configs = dict(before.broker_configs)
        for name, layer in self._broker_configs.items():
            if layer:
                broker_configs[name] = dict(layer)
            else:
                broker_configs.pop(name, None)
        group_configs = dict(before.group_configs)
        for group_id, configs in self._group_configs.items():
            if configs:
                group_configs[group_id] = dict(configs)
            else:
                group_configs.pop(group_id, None)
        brokers = dict(before.brokers)
        for node_id, broker in self._brokers.items():
            if broker is None:
                brokers.pop(node_id, None)
            else:
                brokers[node_id] = broker
        next_producer_id = before.next_producer_id
        if self._next_producer_id is not None:
            next_producer_id = self._next_producer_id
        return images.MetadataImage(
            cluster_id=before.cluster_id,
            offset=self.offset if self.is_snapshot else max(before.offset, self.offset),
            topics=topics,
            topics_by_id=topics_by_id,
            broker_configs=broker_configs,
            next_producer_id=next_producer_id,
            brokers=brokers,
            group_configs=group_configs,
        )


def merge_partition_change(
    current: images.PartitionImage, record: records.PartitionChangeRecord
) -> images.PartitionImage:
    """The partition once ``record`` applies (Kafka's PartitionRegistration.merge)."""
    leader_changed = record.leader != -2
    return images.PartitionImage(
        index=current.index,
        replicas=_ints_or(record.replicas, current.replicas),
        isr=_ints_or(record.isr, current.isr),
        leader=int(record.leader) if leader_changed else current.leader,
        # Kafka bumps the leader epoch whenever the record names a leader: a new one, or
        # the same one when replicas leave the partition.
        leader_epoch=current.leader_epoch + (1 if leader_changed else 0),
        partition_epoch=current.partition_epoch + 1,
        adding_replicas=_ints_or(record.adding_replicas, current.adding_replicas),
        removing_replicas=_ints_or(record.removing_replicas, current.removing_replicas),
    )


def _ints_or(values: tuple[Any, ...] | None, unchanged: tuple[int, ...]) -> tuple[int, ...]:
    return unchanged if values is None else tuple(int(v) for v in values)


def _set_or_remove(configs: dict[str, str], name: str, value: str | None) -> None:
    if value is None:
        configs.pop(name, None)
    else:
        configs[name] = value


def replacement(before: images.MetadataImage, after: images.MetadataImage) -> MetadataDelta:
    """The delta that replaces ``before`` by ``after`` (a snapshot loaded in its place),
    described as the differences between the two, as Kafka's MetadataDelta after
    finishSnapshot: publishers see only what changed, so a snapshot that matches the image
    opens or deletes no log. ``apply()`` gives an image equal to ``after``.

    A topic that changed name, or lost partitions (which Kafka never does), is described
    as removed and created again."""
    if before.cluster_id != after.cluster_id:
        raise DeltaError(
            f"a snapshot of cluster {after.cluster_id} cannot replace cluster {before.cluster_id}"
        )
    delta = MetadataDelta(before, offset=after.offset, is_snapshot=True)
    for topic_id, old in before.topics_by_id.items():
        new = after.topics_by_id.get(topic_id)
        if (
            new is None
            or new.name != old.name
            or not old.partitions.keys() <= new.partitions.keys()
        ):
            delta.removed_topics[topic_id] = old
    for topic_id, new in after.topics_by_id.items():
        old_topic = None if topic_id in delta.removed_topics else before.topics_by_id.get(topic_id)
        if old_topic is None:
            delta.created_topics.add(topic_id)
            changed = set(new.partitions)
            configs_changed = bool(new.configs)
        else:
            changed = {
                index
                for index, partition in new.partitions.items()
                if old_topic.partitions.get(index) != partition
            }
            configs_changed = old_topic.configs != new.configs
        if changed or configs_changed or old_topic is None:
            delta._topics[topic_id] = _TopicChange(
                new.name, topic_id, dict(new.partitions), dict(new.configs)
            )
        if changed:
            delta.changed_partitions[topic_id] = changed
        if configs_changed:
            delta.changed_topic_configs.add(topic_id)
    for name in before.broker_configs.keys() | after.broker_configs.keys():
        layer = dict(after.broker_configs.get(name, {}))
        if dict(before.broker_configs.get(name, {})) != layer:
            delta._broker_configs[name] = layer
            delta.changed_broker_configs.add(name)
    for group_id in before.group_configs.keys() | after.group_configs.keys():
        configs = dict(after.group_configs.get(group_id, {}))
        if dict(before.group_configs.get(group_id, {})) != configs:
            delta._group_configs[group_id] = configs
            delta.changed_group_configs.add(group_id)
    for node_id in before.brokers.keys() | after.brokers.keys():
        broker = after.brokers.get(node_id)
        if before.brokers.get(node_id) != broker:
            delta._brokers[node_id] = broker
            delta.changed_brokers.add(node_id)
    if before.next_producer_id != after.next_producer_id:
        delta._next_producer_id = after.next_producer_id
        delta.producer_ids_changed = True
    return delta
