"""Broker registrations and heartbeats, as the active controller judges them.

Kafka's ClusterControlManager and BrokerHeartbeatManager, sans-I/O: a broker registers
(a new incarnation gets a new broker epoch and starts fenced), heartbeats every
broker.heartbeat.interval.ms, is unfenced once it has caught up with the metadata log
as of its registration, and is fenced again when it asks to be, or when no heartbeat
came for broker.session.timeout.ms. A broker that asks to shut down goes through a
controlled shutdown first when it leads partitions others could lead (`heartbeat`).
Decisions are metadata records for the controller to commit; the times of last contact
and the metadata offsets brokers report live only in the active controller's memory (a
new controller gives every broker a fresh session, as Kafka's does).
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass

from kio.static.primitive import i8, i16, i32, i64, u16

from strom.cluster import image as images
from strom.cluster import leader_election, records, topics


class DuplicateBrokerRegistrationError(topics.MetadataError):
    """Another live incarnation holds this node id (Kafka's DUPLICATE_BROKER_REGISTRATION)."""


class StaleBrokerEpochError(topics.MetadataError):
    """A heartbeat from an incarnation that is no longer registered (STALE_BROKER_EPOCH)."""


class InconsistentClusterError(topics.MetadataError):
    """A broker of another cluster (Kafka's INCONSISTENT_CLUSTER_ID)."""


@dataclass(frozen=True, slots=True)
class Registration:
    node_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    endpoints: tuple[images.BrokerEndpoint, ...]
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool = False
    in_controlled_shutdown: bool = False


class BrokerSessions:
    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self._last_contact: dict[int, int] = {}
        # the metadata offset each broker last reported, and the offset of the records
        # that put a broker in a controlled shutdown (memory of the active controller)
        self._metadata_offsets: dict[int, int] = {}
        self._shutdown_offsets: dict[int, int] = {}

    def activate(self, now_ms: int) -> None:
        """This controller just became active: what it remembers of the brokers' contacts
        is from an earlier term (they heartbeated to another controller since), so each
        gets a session from now."""
        for node_id in self._last_contact:
            self._last_contact[node_id] = now_ms

    def next_expiry_ms(self, image: images.MetadataImage, now_ms: int) -> int | None:
        """When the first live session runs out if no heartbeat comes (None: none)."""
        deadlines = [
            self._last_contact.get(node_id, now_ms) + self.session_timeout_ms
            for node_id, broker in image.brokers.items()
            if not broker.fenced
        ]
        return min(deadlines, default=None)

    def _alive(self, node_id: int, now_ms: int) -> bool:
        last = self._last_contact.get(node_id)
        return last is not None and now_ms - last < self.session_timeout_ms

    def register(
        self, image: images.MetadataImage, registration: Registration, now_ms: int
    ) -> records.RegisterBrokerRecord:
        """The record registering this incarnation; its broker epoch is the metadata
        offset it will be written at, so epochs only grow."""
        if registration.cluster_id != image.cluster_id:
            raise InconsistentClusterError(
                f"broker {registration.node_id} belongs to cluster {registration.cluster_id}, "
                f"this is {image.cluster_id}"
            )
        existing = image.brokers.get(registration.node_id)
        if (
            existing is not None
            and existing.incarnation_id != registration.incarnation_id
            and self._alive(registration.node_id, now_ms)
        ):
            raise DuplicateBrokerRegistrationError(
                f"Another broker is registered with that broker id ({registration.node_id}) "
                "and its session has not expired."
            )
        self._last_contact[registration.node_id] = now_ms
        self._shutdown_offsets.pop(registration.node_id, None)
        return records.RegisterBrokerRecord(
            broker_id=i32(registration.node_id),
            incarnation_id=registration.incarnation_id,
            broker_epoch=i64(image.offset + 1),
            end_points=tuple(
                records.BrokerEndpoint(
                    name=e.listener,
                    host=e.host,
                    port=u16(e.port),
                    security_protocol=i16(e.security_protocol),
                )
                for e in registration.endpoints
            ),
            rack=registration.rack,
            fenced=True,
        )

    def heartbeat(
        self,
        image: images.MetadataImage,
        node_id: int,
        broker_epoch: int,
        metadata_offset: int,
        want_fence: bool,
        want_shut_down: bool,
        now_ms: int,
    ) -> tuple[list[records.MetadataRecord], HeartbeatAnswer]:
        """The records the heartbeat calls for (unfence, fence, or enter a controlled
        shutdown) and the answer: Kafka's BrokerHeartbeatManager.calculateNextBrokerState.

        A broker that wants to shut down while it leads partitions another active
        in-sync replica could lead enters a controlled shutdown (the controller moves
        those leaderships and takes it out of the ISRs); it may go once it leads none
        of them and every active broker has reported a metadata offset at least that of
        the change (they all know their new leaderships): then it is fenced."""
        broker = image.brokers.get(node_id)
        if broker is None or broker.epoch != broker_epoch:
            raise StaleBrokerEpochError(f"broker {node_id} epoch {broker_epoch} is not registered")
        self._last_contact[node_id] = now_ms
        self._metadata_offsets[node_id] = metadata_offset
        caught_up = metadata_offset >= broker.epoch
        fence = records.FenceBrokerRecord(id=i32(node_id), epoch=i64(broker.epoch))
        if broker.fenced:
            if want_shut_down:
                return self._leaving(node_id, [], caught_up)
            if not want_fence and caught_up:
                unfence = records.UnfenceBrokerRecord(id=i32(node_id), epoch=i64(broker.epoch))
                return [unfence], HeartbeatAnswer(caught_up, is_fenced=False)
            return [], HeartbeatAnswer(caught_up, is_fenced=True)
        if broker.in_controlled_shutdown:
            if leader_election.leads_with_alternative(image, node_id):
                return [], HeartbeatAnswer(caught_up, False, in_controlled_shutdown=True)
            shutdown_offset = self._shutdown_offsets.setdefault(node_id, image.offset)
            if shutdown_offset <= self._lowest_active_offset(image):
                return self._leaving(node_id, [fence], caught_up)
            return [], HeartbeatAnswer(caught_up, False, in_controlled_shutdown=True)
        if want_shut_down:
            if want_fence or not leader_election.leads_with_alternative(image, node_id):
                return self._leaving(node_id, [fence], caught_up)
            enter = records.BrokerRegistrationChangeRecord(
                broker_id=i32(node_id), broker_epoch=i64(broker.epoch), in_controlled_shutdown=i8(1)
            )
            return [enter], HeartbeatAnswer(caught_up, False, in_controlled_shutdown=True)
        if want_fence:
            return [fence], HeartbeatAnswer(caught_up, is_fenced=True)
        return [], HeartbeatAnswer(caught_up, is_fenced=False)

    def entered_controlled_shutdown(self, node_id: int, offset: int) -> None:
        """The records putting `node_id` in a controlled shutdown are applied up to
        `offset`: it may go once every active broker has seen them."""
        self._shutdown_offsets.setdefault(node_id, offset)

    def _leaving(
        self, node_id: int, changes: list[records.MetadataRecord], caught_up: bool
    ) -> tuple[list[records.MetadataRecord], HeartbeatAnswer]:
        # the incarnation is leaving: its next one may register at once
        self._last_contact.pop(node_id, None)
        self._shutdown_offsets.pop(node_id, None)
        return changes, HeartbeatAnswer(caught_up, is_fenced=True, should_shut_down=True)

    def _lowest_active_offset(self, image: images.MetadataImage) -> float:
        """The lowest metadata offset an active broker last reported (Kafka's
        lowestActiveOffset); infinite with none active."""
        offsets = [
            self._metadata_offsets.get(node_id, -1)
            for node_id, broker in image.brokers.items()
            if broker.is_active
        ]
        return min(offsets, default=math.inf)

    def expired(self, image: images.MetadataImage, now_ms: int) -> list[records.MetadataRecord]:
        """Fence the unfenced brokers whose session expired. A broker this controller never
        heard from gets a session from now (a new controller does not fence at once)."""
        fences: list[records.MetadataRecord] = []
        for node_id, broker in image.brokers.items():
            if broker.fenced:
                continue  # no session to keep (a broker that left must not hold its id)
            self._last_contact.setdefault(node_id, now_ms)
            if not self._alive(node_id, now_ms):
                fences.append(records.FenceBrokerRecord(id=i32(node_id), epoch=i64(broker.epoch)))
        return fences
