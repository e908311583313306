"""Broker registrations and heartbeats, as the active controller judges them.

Kafka's ClusterControlManager and BrokerHeartbeatManager, sans-I/O: a broker registers
(a new incarnation gets a new broker epoch and starts fenced), heartbeats every
broker.heartbeat.interval.ms, is unfenced once it has caught up with the metadata log
as of its registration, and is fenced again when it asks to be, or when no heartbeat
came for broker.session.timeout.ms. Decisions are metadata records for the controller to
commit; the times of last contact live only in the active controller's memory (a new
controller gives every broker a fresh session, as Kafka's does).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kio.static.primitive import i16, i32, i64, u16

from strom.cluster import image as images
from strom.cluster import records, topics


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


class BrokerSessions:
    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self._last_contact: dict[int, int] = {}

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
        """The records the heartbeat calls for (unfence or fence) and the answer."""
        broker = image.brokers.get(node_id)
        if broker is None or broker.epoch != broker_epoch:
            raise StaleBrokerEpochError(f"broker {node_id} epoch {broker_epoch} is not registered")
        self._last_contact[node_id] = now_ms
        caught_up = metadata_offset >= broker.epoch
        changes: list[records.MetadataRecord] = []
        fenced = broker.fenced
        if want_fence or want_shut_down:
            if not broker.fenced:
                changes.append(records.FenceBrokerRecord(id=i32(node_id), epoch=i64(broker.epoch)))
            fenced = True
        elif broker.fenced and caught_up:
            changes.append(records.UnfenceBrokerRecord(id=i32(node_id), epoch=i64(broker.epoch)))
            fenced = False
        if want_shut_down:
            # the incarnation is leaving: its next one may register at once
            del self._last_contact[node_id]
        return changes, HeartbeatAnswer(caught_up, fenced, should_shut_down=want_shut_down)

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
