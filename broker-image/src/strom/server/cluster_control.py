"""Metadata changes the broker makes on its own behalf, wherever the active controller is.

A client's admin request is forwarded as it is (`handlers.forwarding`); the broker's own
needs are not client requests: `__consumer_offsets` created on first use, a topic
auto-created by a Metadata request, a block of producer ids, a partition leader's ISR
changes (AlterPartition). `ClusterControl` serves
them from the local `controller.Controller` when this node is the active controller and
through the `ControllerChannel` otherwise, then waits until this node's image shows the
change (a caller reads the image next), as Kafka's broker waits for its metadata cache.

`MetadataWatch` is the publisher those waits hang on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from strom.clock import Clock
from strom.cluster import controller, controller_channel, isr_changes, topic_requests, topics
from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import loader as loaders
from strom.config import definitions as config_definitions
from strom.protocol import outbound

CREATE_TOPICS = 19
# How long a broker waits for its own image to show a change the controller committed.
PROPAGATION_TIMEOUT_S = 30.0

_ERRORS: dict[ErrorCode, type[topics.MetadataError]] = {
    ErrorCode.topic_already_exists: topics.TopicExistsError,
    ErrorCode.invalid_topic_exception: topics.InvalidTopicError,
    ErrorCode.invalid_partitions: topics.InvalidPartitionsError,
    ErrorCode.invalid_replication_factor: topics.InvalidReplicationFactorError,
    ErrorCode.policy_violation: topics.PolicyViolationError,
    ErrorCode.kafka_storage_error: topics.StorageFailedError,
    ErrorCode.not_controller: topics.NotControllerError,
    ErrorCode.request_timed_out: topics.CommitTimeoutError,
}


class MetadataWatch:
    """A publisher that wakes whoever waits for the image to reach a condition."""

    name = "metadata watch"

    def __init__(self, loader: loaders.MetadataLoader, clock: Clock) -> None:
        self._loader = loader
        self._clock = clock
        self._changed = asyncio.Event()

    def publish(self, delta: deltas.MetadataDelta, image: images.MetadataImage) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(
        self, condition: Callable[[images.MetadataImage], bool], timeout_s: float
    ) -> bool:
        """True once ``condition(image)`` holds, False at the deadline."""
        deadline = self._clock.monotonic() + timeout_s
        while not condition(self._loader.image):
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return True


class ClusterControl:
    def __init__(
        self,
        local: controller.Controller,
        remote: controller_channel.ControllerChannel | None,
        watch: MetadataWatch,
    ) -> None:
        """`remote` None: a quorum of one, where this node is always the controller."""
        self._local = local
        self._remote = remote
        self._watch = watch

    def _is_local(self) -> bool:
        return self._remote is None or self._remote.is_local()

    async def create_topics(
        self, wanted: Sequence[topic_requests.NewTopic]
    ) -> list[topic_requests.TopicOutcome]:
        if self._is_local() or self._remote is None:
            return await self._local.create_topics(wanted)
        response = await self._remote.forward(_create_topics_request(wanted))
        outcomes = [_outcome(entry) for entry in response.topics]
        created = {outcome.name for outcome in outcomes if outcome.error is None}
        if created:
            await self._watch.wait_until(
                lambda image: created <= set(image.topics), PROPAGATION_TIMEOUT_S
            )
        return outcomes

    async def allocate_producer_ids(self, broker_id: int) -> range:
        if self._is_local() or self._remote is None:
            return await self._local.allocate_producer_ids(broker_id)
        return await self._remote.allocate_producer_ids(broker_id)

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[isr_changes.IsrChange]
    ) -> list[isr_changes.IsrOutcome]:
        """A partition leader's ISR changes (`broker_epoch`: BrokerLifecycle.broker_epoch).
        Each outcome says the partition's state: error none, the committed one. Raises
        topics.MetadataError when no controller answered."""
        if self._is_local() or self._remote is None:
            return await self._local.alter_partition(broker_id, broker_epoch, changes)
        return await self._remote.alter_partition(broker_id, broker_epoch, changes)


def _create_topics_request(wanted: Sequence[topic_requests.NewTopic]) -> Any:
    return outbound.Draft(
        CREATE_TOPICS,
        {
            "topics": [
                {
                    "name": topic.name,
                    "num_partitions": topic.partitions,
                    "replication_factor": topic.replication_factor,
                    "assignments": [
                        {"partition_index": index, "broker_ids": list(replicas)}
                        for index, replicas in enumerate(topic.assignments)
                    ],
                    "configs": [
                        {"name": name, "value": value} for name, value in topic.configs.items()
                    ],
                }
                for topic in wanted
            ],
            "timeout": 30_000,
            "validate_only": False,
        },
    ).at(7)


def _outcome(entry: Any) -> topic_requests.TopicOutcome:
    code = ErrorCode(entry.error_code)
    name = str(entry.name)
    if code == ErrorCode.none:
        return topic_requests.TopicOutcome(
            name,
            topic_id=entry.topic_id,
            partitions=int(entry.num_partitions),
            replication_factor=int(entry.replication_factor),
        )
    message = entry.error_message or code.name
    error: Exception
    if code == ErrorCode.invalid_config:
        error = config_definitions.ConfigError(message)
    else:
        error = _ERRORS.get(code, topics.MetadataError)(message)
    return topic_requests.TopicOutcome(name, error)
