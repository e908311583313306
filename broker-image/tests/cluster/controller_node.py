"""A controller on node 9 over a real local metadata log, with brokers that register and
heartbeat to it: the harness of the controller-side replication tests."""

from __future__ import annotations

import uuid
from pathlib import Path

from strom.cluster import broker_sessions, config_cache, controller, loader, metadata_log
from strom.cluster import image as images
from strom.config import broker as broker_config

NOW = 1_700_000_000_000


class NoLogs:
    """A LogPreparer for a controller that hosts no partition: nothing to prepare."""

    async def prepare_logs(self, partitions: object) -> None:
        return None

    async def abandon_logs(self, partitions: object) -> None:
        return None


class ControllerNode:
    """Controller 9 (hosting no replica); `join` registers and unfences a broker."""

    def __init__(self, root: Path) -> None:
        config = broker_config.BrokerConfig({"log.dirs": str(root), "node.id": "9"})
        self.log = metadata_log.LocalMetadataLog(root, lambda: NOW)
        self.metadata = loader.MetadataLoader(images.MetadataImage("cluster"))
        configs = config_cache.ConfigCache(config, lambda: self.metadata.image)
        self.controller = controller.Controller(
            9, self.log, self.metadata, lambda: configs.broker, NoLogs()
        )
        self.epochs: dict[int, int] = {}

    @property
    def image(self) -> images.MetadataImage:
        return self.metadata.image

    async def join(self, node_id: int) -> None:
        epoch = await self.controller.register_broker(
            broker_sessions.Registration(node_id, "cluster", uuid.uuid4(), ()), NOW
        )
        self.epochs[node_id] = epoch
        await self.heartbeat(node_id)

    async def heartbeat(
        self, node_id: int, *, shut_down: bool = False, fence: bool = False
    ) -> broker_sessions.HeartbeatAnswer:
        return await self.controller.broker_heartbeat(
            node_id,
            self.epochs[node_id],
            self.image.offset,
            want_fence=fence,
            want_shut_down=shut_down,
            now_ms=NOW,
        )

    def close(self) -> None:
        self.log.close()
