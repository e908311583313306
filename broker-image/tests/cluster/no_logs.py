"""A LogPreparer for controllers on nodes that host no partition: nothing to prepare."""

from __future__ import annotations


class NoLogs:
    async def prepare_logs(self, partitions: object) -> None:
        return None

    async def abandon_logs(self, partitions: object) -> None:
        return None
