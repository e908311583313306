"""The group coordinator the broker and the handlers call: every group this broker
coordinates, the classic protocol (`classic`), committed offsets (`offsets`) and the
runtime that keeps them in `__consumer_offsets` (`runtime`).

Time comes from `now_ms` arguments only, so tests drive the clock; the broker calls
`tick` periodically and `expire_offsets` every offsets.retention.check.interval.ms.
Requests that write (OffsetCommit, a leader's SyncGroup, OffsetDelete, DeleteGroups)
are answered once the write is committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from kio.schema.errors import ErrorCode

from strom.coordinator import (
    classic,
    classic_members,
    consumer,
    consumer_group,
    offsets,
    offsets_log,
    rebalance,
    runtime,
    states,
)
from strom.coordinator import group as group_model


class GroupCoordinator:
    def __init__(
        self,
        config: group_model.CoordinatorConfig,
        store: offsets_log.OffsetsLog,
        *,
        group_session_timeout_ms: Callable[[str], int] | None = None,
        group_heartbeat_interval_ms: Callable[[str], int] | None = None,
    ) -> None:
        """`group_session_timeout_ms` / `group_heartbeat_interval_ms`: a group's own
        consumer.session.timeout.ms / consumer.heartbeat.interval.ms (GROUP config
        resources) over the broker's; without them, the broker's for every group."""
        self.config = config
        self._group_session_timeout_ms = group_session_timeout_ms
        self._group_heartbeat_interval_ms = group_heartbeat_interval_ms
        self.groups: dict[str, group_model.Group] = {}
        self._runtime = runtime.Runtime(store)
        self._classic = classic.ClassicProtocol(self.groups, config, self._runtime)
        self._offsets = offsets.OffsetManager(self.groups, config, self._runtime)
        self._consumer = consumer.ConsumerProtocol(
            self.groups,
            config,
            self._runtime,
            session_timeout_ms=self.effective_session_timeout_ms,
            heartbeat_interval_ms=self.effective_heartbeat_interval_ms,
        )
        self._classic_members = classic_members.ClassicMembers(self._consumer, config)

    # Group-level overrides of the broker's settings (consumer.session.timeout.ms and
    # consumer.heartbeat.interval.ms as GROUP config resources): read here only.

    def effective_session_timeout_ms(self, group_id: str) -> int:
        if self._group_session_timeout_ms is None:
            return self.config.consumer_session_timeout_ms
        return self._group_session_timeout_ms(group_id)

    def effective_heartbeat_interval_ms(self, group_id: str) -> int:
        if self._group_heartbeat_interval_ms is None:
            return self.config.consumer_heartbeat_interval_ms
        return self._group_heartbeat_interval_ms(group_id)

    def load(self, partitions: Iterable[int], now_ms: int) -> None:
        """Coordinate the groups of these `__consumer_offsets` partitions: rebuilt from
        their logs (at startup, and when their leadership comes here)."""
        wanted = set(partitions)
        self.unload(wanted)
        self._runtime.load(self.groups, sorted(wanted), now_ms)

    def unload(self, partitions: Iterable[int]) -> int:
        """Stop coordinating the groups of these partitions (their leadership moved
        away): members waiting in a rebalance are answered NOT_COORDINATOR and find the
        new coordinator. Returns how many groups went."""
        leaving = set(partitions)
        gone = [
            group_id for group_id in self.groups if self._runtime.partition_of(group_id) in leaving
        ]
        for group_id in gone:
            group = self.groups.pop(group_id)
            for member in group.members.values():
                rebalance.answer_join(member, group_model.JoinResult(ErrorCode.not_coordinator))
                rebalance.answer_sync(member, group_model.SyncResult(ErrorCode.not_coordinator))
        return len(gone)

    async def drain(self) -> None:
        """Wait for the writes under way (shutdown)."""
        await self._runtime.drain()

    # The classic protocol ------------------------------------------------------------

    async def join(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        version: int,
        now_ms: int,
        topics: consumer.TopicLookup | None = None,
    ) -> group_model.JoinResult:
        """`topics` finds a topic's id and partitions (for a consumer group's members)."""
        candidate = group_model.Member(
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=protocol_type,
            protocols=list(protocols),
        )
        group = self._consumer_group_with_members(group_id)
        if group is not None:
            found = topics or consumer_group.NoTopics()
            return await self._classic_members.join(group, candidate, version, found, now_ms)
        return await self._classic.join(
            group_id=group_id, candidate=candidate, version=version, now_ms=now_ms
        )

    def _consumer_group_with_members(self, group_id: str) -> group_model.Group | None:
        """The group if it runs the consumer protocol with members: classic requests are
        then served by its classic members' rules (an Empty one turns classic on a join)."""
        group = self.groups.get(group_id)
        if group is None or group.consumer is None or not group.consumer.members:
            return None
        return group

    async def sync(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: list[tuple[str, bytes]],
        now_ms: int,
    ) -> group_model.SyncResult:
        group = self._consumer_group_with_members(group_id)
        if group is not None:
            return self._classic_members.sync(
                group,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
                now_ms=now_ms,
            )
        return await self._classic.sync(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments,
            now_ms=now_ms,
        )

    def heartbeat(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        now_ms: int,
    ) -> ErrorCode:
        group = self._consumer_group_with_members(group_id)
        if group is not None:
            return self._classic_members.heartbeat(
                group,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                now_ms=now_ms,
            )
        return self._classic.heartbeat(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            now_ms=now_ms,
        )

    def leave(
        self, group_id: str, leaving: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        group = self._consumer_group_with_members(group_id)
        if group is not None:
            return self._classic_members.leave(group, leaving, now_ms)
        return self._classic.leave(group_id, leaving, now_ms)

    def tick(self, now_ms: int) -> None:
        """Expire sessions, pending members and rebalance timeouts due at `now_ms`."""
        self._classic.tick(now_ms)
        self._consumer.tick(now_ms)

    # The consumer protocol (KIP-848) -------------------------------------------------

    async def consumer_heartbeat(
        self, request: consumer.Heartbeat, topics: consumer.TopicLookup, now_ms: int
    ) -> consumer.HeartbeatResult:
        """ConsumerGroupHeartbeat; `topics` finds a subscribed topic's id and partitions."""
        return await self._consumer.heartbeat(request, topics, now_ms)

    # Offsets -------------------------------------------------------------------------

    async def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[tuple[str, int, int, int, str | None]],
        now_ms: int,
        api_version: int = 9,
    ) -> ErrorCode | dict[tuple[str, int], ErrorCode]:
        """Commit (topic, partition, offset, leader epoch, metadata) entries;
        `generation_id` is the member epoch of a consumer-protocol group.

        Returns one error for the whole request, or an error per partition."""
        return await self._offsets.commit(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            offsets=offsets,
            now_ms=now_ms,
            api_version=api_version,
        )

    async def commit_transactional_offsets(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[tuple[str, int, int, int, str | None]],
        now_ms: int,
        api_version: int = 3,
    ) -> ErrorCode | dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: pending until the transaction's marker reaches the group's
        `__consumer_offsets` partition (`on_transaction_completed`)."""
        return await self._offsets.commit_transactional(
            group_id=group_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            offsets=offsets,
            now_ms=now_ms,
            api_version=api_version,
        )

    def on_transaction_completed(self, producer_id: int, partition: int, commit: bool) -> int:
        """A marker of the producer's transaction was written to this `__consumer_offsets`
        partition: the offsets it committed there become visible, or go. Returns how
        many changed."""
        holding = [
            group_id
            for group_id, group in self.groups.items()
            if producer_id in group.pending_txn_offsets
            and self._runtime.partition_of(group_id) == partition
        ]
        return self._offsets.end_transaction(holding, producer_id, commit)

    def fetch_offsets(
        self,
        group_id: str,
        wanted: list[tuple[str, int]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> ErrorCode | dict[tuple[str, int], group_model.CommittedOffset | None]:
        """Committed offsets of `wanted` partitions (None: all the group has), or why a
        consumer-protocol member may not fetch them."""
        return self._offsets.fetch(group_id, wanted, member_id, member_epoch)

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]], now_ms: int
    ) -> ErrorCode | dict[tuple[str, int], ErrorCode]:
        return await self._offsets.delete(group_id, partitions, now_ms)

    async def expire_offsets(self, now_ms: int) -> int:
        """Drop offsets past offsets.retention; returns how many were dropped."""
        return await self._offsets.expire(now_ms)

    def forget_topic(self, topic: str, now_ms: int) -> int:
        """Drop a deleted topic's committed offsets (written in the background);
        returns how many."""
        return self._offsets.forget_topic(topic, now_ms)

    # Admin ---------------------------------------------------------------------------

    def list_groups(self, states_filter: set[str] | None) -> list[group_model.Group]:
        return [
            g
            for g in self.groups.values()
            if g.state != states.GroupState.DEAD
            and (not states_filter or g.state_name().lower() in states_filter)
        ]

    async def delete_groups(self, group_ids: list[str], now_ms: int) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        deleting = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.state == states.GroupState.DEAD:
                results[group_id] = ErrorCode.group_id_not_found
            elif not group.is_empty():
                results[group_id] = ErrorCode.non_empty_group
            else:
                results[group_id] = ErrorCode.none
                deleting.append(group_id)
        outcomes = await asyncio.gather(
            *(self._offsets.delete_group(group_id, now_ms) for group_id in deleting)
        )
        results.update(zip(deleting, outcomes, strict=True))
        return results
