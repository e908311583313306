"""The coordinator's runtime: the only part that reads and writes `__consumer_offsets`
(through an `offsets_log.OffsetsLog`), in the record formats of `offsets_records`.

Writes are ordered per group: each waits for the group's previous write, so a group's
records land in the order they were asked for, and the in-memory change that goes
with a write (`on_written`) runs right after that write is committed and before the
group's next one starts. Memory thus changes in log order, as a replay would change
it. A write that fails raises StoreFailed to whoever awaits it; nothing was applied.

`load` replays partitions into the groups (later records win): at startup those led
here, later each partition whose leadership comes here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from strom.coordinator import consumer_records, offsets_log, offsets_records, states
from strom.coordinator import group as group_model

log = logging.getLogger(__name__)

Entry = offsets_log.Entry
# A write's records, or a function computing them when the write goes out (after the
# group's earlier writes were applied): tombstones for "every offset the group has".
Entries = Sequence[Entry] | Callable[[], Sequence[Entry]]
OffsetKeys = Iterable[tuple[str, int]]


class Runtime:
    def __init__(self, store: offsets_log.OffsetsLog) -> None:
        self._log = store
        self._tails: dict[str, asyncio.Task[None]] = {}

    # Writing -------------------------------------------------------------------------

    def write(
        self,
        group_id: str,
        entries: Entries,
        now_ms: int,
        on_written: Callable[[], None] | None = None,
        producer: offsets_log.Producer | None = None,
    ) -> asyncio.Future[None]:
        """Queue a write behind the group's earlier ones; the result completes once it
        is committed and `on_written` ran, or raises StoreFailed. Cancelling the result
        does not cancel the write. `producer`: a transactional write (TxnOffsetCommit)."""
        return asyncio.shield(self._queue(group_id, entries, now_ms, on_written, producer))

    def write_behind(
        self,
        group_id: str,
        entries: Entries,
        now_ms: int,
        on_written: Callable[[], None] | None = None,
    ) -> None:
        """A write nobody waits for (group metadata, tombstones from timers): a failure
        is logged. A restart before the next successful write finds the previous state."""
        task = self._queue(group_id, entries, now_ms, on_written)
        task.add_done_callback(functools.partial(_log_failure, group_id))

    async def drain(self) -> None:
        """Wait for every queued write to finish (shutdown, tests)."""
        while self._tails:
            await asyncio.wait(list(self._tails.values()))

    def _queue(
        self,
        group_id: str,
        entries: Entries,
        now_ms: int,
        on_written: Callable[[], None] | None,
        producer: offsets_log.Producer | None = None,
    ) -> asyncio.Task[None]:
        previous = self._tails.get(group_id)
        task = asyncio.get_running_loop().create_task(
            self._write(previous, group_id, entries, now_ms, on_written, producer)
        )
        self._tails[group_id] = task
        task.add_done_callback(functools.partial(self._finished, group_id))
        return task

    def _finished(self, group_id: str, task: asyncio.Task[None]) -> None:
        if self._tails.get(group_id) is task:
            del self._tails[group_id]

    async def _write(
        self,
        previous: asyncio.Task[None] | None,
        group_id: str,
        entries: Entries,
        now_ms: int,
        on_written: Callable[[], None] | None,
        producer: offsets_log.Producer | None,
    ) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait([previous])  # its outcome is its own caller's business
        records = entries() if callable(entries) else entries
        if records:
            partitions = self._log.partition_count()
            if partitions is None:
                partitions = await self._log.ensure_created()
            partition = offsets_records.partition_for(group_id, partitions)
            await self._log.append(partition, records, now_ms, producer)
        if on_written is not None:
            on_written()

    # Loading -------------------------------------------------------------------------

    def load(
        self, groups: dict[str, group_model.Group], partitions: Iterable[int], now_ms: int
    ) -> None:
        """Rebuild the groups of these `__consumer_offsets` partitions from their logs:
        offsets of open transactions stay pending, and the markers found later commit or
        drop them."""
        for partition in partitions:
            # producer id -> groups holding its pending offsets, for its marker
            pending: dict[int, set[str]] = {}
            for stored in self._log.read_batches(partition):
                producer_id = stored.transactional_producer
                if stored.marker is not None and producer_id is not None:
                    for group_id in pending.pop(producer_id, ()):
                        group = groups.get(group_id)
                        if group is not None:
                            group.end_transaction(producer_id, stored.marker.commit)
                elif producer_id is not None:
                    for group_id in replay_pending(groups, producer_id, stored.entries, now_ms):
                        pending.setdefault(producer_id, set()).add(group_id)
                else:
                    apply_records(groups, stored.entries, now_ms)
        drop_husks(groups)

    def partition_of(self, group_id: str) -> int | None:
        """The `__consumer_offsets` partition that holds the group (None: no topic yet)."""
        count = self._log.partition_count()
        return None if count is None else offsets_records.partition_for(group_id, count)


def _log_failure(group_id: str, task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if isinstance(error, offsets_log.StoreFailed):
        log.error("group %s: __consumer_offsets not written: %s", group_id, error)
    elif error is not None:
        log.error("group %s: write failed", group_id, exc_info=error)


# Records -------------------------------------------------------------------------------


def offset_entries(
    group_id: str, offsets: Mapping[tuple[str, int], group_model.CommittedOffset]
) -> list[Entry]:
    return [
        (
            offsets_records.offset_key(offsets_records.OffsetKey(group_id, topic, partition)),
            offsets_records.offset_value(committed),
        )
        for (topic, partition), committed in offsets.items()
    ]


def offset_tombstones(group_id: str, keys: OffsetKeys) -> list[Entry]:
    return [
        (offsets_records.offset_key(offsets_records.OffsetKey(group_id, topic, partition)), None)
        for topic, partition in keys
    ]


def group_tombstone(group_id: str) -> Entry:
    return offsets_records.group_key(offsets_records.GroupKey(group_id)), None


def group_entry(group: group_model.Group, assignments: Mapping[str, bytes] | None = None) -> Entry:
    """The group's metadata record; `assignments` (member id -> assignment) replace the
    members' current ones, for a generation's assignment not applied yet."""
    protocol = group.protocol_name
    record = offsets_records.GroupRecord(
        protocol_type=group.protocol_type or "",
        generation_id=group.generation_id,
        protocol_name=protocol,
        leader_id=group.leader_id,
        state_timestamp_ms=group.state_timestamp_ms,
        members=tuple(
            offsets_records.MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata_for(protocol) if protocol else b"",
                m.assignment if assignments is None else assignments.get(m.member_id, b""),
            )
            for m in group.members.values()
        ),
    )
    return (
        offsets_records.group_key(offsets_records.GroupKey(group.group_id)),
        offsets_records.group_value(record),
    )


# Replay --------------------------------------------------------------------------------


def replay(groups: dict[str, group_model.Group], entries: Iterable[Entry], now_ms: int) -> None:
    """Apply `__consumer_offsets` records in log order (later records win), then drop
    groups left with nothing."""
    apply_records(groups, entries, now_ms)
    drop_husks(groups)


def drop_husks(groups: dict[str, group_model.Group]) -> None:
    for group_id in [g for g, group in groups.items() if group.is_empty_husk()]:
        del groups[group_id]


def replay_pending(
    groups: dict[str, group_model.Group], producer_id: int, entries: Iterable[Entry], now_ms: int
) -> set[str]:
    """A transaction's offset commits (TxnOffsetCommit's batch): pending in their groups
    until the producer's marker. Returns the groups touched."""
    touched = set()
    for key_bytes, value in entries:
        try:
            key = offsets_records.parse_key(key_bytes)
            if not isinstance(key, offsets_records.OffsetKey) or value is None:
                continue  # only offsets are ever written in a transaction
            committed = offsets_records.parse_offset_value(value)
        except offsets_records.RecordFormatError as error:
            log.warning("skipping unreadable transactional offset record: %s", error)
            continue
        group = group_for(groups, key.group_id, now_ms)
        group.pend_offsets(producer_id, {(key.topic, key.partition): committed})
        touched.add(key.group_id)
    return touched


def apply_records(
    groups: dict[str, group_model.Group], entries: Iterable[Entry], now_ms: int
) -> None:
    """Apply plain `__consumer_offsets` records in log order (later records win)."""
    for key_bytes, value in entries:
        if consumer_records.is_consumer_key(key_bytes):
            try:
                consumer_records.replay(
                    groups, key_bytes, value, lambda group_id: group_for(groups, group_id, now_ms)
                )
            except Exception as error:  # kio's reader raises several types on bad bytes
                log.warning("skipping unreadable consumer group record: %s", error)
            continue
        try:
            key = offsets_records.parse_key(key_bytes)
            if isinstance(key, offsets_records.OffsetKey):
                group = group_for(groups, key.group_id, now_ms)
                if value is None:
                    group.drop_offset((key.topic, key.partition))
                else:
                    group.commit_offsets(
                        {(key.topic, key.partition): offsets_records.parse_offset_value(value)}
                    )
            elif value is None:
                groups.pop(key.group_id, None)
            else:
                _restore_group(
                    groups, key.group_id, offsets_records.parse_group_value(value), now_ms
                )
        except offsets_records.RecordFormatError as error:
            log.warning("skipping unreadable __consumer_offsets record: %s", error)


def group_for(
    groups: dict[str, group_model.Group], group_id: str, now_ms: int
) -> group_model.Group:
    """The group, created Empty if it is not there (as an offset record creates it)."""
    group = groups.get(group_id)
    if group is None:
        group = groups[group_id] = group_model.Group(group_id, now_ms)
    return group


def _restore_group(
    groups: dict[str, group_model.Group],
    group_id: str,
    stored: offsets_records.GroupRecord,
    now_ms: int,
) -> None:
    group = group_for(groups, group_id, now_ms)
    group.consumer = None  # written after the group left the consumer protocol
    group.generation_id = stored.generation_id
    group.protocol_type = stored.protocol_type or None
    group.protocol_name = stored.protocol_name
    group.leader_id = stored.leader_id
    group.members.clear()
    group.static_members.clear()
    for m in stored.members:
        member = group_model.Member(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout_ms=m.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            protocol_type=stored.protocol_type,
            protocols=[(stored.protocol_name or "", m.subscription)],
            assignment=m.assignment,
            # Members get a full session to find the restarted coordinator.
            heartbeat_deadline_ms=now_ms + m.session_timeout_ms,
        )
        group.members[m.member_id] = member
        if m.group_instance_id:
            group.static_members[m.group_instance_id] = m.member_id
    state = states.GroupState.STABLE if group.members else states.GroupState.EMPTY
    group.restore_state(state, stored.state_timestamp_ms or now_ms)
