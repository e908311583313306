"""Writing transaction markers: into this broker's partitions (the WriteTxnMarkers handler
and the local coordinator share `write_local`), and to other brokers' partitions with
WriteTxnMarkers v1 over a channel of its own (`MarkerSender`, the coordinator's
`SendMarkers`; Kafka's TransactionMarkerChannelManager).

A marker in a `__consumer_offsets` partition also ends the producer's pending offset
commits there (Kafka's onTransactionCompleted). A partition of a deleted topic needs no
marker: it answers NONE, so the transaction can complete.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from strom.cluster import image as images
from strom.cluster import topics
from strom.coordinator import groups as group_coordinator
from strom.coordinator import transactions
from strom.network import channel as channels
from strom.network import errors as network_errors
from strom.protocol import apis, outbound
from strom.records import control
from strom.replication import replica_manager
from strom.server import topic_entries
from strom.server.handlers import producing

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS_VERSION = 1


class LocalMarkers:
    """Markers into the partitions this broker leads."""

    def __init__(
        self,
        replicas: replica_manager.ReplicaManager,
        groups: group_coordinator.GroupCoordinator,
        image: Callable[[], images.MetadataImage],
        min_insync_replicas: Callable[[str], int],
        time_ms: Callable[[], int],
    ) -> None:
        self._replicas = replicas
        self._groups = groups
        self._image = image
        self._min_insync_replicas = min_insync_replicas
        self._time_ms = time_ms

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        wanted = list(partitions)
        results = await asyncio.gather(
            *(
                self._write_one(producer_id, producer_epoch, commit, coordinator_epoch, each)
                for each in wanted
            )
        )
        return dict(zip(wanted, results, strict=True))

    async def _write_one(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        topic_partition: TopicPartition,
    ) -> ErrorCode:
        topic, index = topic_partition
        partition = self._replicas.partition(topic, index)
        if partition is None:
            if topic not in self._image().topics:
                return ErrorCode.unknown_topic_or_partition
            return ErrorCode.not_leader_or_follower
        outcome = await partition.append_marker(
            producer_id,
            producer_epoch,
            control.EndTxnMarker(commit, coordinator_epoch),
            self._time_ms(),
            self._min_insync_replicas(topic),
        )
        if outcome.error is not None:
            return producing.APPEND_ERROR_CODES[outcome.error]
        if topic == topics.OFFSETS_TOPIC:
            self._groups.on_transaction_completed(producer_id, index, commit)
        return ErrorCode.none


class MarkerSender:
    """The transaction coordinator's way to its markers: grouped by the partitions'
    leaders, local ones written directly, others sent as WriteTxnMarkers."""

    def __init__(
        self,
        node_id: int,
        local: LocalMarkers,
        channel: channels.Channel,
        image: Callable[[], images.MetadataImage],
    ) -> None:
        self._node_id = node_id
        self._local = local
        self._channel = channel
        self._image = image

    async def __call__(
        self, request: transactions.MarkerRequest
    ) -> Mapping[TopicPartition, ErrorCode]:
        image = self._image()
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        answers: dict[TopicPartition, ErrorCode] = {}
        for topic, index in request.partitions:
            topic_image = image.topics.get(topic)
            if topic_image is None:
                answers[(topic, index)] = ErrorCode.none  # deleted: nothing to mark
                continue
            partition = topic_image.partitions.get(index)
            if partition is None or partition.leader < 0:
                answers[(topic, index)] = ErrorCode.not_leader_or_follower
                continue
            by_leader[partition.leader].append((topic, index))
        rounds = [self._send(leader, request, wanted) for leader, wanted in by_leader.items()]
        for result in await asyncio.gather(*rounds):
            answers.update(result)
        # A topic deleted while its marker was on the way needs no marker either.
        topics_now = self._image().topics
        for (topic, index), error in list(answers.items()):
            if error is ErrorCode.unknown_topic_or_partition and topic not in topics_now:
                answers[(topic, index)] = ErrorCode.none
        return answers

    async def _send(
        self, leader: int, request: transactions.MarkerRequest, wanted: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        if leader == self._node_id:
            return await self._local.write(
                request.producer_id,
                request.producer_epoch,
                request.commit,
                request.coordinator_epoch,
                wanted,
            )
        try:
            response = await self._channel.send(
                leader, _draft(request, wanted), api_version=WRITE_TXN_MARKERS_VERSION
            )
        except network_errors.NetworkError as error:
            log.info("WriteTxnMarkers to broker %d failed: %s; will retry", leader, error)
            return dict.fromkeys(wanted, ErrorCode.not_leader_or_follower)
        return topic_entries.read_errors(
            wanted,
            (
                (topic.name, partition.partition_index, partition.error_code)
                for marker in response.markers
                for topic in marker.topics
                for partition in topic.partitions
            ),
        )


def _draft(request: transactions.MarkerRequest, wanted: list[TopicPartition]) -> Any:
    return outbound.Draft(
        apis.ApiKey.WRITE_TXN_MARKERS,
        {
            "markers": [
                {
                    "producer_id": request.producer_id,
                    "producer_epoch": request.producer_epoch,
                    "transaction_result": request.commit,
                    "coordinator_epoch": request.coordinator_epoch,
                    "transaction_version": int(request.transaction_version),
                    "topics": [
                        {"name": topic, "partition_indexes": indexes}
                        for topic, indexes in topic_entries.group(sorted(wanted)).items()
                    ],
                }
            ]
        },
    )
