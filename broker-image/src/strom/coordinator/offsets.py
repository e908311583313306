"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, their expiry after
offsets.retention.minutes, and forgetting a deleted topic's offsets.

A commit is acknowledged, and visible to OffsetFetch, only once `__consumer_offsets`
holds it; one it cannot write answers NOT_COORDINATOR (the client finds the coordinator
again and retries), as Kafka does for a storage error. Tombstones work the same way:
offsets leave memory once their tombstones are written, and a group left Empty with
nothing is deleted in the same write, as Kafka's cleanup does.
"""

from __future__ import annotations

import asyncio
import logging

from kio.schema.errors import ErrorCode

from strom.coordinator import consumer_records, embedded_protocol, offsets_log, runtime, states
from strom.coordinator import group as group_model

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL = "consumer"
State = states.GroupState
Group = group_model.Group
Key = tuple[str, int]
# (topic, partition, offset, leader epoch, metadata)
Commit = tuple[str, int, int, int, str | None]


class OffsetManager:
    def __init__(
        self,
        groups: dict[str, Group],
        config: group_model.CoordinatorConfig,
        writer: runtime.Runtime,
    ) -> None:
        self.groups = groups
        self.config = config
        self._runtime = writer

    async def commit(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[Commit],
        now_ms: int,
        api_version: int = 9,
    ) -> ErrorCode | dict[Key, ErrorCode]:
        """Returns one error for the whole request, or an error per partition.

        `generation_id` is the member epoch for a consumer-protocol group."""
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(group_id)
        if group is not None and group.consumer is not None:
            error = group.consumer.commit_error(member_id, generation_id, api_version)
            if error != ErrorCode.none:
                return error
        elif group is None or group.state == State.DEAD:
            if generation_id >= 0:
                return ErrorCode.illegal_generation
            # a commit from outside the group's protocol: admin tools, assign() users
        elif generation_id < 0 and group.state == State.EMPTY:
            pass  # the same, to a group without members
        elif group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.fenced_instance_id
        elif group.state == State.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        elif member_id not in group.members:
            return ErrorCode.unknown_member_id
        elif generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        else:
            member = group.members[member_id]
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        errors, accepted = self._accepted(offsets, now_ms)
        if not accepted:
            runtime.group_for(self.groups, group_id, now_ms)
            return errors

        def materialize() -> None:
            runtime.group_for(self.groups, group_id, now_ms).commit_offsets(accepted)

        entries = runtime.offset_entries(group_id, accepted)
        try:
            await self._runtime.write(group_id, entries, now_ms, on_written=materialize)
        except offsets_log.StoreFailed as error:
            log.error("group %s: offsets not committed: %s", group_id, error)
            return ErrorCode.not_coordinator
        return errors

    async def commit_transactional(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[Commit],
        now_ms: int,
        api_version: int = 3,
    ) -> ErrorCode | dict[Key, ErrorCode]:
        """TxnOffsetCommit: offsets written as the producer's transactional batch, pending
        until its marker (`end_transaction`). The member checks are Kafka's for
        transactional commits: a commit from outside the group management (generation
        -1, no member id) is taken whatever the group's state, and a rebalance in
        progress does not refuse it."""
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(group_id)
        outsider = generation_id < 0 and not member_id and group_instance_id is None
        if group is None:
            if generation_id >= 0:
                return ErrorCode.illegal_generation
        elif group.consumer is not None:
            if not outsider:
                error = group.consumer.commit_error(member_id, generation_id, api_version)
                if error == ErrorCode.stale_member_epoch:
                    return ErrorCode.illegal_generation
                if error != ErrorCode.none:
                    return error
        elif group.state == State.DEAD:
            return ErrorCode.coordinator_not_available
        elif not outsider and not (generation_id < 0 and group.state == State.EMPTY):
            if group.is_static_member_fenced(group_instance_id, member_id):
                return ErrorCode.fenced_instance_id
            if member_id not in group.members:
                return ErrorCode.unknown_member_id
            if generation_id != group.generation_id:
                return ErrorCode.illegal_generation
        errors, accepted = self._accepted(offsets, now_ms)
        if not accepted:
            return errors

        def pend() -> None:
            group = runtime.group_for(self.groups, group_id, now_ms)
            group.pend_offsets(producer_id, accepted)

        entries = runtime.offset_entries(group_id, accepted)
        try:
            await self._runtime.write(
                group_id, entries, now_ms, on_written=pend, producer=(producer_id, producer_epoch)
            )
        except offsets_log.StoreFailed as error:
            log.error("group %s: transactional offsets not written: %s", group_id, error)
            return _transactional_write_error(error.error)
        return errors

    def _accepted(
        self, offsets: list[Commit], now_ms: int
    ) -> tuple[dict[Key, ErrorCode], dict[Key, group_model.CommittedOffset]]:
        """Each entry's error, and the offsets to write (metadata within its limit)."""
        errors: dict[Key, ErrorCode] = {}
        accepted: dict[Key, group_model.CommittedOffset] = {}
        for topic, partition, offset, leader_epoch, metadata in offsets:
            if (
                metadata is not None
                and len(metadata.encode()) > self.config.offset_metadata_max_bytes
            ):
                errors[(topic, partition)] = ErrorCode.offset_metadata_too_large
                continue
            accepted[(topic, partition)] = group_model.CommittedOffset(
                offset, leader_epoch, metadata or "", now_ms
            )
            errors[(topic, partition)] = ErrorCode.none
        return errors, accepted

    def end_transaction(self, group_ids: list[str], producer_id: int, commit: bool) -> int:
        """The producer's marker is in these groups' `__consumer_offsets` partition: its
        pending offsets are committed or dropped. Returns how many offsets changed."""
        changed = 0
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is not None:
                changed += group.end_transaction(producer_id, commit)
        return changed

    def fetch(
        self,
        group_id: str,
        wanted: list[Key] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> ErrorCode | dict[Key, group_model.CommittedOffset | None]:
        """Committed offsets of `wanted` partitions (None: all the group has), or the
        error of a consumer-protocol member that may not fetch (OffsetFetch v9+)."""
        group = self.groups.get(group_id)
        if group is not None and group.consumer is not None:
            error = group.consumer.fetch_error(member_id, member_epoch)
            if error != ErrorCode.none:
                return error
        stored = group.offsets if group is not None else {}
        if wanted is None:
            return dict(stored)
        return {key: stored.get(key) for key in wanted}

    async def delete(
        self, group_id: str, partitions: list[Key], now_ms: int
    ) -> ErrorCode | dict[Key, ErrorCode]:
        group = self.groups.get(group_id)
        if group is None or group.state == State.DEAD:
            return ErrorCode.group_id_not_found
        subscribed = _subscribed_topics(group)
        results: dict[Key, ErrorCode] = {}
        deleted = []
        for topic, partition in partitions:
            if topic in subscribed:
                results[(topic, partition)] = ErrorCode.group_subscribed_to_topic
                continue
            if (topic, partition) in group.offsets and (topic, partition) not in deleted:
                deleted.append((topic, partition))
            results[(topic, partition)] = ErrorCode.none
        if deleted:
            try:
                await self.drop(group_id, deleted, now_ms)
            except offsets_log.StoreFailed:
                return ErrorCode.not_coordinator
        return results

    async def expire(self, now_ms: int) -> int:
        """Drop committed offsets older than offsets.retention (Kafka 2.1+ rules): for a
        group without members, counted from when it became empty; for standalone
        commits, from the commit itself. Returns how many were dropped."""
        retention = self.config.offsets_retention_ms
        drops = []
        for group in list(self.groups.values()):
            if not group.is_empty():
                continue
            expired = [
                key
                for key, committed in group.offsets.items()
                if now_ms - max(committed.commit_timestamp_ms, group.state_timestamp_ms)
                >= retention
                # an open transaction's offset for it decides it (Kafka skips those)
                and not group.has_pending_offset(key)
            ]
            if expired:
                drops.append((len(expired), self.drop(group.group_id, expired, now_ms)))
        outcomes = await asyncio.gather(*(drop for _, drop in drops), return_exceptions=True)
        dropped = 0
        for (count, _), outcome in zip(drops, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                log.error("expired offsets not dropped: %s", outcome)
            else:
                dropped += count
        return dropped

    def forget_topic(self, topic: str, now_ms: int) -> int:
        """A deleted topic's committed offsets go too (Kafka's onPartitionsDeleted), so a
        topic created again under the same name starts without them. The tombstones are
        written in the background; returns how many offsets go."""
        count = 0
        for group in list(self.groups.values()):
            keys = [key for key in group.offsets if key[0] == topic]
            if keys:
                count += len(keys)
                drop = _Drop(self.groups, group.group_id, keys, admin_delete=False)
                self._runtime.write_behind(group.group_id, drop.entries, now_ms, drop.apply)
        return count

    def drop(self, group_id: str, keys: list[Key], now_ms: int) -> asyncio.Future[None]:
        """Tombstones for these offsets of a group (and for the group, if that leaves it
        Empty with nothing); memory follows once they are written."""
        drop = _Drop(self.groups, group_id, keys, admin_delete=False)
        return self._runtime.write(group_id, drop.entries, now_ms, drop.apply)

    async def delete_group(self, group_id: str, now_ms: int) -> ErrorCode:
        """DeleteGroups for one group found Empty: tombstones for every offset it has
        when the write goes out, and for the group."""
        drop = _Drop(self.groups, group_id, None, admin_delete=True)
        try:
            await self._runtime.write(group_id, drop.entries, now_ms, drop.apply)
        except offsets_log.StoreFailed as error:
            log.error("group %s: not deleted: %s", group_id, error)
            return ErrorCode.not_coordinator
        return ErrorCode.non_empty_group if drop.refused else ErrorCode.none


class _Drop:
    """One tombstone write, computed when it goes out (after the group's earlier writes
    were applied) and applied to memory once written."""

    def __init__(
        self, groups: dict[str, Group], group_id: str, keys: list[Key] | None, *, admin_delete: bool
    ) -> None:
        self._groups = groups
        self._group_id = group_id
        self._keys = keys
        self._admin_delete = admin_delete
        self._group: Group | None = None
        self._dropping: list[Key] = []
        self._delete_group = False
        self.refused = False

    def entries(self) -> list[offsets_log.Entry]:
        group = self._group = self._groups.get(self._group_id)
        if group is None:
            return []
        if self._admin_delete and not group.is_empty():
            self.refused = True  # a member joined since DeleteGroups looked
            return []
        self._dropping = list(group.offsets) if self._keys is None else self._keys
        # A group with offsets of an open transaction stays, for their marker.
        self._delete_group = (
            group.is_empty()
            and group.offsets.keys() <= set(self._dropping)
            and not group.pending_txn_offsets
        )
        out = runtime.offset_tombstones(self._group_id, self._dropping)
        if self._delete_group:
            out.append(runtime.group_tombstone(self._group_id))
            if group.consumer is not None:
                out += consumer_records.group_tombstones(self._group_id)
        return out

    def apply(self) -> None:
        group = self._group
        if group is None or self.refused or self._groups.get(self._group_id) is not group:
            return
        for key in self._dropping:
            group.drop_offset(key)
        if self._delete_group and group.is_empty():
            group.offsets.clear()
            group.transition(State.DEAD, group.state_timestamp_ms)
            del self._groups[self._group_id]


def _transactional_write_error(error: ErrorCode) -> ErrorCode:
    """What a TxnOffsetCommit answers when its batch was refused: the producer's own
    errors as they are (a fenced epoch, a transaction the partition does not know),
    else NOT_COORDINATOR, as for a plain commit."""
    if error in (
        ErrorCode.invalid_producer_epoch,
        ErrorCode.producer_fenced,
        ErrorCode.invalid_txn_state,
        ErrorCode.transaction_abortable,
    ):
        return error
    return ErrorCode.not_coordinator


def _subscribed_topics(group: Group) -> set[str]:
    if group.consumer is not None:
        return group.consumer.subscribed_topic_names()
    if group.state == State.EMPTY or group.protocol_type != CONSUMER_PROTOCOL:
        return set()
    topics: set[str] = set()
    for member in group.members.values():
        topics |= embedded_protocol.subscribed_topics(
            member.metadata_for(group.protocol_name or "")
        )
    return topics
