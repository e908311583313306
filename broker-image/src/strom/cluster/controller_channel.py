"""How a broker reaches the active controller: Kafka's NodeToControllerChannelManager.

`ControllerChannel` sends the broker lifecycle RPCs (BrokerRegistration, BrokerHeartbeat,
AllocateProducerIds), a partition leader's AlterPartition, and forwarded admin requests
(CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs,
ElectLeaders, sent unchanged) to whichever node `active_controller()` names, on that
node's controller listener (the channel's resolver gives a node's controller endpoint:
`controller_endpoints` reads them from the quorum's voters).

A request that finds no active controller, a disconnect or timeout, or an answer of
NOT_CONTROLLER (the node lost or never had the leadership) is tried again after
`retry_backoff_s`, asking `active_controller()` again, until its deadline. Then it
raises `ControllerUnavailableError` (a `topics.NotControllerError`: no controller
accepted it) or `ControllerTimeoutError` (the last attempt timed out or was cut off);
both are retriable, and handlers answer them NOT_CONTROLLER and REQUEST_TIMED_OUT.

The lifecycle methods have the signatures of the local `controller.Controller`'s, so a
broker's lifecycle manager can use either; a controller's refusal comes back as the same
exception the local controller raises (DuplicateBrokerRegistrationError, ...).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from strom.cluster import broker_sessions, isr_changes, topics
from strom.config import quorum as quorum_config
from strom.network import channel as channels
from strom.network import clock as clocks
from strom.network import errors as network_errors
from strom.protocol import outbound

log = logging.getLogger(__name__)

BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
ALLOCATE_PRODUCER_IDS = 67
ALTER_PARTITION = 56

DEFAULT_REQUEST_TIMEOUT_S = 30.0  # request.timeout.ms
DEFAULT_RETRY_BACKOFF_S = 0.1  # retry.backoff.ms
# How often a request in flight checks whether the active controller has moved.
CONTROLLER_CHECK_S = 0.1

# What an attempt gives when the active controller moved while it was in flight.
_MOVED = object()

# The entries of a forwarded admin response that carry its per-topic or per-resource errors.
_ENTRY_FIELDS = ("topics", "responses", "results")


class ControllerUnavailableError(topics.NotControllerError):
    """No node accepted the request as the active controller before its deadline."""


class ControllerTimeoutError(topics.MetadataError):
    """The active controller did not answer before the request's deadline."""


class ControllerRefusedError(topics.MetadataError):
    """The controller answered with an error this channel has no exception for."""

    def __init__(self, api_name: str, error_code: ErrorCode) -> None:
        super().__init__(f"the controller refused {api_name}: {error_code.name}")
        self.error_code = error_code


_REFUSALS: dict[ErrorCode, type[topics.MetadataError]] = {
    ErrorCode.duplicate_broker_registration: broker_sessions.DuplicateBrokerRegistrationError,
    ErrorCode.inconsistent_cluster_id: broker_sessions.InconsistentClusterError,
    ErrorCode.stale_broker_epoch: broker_sessions.StaleBrokerEpochError,
    ErrorCode.kafka_storage_error: topics.StorageFailedError,
}


def controller_endpoints(settings: quorum_config.QuorumSettings) -> channels.Resolver:
    """A channel resolver: a voter's node id to its controller endpoint."""
    endpoints = {voter.node_id: (voter.host, voter.port) for voter in settings.voters}
    return endpoints.get


class ControllerChannel:
    def __init__(
        self,
        channel: channels.Channel,
        active_controller: Callable[[], int | None],
        *,
        node_id: int,
        clock: clocks.Clock,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
    ) -> None:
        """`channel` resolves node ids to controller endpoints; `active_controller` is
        the Raft leader as this node knows it (None while unknown); `node_id` is this
        node's, for `is_local`."""
        self._channel = channel
        self._active_controller = active_controller
        self.node_id = node_id
        self._clock = clock
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s

    # Broker lifecycle ----------------------------------------------------------------

    async def register_broker(
        self, registration: broker_sessions.Registration, now_ms: int | None = None
    ) -> int:
        """The new broker epoch of this incarnation. `now_ms` is ignored: the active
        controller judges sessions by its own clock."""
        response = await self._send(
            outbound.Draft(
                BROKER_REGISTRATION,
                {
                    "broker_id": registration.node_id,
                    "cluster_id": registration.cluster_id,
                    "incarnation_id": registration.incarnation_id,
                    "listeners": [
                        {
                            "name": endpoint.listener,
                            "host": endpoint.host,
                            "port": endpoint.port,
                            "security_protocol": endpoint.security_protocol,
                        }
                        for endpoint in registration.endpoints
                    ],
                    "features": [],
                    "rack": registration.rack,
                    "is_migrating_zk_broker": False,
                    "log_dirs": [],
                    "previous_broker_epoch": -1,
                },
            ),
            "BrokerRegistration",
        )
        _raise_refusal(response, "BrokerRegistration")
        return int(response.broker_epoch)

    async def broker_heartbeat(
        self,
        node_id: int,
        broker_epoch: int,
        metadata_offset: int,
        *,
        want_fence: bool,
        want_shut_down: bool,
        now_ms: int | None = None,
    ) -> broker_sessions.HeartbeatAnswer:
        """The controller's answer (`now_ms` is ignored, as in `register_broker`)."""
        response = await self._send(
            outbound.Draft(
                BROKER_HEARTBEAT,
                {
                    "broker_id": node_id,
                    "broker_epoch": broker_epoch,
                    "current_metadata_offset": metadata_offset,
                    "want_fence": want_fence,
                    "want_shut_down": want_shut_down,
                    "offline_log_dirs": [],
                },
            ),
            "BrokerHeartbeat",
        )
        _raise_refusal(response, "BrokerHeartbeat")
        return broker_sessions.HeartbeatAnswer(
            is_caught_up=bool(response.is_caught_up),
            is_fenced=bool(response.is_fenced),
            should_shut_down=bool(response.should_shut_down),
        )

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1) -> range:
        """A block of producer ids never handed out before."""
        response = await self._send(
            outbound.Draft(
                ALLOCATE_PRODUCER_IDS, {"broker_id": broker_id, "broker_epoch": broker_epoch}
            ),
            "AllocateProducerIds",
        )
        _raise_refusal(response, "AllocateProducerIds")
        start = int(response.producer_id_start)
        return range(start, start + int(response.producer_id_len))

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[isr_changes.IsrChange]
    ) -> list[isr_changes.IsrOutcome]:
        """AlterPartition (v3, or v2 with a controller that has no v3: the new ISR without
        broker epochs): the controller's outcome per change, in order (a change the
        answer leaves out gets UNKNOWN_SERVER_ERROR). STALE_BROKER_EPOCH, the whole
        request's error, is every change's."""
        response = await self._send(
            outbound.Draft(
                ALTER_PARTITION,
                {
                    "broker_id": broker_id,
                    "broker_epoch": broker_epoch,
                    "topics": [
                        {
                            "topic_id": topic_id,
                            "partitions": [
                                {
                                    "partition_index": change.partition,
                                    "leader_epoch": change.leader_epoch,
                                    "new_isr": list(change.new_isr),
                                    "new_isr_with_epochs": [
                                        {"broker_id": member, "broker_epoch": epoch}
                                        for member, epoch in _with_epochs(change)
                                    ],
                                    "leader_recovery_state": 0,
                                    "partition_epoch": change.partition_epoch,
                                }
                                for change in grouped
                            ],
                        }
                        for topic_id, grouped in _by_topic(changes).items()
                    ],
                },
            ),
            "AlterPartition",
        )
        code = ErrorCode(response.error_code)
        if code != ErrorCode.none:
            return [isr_changes.refused(change, code) for change in changes]
        answered = {
            (topic.topic_id, int(p.partition_index)): isr_changes.IsrOutcome(
                topic.topic_id,
                int(p.partition_index),
                ErrorCode(p.error_code),
                int(p.leader_id),
                int(p.leader_epoch),
                tuple(int(r) for r in p.isr),
                int(p.partition_epoch),
            )
            for topic in response.topics
            for p in topic.partitions
        }
        return [
            answered.get(
                (change.topic_id, change.partition),
                isr_changes.refused(change, ErrorCode.unknown_server_error),
            )
            for change in changes
        ]

    # Forwarding ----------------------------------------------------------------------

    def is_local(self) -> bool:
        """This node is the active controller: admin requests are handled here."""
        return self._active_controller() == self.node_id

    async def forward(self, body: Any, timeout_s: float | None = None) -> Any:
        """The active controller's response to a client's admin request, sent unchanged
        (at its own version). A response whose every entry says NOT_CONTROLLER is
        retried like a disconnect."""
        return await self._send(body, type(body).__name__, timeout_s)

    async def close(self) -> None:
        await self._channel.close()

    # Sending -------------------------------------------------------------------------

    async def _send(self, request: Any, api_name: str, timeout_s: float | None = None) -> Any:
        deadline = self._clock.monotonic() + (
            self.request_timeout_s if timeout_s is None else timeout_s
        )
        timed_out: str | None = None  # why the last attempt failed, if it did not answer
        refused = False  # a node answered that it is not the active controller
        while True:
            node_id = self._active_controller()
            remaining = deadline - self._clock.monotonic()
            if node_id is not None and remaining > 0:
                try:
                    response = await self._attempt(node_id, request, remaining)
                except network_errors.UnsupportedVersion as error:
                    raise ControllerRefusedError(api_name, ErrorCode.unsupported_version) from error
                except network_errors.NetworkError as error:
                    log.debug("%s to controller %d failed: %s", api_name, node_id, error)
                    timed_out = f"controller {node_id}: {error}"
                else:
                    if response is _MOVED:
                        log.info(
                            "%s: the active controller moved from node %d to %s while it was"
                            " in flight; sending it again",
                            api_name,
                            node_id,
                            self._active_controller(),
                        )
                        timed_out = None
                        continue
                    if not _answers_not_controller(response):
                        return response
                    log.debug("node %d is not the active controller", node_id)
                    refused = True
                    timed_out = None
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                break
            await self._clock.sleep(min(self.retry_backoff_s, remaining))
        if timed_out is not None and not refused:
            raise ControllerTimeoutError(f"{api_name} timed out: {timed_out}")
        # Refused as not the controller, then maybe a last attempt cut short by the
        # deadline (a few ms left after a back-off, on a busy machine): what is known is
        # that no node took it as the active controller, a retriable NOT_CONTROLLER.
        last = f" (last attempt: {timed_out})" if timed_out is not None else ""
        raise ControllerUnavailableError(f"{api_name}: no active controller answered in time{last}")

    async def _attempt(self, node_id: int, request: Any, timeout_s: float) -> Any:
        """`node_id`'s answer, or _MOVED once another node is the active controller: a
        controller that lost the leadership may never answer what it was sent (it may be
        the node that is stalled), so the request goes to the new one without waiting
        for its deadline, as Kafka's NodeToControllerChannelManager moves to a new
        controller. The abandoned attempt's answer, if any comes, is dropped."""
        sending = asyncio.ensure_future(self._channel.send(node_id, request, timeout_s=timeout_s))
        try:
            while True:
                done, _ = await asyncio.wait({sending}, timeout=CONTROLLER_CHECK_S)
                if done:
                    return sending.result()
                if self._active_controller() not in (node_id, None):
                    return _MOVED
        finally:
            if not sending.done():
                sending.cancel()


def _by_topic(
    changes: Sequence[isr_changes.IsrChange],
) -> dict[uuid.UUID, list[isr_changes.IsrChange]]:
    grouped: dict[uuid.UUID, list[isr_changes.IsrChange]] = {}
    for change in changes:
        grouped.setdefault(change.topic_id, []).append(change)
    return grouped


def _with_epochs(change: isr_changes.IsrChange) -> list[tuple[int, int]]:
    epochs = change.broker_epochs or (isr_changes.NO_BROKER_EPOCH,) * len(change.new_isr)
    return list(zip(change.new_isr, epochs, strict=True))


def _answers_not_controller(response: Any) -> bool:
    """The node that answered is not the active controller: the top-level error says so,
    or (a forwarded admin response, which has none) every topic's or resource's does."""
    top_level = getattr(response, "error_code", None)
    if top_level is not None:
        return bool(top_level == ErrorCode.not_controller)
    codes = [
        entry.error_code
        for name in _ENTRY_FIELDS
        for entry in getattr(response, name, ())
        if hasattr(entry, "error_code")
    ]
    return bool(codes) and all(code == ErrorCode.not_controller for code in codes)


def _raise_refusal(response: Any, api_name: str) -> None:
    code = ErrorCode(response.error_code)
    if code == ErrorCode.none:
        return
    refusal = _REFUSALS.get(code)
    if refusal is not None:
        raise refusal(f"the controller refused {api_name}: {code.name}")
    raise ControllerRefusedError(api_name, code)
