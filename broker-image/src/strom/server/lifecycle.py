"""A broker's life as the active controller sees it: Kafka's BrokerLifecycleManager.

`BrokerLifecycle` registers this broker incarnation (again and again until a controller
accepts it), then heartbeats every broker.heartbeat.interval.ms with the broker's
current metadata offset. The controller answers whether the broker has caught up with
the metadata log and whether it is fenced; the broker starts fenced and is unfenced by
the first heartbeat after it has caught up, unless it asks to stay fenced
(`wait_until_ready`: heartbeats ask to be fenced until `ready_to_unfence()`, as Kafka's
broker does while it recovers its logs). `shut_down` is the controlled shutdown:
heartbeats that ask to shut down until the controller answers that the broker may
(it has moved the leaderships other in-sync replicas can take, every active broker
knows, and it has fenced it), or until a deadline.

A heartbeat that the controller no longer knows (STALE_BROKER_EPOCH: another
registration of this node id replaced this one) makes the broker register again.
Other failures (no controller, timeouts, storage errors) are logged and the next
heartbeat tries again.

The controller is a `LifecycleController`: the local `controller.Controller` when this
node is the active controller, or a `controller_channel.ControllerChannel` to reach it
over the network; both have these methods.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from strom import tasks
from strom.clock import Clock
from strom.cluster import broker_sessions, topics

if TYPE_CHECKING:
    from strom.cluster import controller, controller_channel
    from strom.server import context

log = logging.getLogger(__name__)

DEFAULT_RETRY_BACKOFF_MS = 100  # between failed registrations (Kafka's retry.backoff.ms)
CONTROLLED_SHUTDOWN_RETRY_S = 0.05  # Kafka's BrokerLifecycleManager: 50 ms


class LifecycleController(Protocol):
    # Methods returning awaitables rather than `async def`: the Controller's are wrapped
    # (not cancelled midway), which mypy sees as returning Awaitable, not a coroutine.
    def register_broker(
        self, registration: broker_sessions.Registration, now_ms: int
    ) -> Awaitable[int]:
        """This incarnation's new broker epoch; raises topics.MetadataError subclasses."""
        ...

    def broker_heartbeat(
        self,
        node_id: int,
        broker_epoch: int,
        metadata_offset: int,
        *,
        want_fence: bool,
        want_shut_down: bool,
        now_ms: int,
    ) -> Awaitable[broker_sessions.HeartbeatAnswer]:
        """The controller's answer; raises topics.MetadataError subclasses
        (broker_sessions.StaleBrokerEpochError: register again)."""
        ...


class BrokerLifecycle:
    def __init__(
        self,
        controller: LifecycleController,
        registration: broker_sessions.Registration,
        *,
        metadata_offset: Callable[[], int],
        clock: Clock,
        heartbeat_interval_ms: int,
        retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS,
        wait_until_ready: bool = False,
    ) -> None:
        self._controller = controller
        self.registration = registration
        self._metadata_offset = metadata_offset
        self._clock = clock
        self._interval_s = heartbeat_interval_ms / 1000
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._ready = not wait_until_ready
        self.broker_epoch: int | None = None  # None: not registered (any more)
        self.registered = asyncio.Event()
        self.caught_up = asyncio.Event()  # a heartbeat answer said so (it stays set)
        self.unfenced = asyncio.Event()  # set while the last answer said unfenced
        self._task: asyncio.Task[None] | None = None

    @property
    def node_id(self) -> int:
        return self.registration.node_id

    @property
    def is_fenced(self) -> bool:
        return not self.unfenced.is_set()

    def start(self) -> None:
        """Register, then heartbeat, in a task of its own until `shut_down` or `stop`."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def ready_to_unfence(self) -> None:
        """The broker is ready to serve: the next heartbeats no longer ask to be fenced."""
        self._ready = True

    async def stop(self) -> None:
        """Stop heartbeating without telling the controller (its session will expire)."""
        task, self._task = self._task, None
        await tasks.cancel_and_wait(task)

    async def shut_down(self, timeout_s: float) -> bool:
        """Controlled shutdown: ask the controller until it lets this broker go (True),
        or until `timeout_s` (False). Heartbeating stops either way."""
        await self.stop()
        if self.broker_epoch is None:
            return False
        deadline = self._clock.monotonic() + timeout_s
        first = True
        while True:
            remaining = deadline - self._clock.monotonic()
            try:
                answer = await asyncio.wait_for(
                    self._heartbeat(want_shut_down=True), max(remaining, 0.001)
                )
            except TimeoutError:
                answer = None
            if answer is not None and answer.should_shut_down:
                log.info("the controller let broker %d shut down", self.node_id)
                return True
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0 or self.broker_epoch is None:
                log.warning("broker %d shuts down without the controller's leave", self.node_id)
                return False
            # Kafka's broker asks again soon after the first answer (its leaderships may
            # have moved at once), then every heartbeat interval.
            again_s = CONTROLLED_SHUTDOWN_RETRY_S if first else self._interval_s
            first = False
            await self._clock.sleep(min(again_s, remaining))

    # The loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            if self.broker_epoch is None and not await self._register():
                await self._clock.sleep(self._retry_backoff_s)
                continue
            await self._heartbeat(want_shut_down=False)
            # Kafka's broker heartbeats at once while it waits to be unfenced (starting up)
            fenced = self._ready and not self.unfenced.is_set()
            await self._clock.sleep(self._retry_backoff_s if fenced else self._interval_s)

    async def _register(self) -> bool:
        try:
            epoch = await self._controller.register_broker(self.registration, self._clock.time_ms())
        except topics.MetadataError as error:
            log.warning("broker %d could not register: %s", self.node_id, error)
            return False
        except Exception:  # a bug must not end the broker's registration attempts
            log.exception("broker %d could not register", self.node_id)
            return False
        self.broker_epoch = epoch
        self.registered.set()
        log.info("broker %d registered with broker epoch %d", self.node_id, epoch)
        return True

    async def _heartbeat(self, *, want_shut_down: bool) -> broker_sessions.HeartbeatAnswer | None:
        epoch = self.broker_epoch
        if epoch is None:
            return None
        try:
            answer = await self._controller.broker_heartbeat(
                self.node_id,
                epoch,
                self._metadata_offset(),
                want_fence=not self._ready,
                want_shut_down=want_shut_down,
                now_ms=self._clock.time_ms(),
            )
        except broker_sessions.StaleBrokerEpochError as error:
            log.warning("broker %d registers again: %s", self.node_id, error)
            self._forget_registration()
            return None
        except topics.MetadataError as error:
            log.warning("heartbeat of broker %d failed: %s", self.node_id, error)
            return None
        except Exception:  # a bug must not end the heartbeats
            log.exception("heartbeat of broker %d failed", self.node_id)
            return None
        if answer.is_caught_up and not self.caught_up.is_set():
            log.info("broker %d has caught up with the metadata log", self.node_id)
            self.caught_up.set()
        if answer.is_fenced:
            if self.unfenced.is_set():
                log.warning("broker %d is fenced", self.node_id)
            self.unfenced.clear()
        elif not self.unfenced.is_set():
            log.info("broker %d is unfenced", self.node_id)
            self.unfenced.set()
        return answer

    def _forget_registration(self) -> None:
        self.broker_epoch = None
        self.registered.clear()
        self.unfenced.clear()


if TYPE_CHECKING:  # mypy checks the seams: both controllers are LifecycleControllers,
    # and a ControllerChannel is what BrokerContext.controller_forwarder takes.

    def _either(
        local: controller.Controller, remote: controller_channel.ControllerChannel
    ) -> list[LifecycleController]:
        return [local, remote]

    def _forwarder(remote: controller_channel.ControllerChannel) -> context.ControllerForwarder:
        return remote
