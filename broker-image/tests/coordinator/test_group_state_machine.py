"""The group coordinator's state machine, driven by an injected clock.

JoinGroup and SyncGroup park until the rebalance completes, so each call runs as an
asyncio task; `settle()` lets parked tasks reach their await. Time moves only through
the `now_ms` arguments and `tick`, as the broker's timer task would move it.
`__consumer_offsets` is an in-memory OffsetsLog.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from strom.coordinator import group as group_model
from strom.coordinator import groups, offsets_log, offsets_records, states

SESSION_MS = 10_000
REBALANCE_MS = 30_000
DELAY_MS = 3_000
T0 = 1_000_000


class Stored:
    """An in-memory __consumer_offsets: keeps what was appended, in order. `failing`
    makes appends fail as a full disk does."""

    PARTITIONS = 3

    def __init__(self, *, failing: bool = False) -> None:
        self.partitions: list[list[tuple[bytes, bytes | None]]] | None = None
        self.entries: list[tuple[bytes, bytes | None]] = []
        self.failing = failing

    def partition_count(self) -> int | None:
        return None if self.partitions is None else len(self.partitions)

    async def ensure_created(self) -> int:
        if self.partitions is None:
            self.partitions = [[] for _ in range(self.PARTITIONS)]
        return len(self.partitions)

    async def append(
        self,
        partition: int,
        entries: Sequence[tuple[bytes, bytes | None]],
        now_ms: int,
        producer: offsets_log.Producer | None = None,
    ) -> None:
        if self.failing:
            raise offsets_log.StoreFailed("No space left on device")
        assert self.partitions is not None
        self.partitions[partition].extend(entries)
        self.entries.extend(entries)

    def read(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        assert self.partitions is not None
        return iter(list(self.partitions[partition]))

    def read_batches(self, partition: int) -> Iterator[offsets_log.StoredBatch]:
        return (offsets_log.StoredBatch([entry]) for entry in self.read(partition))


def coordinator(store: Stored | None = None, **config: Any) -> groups.GroupCoordinator:
    settings = {"initial_rebalance_delay_ms": DELAY_MS, **config}
    return groups.GroupCoordinator(group_model.CoordinatorConfig(**settings), store or Stored())


def restarted(store: Stored, now_ms: int) -> groups.GroupCoordinator:
    """A new coordinator that loads what `store` holds, as a broker restart does."""
    again = coordinator(store)
    again.load(range(store.partition_count() or 0), now_ms)
    return again


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def spawn(coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    return asyncio.get_running_loop().create_task(coro)


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 body."""
    out = bytearray(b"\x00\x00") + len(topics).to_bytes(4, "big")
    for topic in topics:
        out += len(topic).to_bytes(2, "big") + topic.encode()
    return bytes(out + b"\xff\xff\xff\xff")


def join(
    c: groups.GroupCoordinator,
    now_ms: int,
    member_id: str = "",
    *,
    group_id: str = "g",
    instance_id: str | None = None,
    version: int = 9,
    protocols: list[tuple[str, bytes]] | None = None,
    session_ms: int = SESSION_MS,
) -> asyncio.Task[group_model.JoinResult]:
    return spawn(
        c.join(
            group_id=group_id,
            member_id=member_id,
            group_instance_id=instance_id,
            client_id="client",
            client_host="/127.0.0.1",
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=REBALANCE_MS,
            protocol_type="consumer",
            protocols=protocols or [("range", subscription("t"))],
            version=version,
            now_ms=now_ms,
        )
    )


def sync(
    c: groups.GroupCoordinator,
    now_ms: int,
    member_id: str,
    generation: int,
    assignments: list[tuple[str, bytes]] | None = None,
    *,
    instance_id: str | None = None,
) -> asyncio.Task[group_model.SyncResult]:
    return spawn(
        c.sync(
            group_id="g",
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=assignments or [],
            now_ms=now_ms,
        )
    )


def heartbeat(
    c: groups.GroupCoordinator,
    now_ms: int,
    member_id: str,
    generation: int,
    instance_id: str | None = None,
) -> ErrorCode:
    return c.heartbeat(
        group_id="g",
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        now_ms=now_ms,
    )


async def member_id_for(c: groups.GroupCoordinator, now_ms: int) -> str:
    """KIP-394's first round trip: an empty member id gets MEMBER_ID_REQUIRED and an id."""
    first = await join(c, now_ms)
    assert first.error == ErrorCode.member_id_required
    assert first.member_id
    return first.member_id


async def stable_group(
    c: groups.GroupCoordinator, count: int, now_ms: int = T0
) -> tuple[list[str], int]:
    """`count` members through join and sync; returns their ids (leader first) and the
    generation."""
    ids = [await member_id_for(c, now_ms) for _ in range(count)]
    joins = [join(c, now_ms, member_id) for member_id in ids]
    await settle()
    c.tick(now_ms + DELAY_MS)
    results = [await task for task in joins]
    assert {r.error for r in results} == {ErrorCode.none}
    generation = results[0].generation_id
    leader = results[0].leader_id
    ordered = [leader] + [m for m in ids if m != leader]
    syncs = [
        sync(
            c,
            now_ms + DELAY_MS,
            m,
            generation,
            [(x, x.encode()) for x in ordered] if m == leader else None,
        )
        for m in ordered
    ]
    for member_id, task in zip(ordered, syncs, strict=True):
        result = await task
        assert result.error == ErrorCode.none
        assert result.assignment == member_id.encode()
    assert c.groups["g"].state == states.GroupState.STABLE
    return ordered, generation


async def test_kip394_first_join_hands_out_a_member_id_without_joining() -> None:
    c = coordinator()
    member_id = await member_id_for(c, T0)
    group = c.groups["g"]
    assert group.members == {}
    assert member_id in group.pending_members
    # An old client (JoinGroup v3) joins at once without the extra round trip.
    old = join(c, T0, version=3)
    await settle()
    assert len(group.members) == 1 and not old.done()
    c.tick(T0 + DELAY_MS)
    # The pending member never came back: dropped, and the old client's join completes.
    result = await old
    assert result.error == ErrorCode.none
    assert result.generation_id == 1
    assert c.groups["g"].pending_members == {}


async def test_initial_delay_gathers_members_then_one_generation_with_a_leader() -> None:
    c = coordinator()
    a = await member_id_for(c, T0)
    b = await member_id_for(c, T0)
    join_a = join(c, T0, a)
    await settle()
    c.tick(T0 + DELAY_MS // 2)
    await settle()
    assert not join_a.done(), "the first rebalance waits group.initial.rebalance.delay.ms"
    assert c.groups["g"].state == states.GroupState.PREPARING_REBALANCE
    join_b = join(c, T0 + DELAY_MS // 2, b)
    await settle()
    c.tick(T0 + DELAY_MS)
    result_a, result_b = await join_a, await join_b
    assert result_a.generation_id == result_b.generation_id == 1
    assert result_a.leader_id == result_b.leader_id
    leader, follower = (result_a, result_b) if result_a.leader_id == a else (result_b, result_a)
    assert {m[0] for m in leader.members} == {a, b}, "the leader gets every subscription"
    assert follower.members == []
    assert result_a.protocol_name == "range"
    assert c.groups["g"].state == states.GroupState.COMPLETING_REBALANCE


async def test_first_rebalance_ends_at_its_timer_even_without_an_initial_delay() -> None:
    # group.initial.rebalance.delay.ms=0 (Kafka's shipped server.properties): two static
    # members subscribing at once share generation 1, as with Kafka, whose first join phase
    # ends only when its (0 ms) timer fires. Completing it on the first member's JoinGroup
    # made the second one's join revoke the first one's fresh assignment (librdkafka's
    # 0102_static_group_rebalance).
    c = coordinator(initial_rebalance_delay_ms=0)
    first = join(c, T0, instance_id="consumer1")
    await settle()
    assert not first.done()
    second = join(c, T0, instance_id="consumer2")
    await settle()
    assert not second.done()
    c.tick(T0)
    result_1, result_2 = await first, await second
    assert result_1.generation_id == result_2.generation_id == 1
    leader = result_1 if result_1.leader_id == result_1.member_id else result_2
    assert {m[1] for m in leader.members} == {"consumer1", "consumer2"}
    # Later rebalances still end as soon as every member has rejoined.
    rejoin_1 = join(c, T0, result_1.member_id, instance_id="consumer1")
    await settle()
    assert (await rejoin_1).generation_id == 1, "a follower's rejoin with the same protocols"
    newcomer = join(c, T0, instance_id="consumer3")
    rejoins = [
        join(c, T0, r.member_id, instance_id=f"consumer{n}")
        for n, r in ((1, result_1), (2, result_2))
    ]
    results = [await task for task in (newcomer, *rejoins)]
    assert {r.generation_id for r in results} == {2}


async def test_followers_sync_waits_for_the_leaders_assignment() -> None:
    c = coordinator()
    ids = [await member_id_for(c, T0) for _ in range(2)]
    joins = [join(c, T0, m) for m in ids]
    await settle()
    c.tick(T0 + DELAY_MS)
    results = [await t for t in joins]
    leader = results[0].leader_id
    follower = next(m for m in ids if m != leader)
    follower_sync = sync(c, T0 + DELAY_MS, follower, 1)
    await settle()
    assert not follower_sync.done()
    leader_sync = sync(c, T0 + DELAY_MS, leader, 1, [(leader, b"L"), (follower, b"F")])
    assert (await leader_sync).assignment == b"L"
    assert (await follower_sync).assignment == b"F"
    assert c.groups["g"].state == states.GroupState.STABLE


async def test_heartbeat_errors_fence_stale_members() -> None:
    c = coordinator()
    (a, _), generation = await stable_group(c, 2)
    now = T0 + DELAY_MS
    assert heartbeat(c, now, a, generation) == ErrorCode.none
    assert heartbeat(c, now, a, generation - 1) == ErrorCode.illegal_generation
    assert heartbeat(c, now, "nobody", generation) == ErrorCode.unknown_member_id
    # A third member joining puts the others into a rebalance they learn of by heartbeat.
    newcomer = await member_id_for(c, now)
    pending_join = join(c, now, newcomer)
    await settle()
    assert c.groups["g"].state == states.GroupState.PREPARING_REBALANCE
    assert heartbeat(c, now, a, generation) == ErrorCode.rebalance_in_progress
    assert not pending_join.done()


async def test_member_without_heartbeats_expires_after_its_session_timeout() -> None:
    c = coordinator()
    (a, b), generation = await stable_group(c, 2)
    start = T0 + DELAY_MS
    # a keeps heartbeating; b goes silent.
    for step in range(1, 10):
        assert heartbeat(c, start + step * 1000, a, generation) == ErrorCode.none
        c.tick(start + step * 1000)
    assert c.groups["g"].state == states.GroupState.STABLE
    c.tick(start + SESSION_MS - 1)
    assert b in c.groups["g"].members
    c.tick(start + SESSION_MS)
    group = c.groups["g"]
    assert b not in group.members
    assert group.state == states.GroupState.PREPARING_REBALANCE
    # a finds out, rejoins, and is alone in the next generation.
    now = start + SESSION_MS
    assert heartbeat(c, now, a, generation) == ErrorCode.rebalance_in_progress
    result = await join(c, now, a)
    assert result.error == ErrorCode.none
    assert result.generation_id == generation + 1
    assert [m[0] for m in result.members] == [a]


async def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    c = coordinator()
    (a, b), generation = await stable_group(c, 2)
    now = T0 + DELAY_MS
    c.leave("g", [(b, None)], now)
    # a keeps its session alive with heartbeats (answered REBALANCE_IN_PROGRESS) but never
    # rejoins.
    for at in range(now, now + REBALANCE_MS, 5000):
        assert heartbeat(c, at, a, generation) == ErrorCode.rebalance_in_progress
        c.tick(at)
    c.tick(now + REBALANCE_MS - 1)
    assert c.groups["g"].members.keys() == {a}
    c.tick(now + REBALANCE_MS)
    group = c.groups["g"]
    assert group.members == {}
    assert group.state == states.GroupState.EMPTY
    assert group.generation_id == generation + 1


async def test_last_member_leaving_empties_the_group_and_keeps_its_offsets() -> None:
    store = Stored()
    c = coordinator(store)
    (a,), generation = await stable_group(c, 1)
    now = T0 + DELAY_MS
    outcome = await c.commit_offsets(
        group_id="g",
        generation_id=generation,
        member_id=a,
        group_instance_id=None,
        offsets=[("t", 0, 42, 3, "meta")],
        now_ms=now,
    )
    assert outcome == {("t", 0): ErrorCode.none}
    error, results = c.leave("g", [(a, None)], now)
    assert error == ErrorCode.none and results == [(a, None, ErrorCode.none)]
    group = c.groups["g"]
    assert group.state == states.GroupState.EMPTY
    fetched = c.fetch_offsets("g", [("t", 0), ("t", 1)])
    assert fetched[("t", 1)] is None
    committed = fetched[("t", 0)]
    assert committed is not None
    assert (committed.offset, committed.leader_epoch, committed.metadata) == (42, 3, "meta")


async def test_commits_are_fenced_by_generation_and_rebalance() -> None:
    c = coordinator()
    (a, b), generation = await stable_group(c, 2)
    now = T0 + DELAY_MS

    async def commit(member_id: str, gen: int) -> Any:
        return await c.commit_offsets(
            group_id="g",
            generation_id=gen,
            member_id=member_id,
            group_instance_id=None,
            offsets=[("t", 0, 1, -1, None)],
            now_ms=now,
        )

    assert await commit(a, generation) == {("t", 0): ErrorCode.none}
    assert await commit(a, generation - 1) == ErrorCode.illegal_generation
    assert await commit("stranger", generation) == ErrorCode.unknown_member_id
    # An admin-style commit (generation -1) is refused while the group has members.
    assert await commit("", -1) == ErrorCode.unknown_member_id
    newcomer = await member_id_for(c, now)
    join(c, now, newcomer)
    await settle()
    # PreparingRebalance: the current generation may still commit what it consumed.
    assert await commit(a, generation) == {("t", 0): ErrorCode.none}
    joins = [join(c, now, a), join(c, now, b)]
    results = [await t for t in joins]
    assert c.groups["g"].state == states.GroupState.COMPLETING_REBALANCE
    assert await commit(a, results[0].generation_id) == ErrorCode.rebalance_in_progress


async def test_admin_commit_to_an_empty_group_and_oversized_metadata() -> None:
    c = coordinator(offset_metadata_max_bytes=8)
    outcome = await c.commit_offsets(
        group_id="tools",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        offsets=[("t", 0, 5, -1, "short"), ("t", 1, 5, -1, "far too long metadata")],
        now_ms=T0,
    )
    assert outcome == {
        ("t", 0): ErrorCode.none,
        ("t", 1): ErrorCode.offset_metadata_too_large,
    }
    fetched = c.fetch_offsets("tools", None)
    assert set(fetched) == {("t", 0)}
    assert c.groups["tools"].state == states.GroupState.EMPTY


async def test_static_member_restart_keeps_its_assignment_without_a_rebalance() -> None:
    c = coordinator()
    first = join(c, T0, instance_id="pod-0")
    await settle()
    c.tick(T0 + DELAY_MS)
    joined = await first
    assert joined.error == ErrorCode.none, "static members skip KIP-394's extra round trip"
    old_id = joined.member_id
    assert (
        await sync(c, T0 + DELAY_MS, old_id, 1, [(old_id, b"A")], instance_id="pod-0")
    ).error == (ErrorCode.none)
    # The same instance comes back with no member id (a restarted pod).
    again = await join(c, T0 + 5000, instance_id="pod-0")
    assert again.error == ErrorCode.none
    assert again.member_id != old_id
    assert again.generation_id == 1, "same generation: no rebalance"
    assert c.groups["g"].state == states.GroupState.STABLE
    resync = await sync(c, T0 + 5000, again.member_id, 1, instance_id="pod-0")
    assert resync.assignment == b"A"
    # The old incarnation is fenced.
    assert heartbeat(c, T0 + 5000, old_id, 1, "pod-0") == ErrorCode.fenced_instance_id


async def test_inconsistent_protocols_are_refused() -> None:
    c = coordinator()
    await stable_group(c, 1)
    other = await join(c, T0 + DELAY_MS, version=3, protocols=[("roundrobin", subscription("t"))])
    assert other.error == ErrorCode.inconsistent_group_protocol


async def test_session_timeout_outside_the_brokers_bounds_is_refused() -> None:
    c = coordinator(min_session_timeout_ms=6000, max_session_timeout_ms=60_000)
    assert (await join(c, T0, session_ms=100)).error == ErrorCode.invalid_session_timeout
    assert (await join(c, T0, session_ms=600_000)).error == ErrorCode.invalid_session_timeout


async def test_group_max_size() -> None:
    c = coordinator(max_group_size=1)
    await member_id_for(c, T0)
    assert (await join(c, T0)).error == ErrorCode.group_max_size_reached


async def test_delete_groups_only_when_empty_and_tombstones_are_stored() -> None:
    store = Stored()
    c = coordinator(store)
    (a,), generation = await stable_group(c, 1)
    now = T0 + DELAY_MS
    await c.commit_offsets(
        group_id="g",
        generation_id=generation,
        member_id=a,
        group_instance_id=None,
        offsets=[("t", 0, 7, -1, "")],
        now_ms=now,
    )
    assert await c.delete_groups(["g", "missing"], now) == {
        "g": ErrorCode.non_empty_group,
        "missing": ErrorCode.group_id_not_found,
    }
    c.leave("g", [(a, None)], now)
    assert await c.delete_groups(["g"], now) == {"g": ErrorCode.none}
    assert "g" not in c.groups
    tombstones = [offsets_records.parse_key(k) for k, v in store.entries if v is None]
    assert offsets_records.OffsetKey("g", "t", 0) in tombstones
    assert offsets_records.GroupKey("g") in tombstones
    # Replaying the stored records leaves nothing behind.
    assert restarted(store, now).groups == {}


async def test_replaying_the_stored_records_restores_groups_and_offsets() -> None:
    store = Stored()
    c = coordinator(store)
    ids, generation = await stable_group(c, 2)
    now = T0 + DELAY_MS
    for partition, member_id in enumerate(ids):
        await c.commit_offsets(
            group_id="g",
            generation_id=generation,
            member_id=member_id,
            group_instance_id=None,
            offsets=[("t", partition, 100 + partition, 2, f"m{partition}")],
            now_ms=now,
        )
    again = restarted(store, now + 1000)
    group = again.groups["g"]
    assert group.state == states.GroupState.STABLE
    assert group.generation_id == generation
    assert set(group.members) == set(ids)
    assert {m.assignment for m in group.members.values()} == {i.encode() for i in ids}
    offsets = again.fetch_offsets("g", None)
    assert {k: (v.offset, v.metadata) for k, v in offsets.items() if v} == {
        ("t", 0): (100, "m0"),
        ("t", 1): (101, "m1"),
    }
    # The restored members keep their generation: a heartbeat is accepted.
    assert (
        again.heartbeat(
            group_id="g",
            generation_id=generation,
            member_id=ids[0],
            group_instance_id=None,
            now_ms=now + 1000,
        )
        == ErrorCode.none
    )


async def test_offsets_of_an_empty_group_expire_after_retention() -> None:
    store = Stored()
    retention = 60_000
    c = coordinator(store, offsets_retention_ms=retention)
    (a,), generation = await stable_group(c, 1)
    now = T0 + DELAY_MS
    await c.commit_offsets(
        group_id="g",
        generation_id=generation,
        member_id=a,
        group_instance_id=None,
        offsets=[("t", 0, 9, -1, "")],
        now_ms=now,
    )
    # While the group has members, its offsets never expire.
    assert await c.expire_offsets(now + 10 * retention) == 0
    emptied_at = now + 1000
    c.leave("g", [(a, None)], emptied_at)
    assert await c.expire_offsets(emptied_at + retention - 1) == 0
    assert await c.expire_offsets(emptied_at + retention) == 1
    assert "g" not in c.groups


async def test_deleting_a_topic_forgets_its_offsets() -> None:
    c = coordinator()
    await c.commit_offsets(
        group_id="tools",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        offsets=[("gone", 0, 5, -1, ""), ("kept", 0, 6, -1, "")],
        now_ms=T0,
    )
    assert c.forget_topic("gone", T0) == 1
    await c.drain()
    assert set(c.fetch_offsets("tools", None)) == {("kept", 0)}


async def test_offset_delete_refuses_subscribed_topics() -> None:
    c = coordinator()
    (a,), generation = await stable_group(c, 1)
    now = T0 + DELAY_MS
    await c.commit_offsets(
        group_id="g",
        generation_id=generation,
        member_id=a,
        group_instance_id=None,
        offsets=[("t", 0, 1, -1, ""), ("other", 0, 2, -1, "")],
        now_ms=now,
    )
    assert await c.delete_offsets("g", [("t", 0), ("other", 0)], now) == {
        ("t", 0): ErrorCode.group_subscribed_to_topic,
        ("other", 0): ErrorCode.none,
    }
    assert set(c.fetch_offsets("g", None)) == {("t", 0)}
    assert await c.delete_offsets("nope", [("t", 0)], now) == ErrorCode.group_id_not_found


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("a", 97), ("hello", 99162322), ("polygenelubricants", -(2**31))],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert offsets_records.java_string_hash(text) == expected


def test_group_partition_matches_kafka() -> None:
    # Integer.MIN_VALUE hashes to partition 0, as Utils.abs does in Kafka.
    assert offsets_records.partition_for("polygenelubricants", 50) == 0
    assert offsets_records.partition_for("hello", 50) == 99162322 % 50


def test_record_formats_round_trip() -> None:
    key = offsets_records.OffsetKey("g", "topic", 3)
    assert offsets_records.parse_key(offsets_records.offset_key(key)) == key
    value = group_model.CommittedOffset(10, 4, "meta", T0)
    assert offsets_records.parse_offset_value(offsets_records.offset_value(value)) == value
    member = offsets_records.MemberRecord("m", "i", "c", "/h", 300, 10, b"sub", b"asg")
    group = offsets_records.GroupRecord("consumer", 5, "range", "m", T0, (member,))
    assert offsets_records.parse_group_value(offsets_records.group_value(group)) == group
    with pytest.raises(offsets_records.RecordFormatError):
        offsets_records.parse_offset_value(offsets_records.offset_value(value)[:-3])
    with pytest.raises(offsets_records.RecordFormatError):
        offsets_records.parse_key(b"\x00\x09")


async def test_a_commit_the_store_cannot_write_is_refused_and_not_remembered() -> None:
    c = coordinator(Stored(failing=True))
    outcome = await c.commit_offsets(
        group_id="tools",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        offsets=[("t", 0, 5, -1, "")],
        now_ms=T0,
    )
    assert outcome == ErrorCode.not_coordinator
    assert c.fetch_offsets("tools", [("t", 0)]) == {("t", 0): None}


async def test_an_assignment_the_store_cannot_write_is_not_handed_out() -> None:
    store = Stored()
    c = coordinator(store)
    ids = [await member_id_for(c, T0) for _ in range(2)]
    joins = [join(c, T0, m) for m in ids]
    await settle()
    c.tick(T0 + DELAY_MS)
    leader = (await joins[0]).leader_id
    await joins[1]
    follower = next(m for m in ids if m != leader)
    follower_sync = sync(c, T0 + DELAY_MS, follower, 1)
    await settle()
    store.failing = True
    leader_sync = await sync(c, T0 + DELAY_MS, leader, 1, [(leader, b"L"), (follower, b"F")])
    # Kafka answers a storage error with NOT_COORDINATOR and rebalances.
    assert leader_sync.error == ErrorCode.not_coordinator
    assert (await follower_sync).error == ErrorCode.not_coordinator
    group = c.groups["g"]
    assert group.state == states.GroupState.PREPARING_REBALANCE
    assert {m.assignment for m in group.members.values()} == {b""}


async def test_a_static_rejoin_the_store_cannot_write_keeps_the_old_member() -> None:
    store = Stored()
    c = coordinator(store)
    first = join(c, T0, instance_id="pod-0")
    await settle()
    c.tick(T0 + DELAY_MS)
    old_id = (await first).member_id
    await sync(c, T0 + DELAY_MS, old_id, 1, [(old_id, b"A")], instance_id="pod-0")
    store.failing = True
    again = await join(c, T0 + 5000, instance_id="pod-0")
    assert again.error == ErrorCode.not_coordinator
    assert set(c.groups["g"].members) == {old_id}
    assert heartbeat(c, T0 + 5000, old_id, 1, "pod-0") == ErrorCode.none


async def test_a_group_deletion_the_store_cannot_write_keeps_the_group() -> None:
    store = Stored()
    c = coordinator(store)
    await c.commit_offsets(
        group_id="tools",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        offsets=[("t", 0, 5, -1, "")],
        now_ms=T0,
    )
    store.failing = True
    assert await c.delete_groups(["tools"], T0) == {"tools": ErrorCode.not_coordinator}
    assert await c.delete_offsets("tools", [("t", 0)], T0) == ErrorCode.not_coordinator
    assert c.groups["tools"].state == states.GroupState.EMPTY
    assert set(c.fetch_offsets("tools", None)) == {("t", 0)}
    assert await c.expire_offsets(T0 + 10**12) == 0
    assert set(c.fetch_offsets("tools", None)) == {("t", 0)}


async def test_groups_load_and_unload_with_their_offsets_partition() -> None:
    """A broker coordinates the groups of the offsets partitions it leads: those of a
    partition whose leadership comes here are rebuilt from its log; those of one whose
    leadership goes are dropped, a member waiting in a rebalance told NOT_COORDINATOR."""
    store = Stored()
    first = coordinator(store)
    now = 1_000
    names = [f"group-{n}" for n in range(12)]
    for name in names:
        await first.commit_offsets(
            group_id=name,
            member_id="",
            generation_id=-1,
            group_instance_id=None,
            offsets=[("t", 0, 7, -1, None)],
            now_ms=now,
        )
    by_partition = {
        p: {n for n in names if offsets_records.partition_for(n, Stored.PARTITIONS) == p}
        for p in range(Stored.PARTITIONS)
    }
    assert all(by_partition.values())  # every partition holds some group
    second = coordinator(store)
    second.load([1], now)
    assert set(second.groups) == by_partition[1]
    for name in by_partition[1]:
        found = second.fetch_offsets(name, None)[("t", 0)]
        assert found is not None and found.offset == 7
    second.load([0, 2], now)
    assert set(second.groups) == set(names)
    joining = asyncio.ensure_future(
        second.join(
            group_id=sorted(by_partition[2])[0],
            member_id="",
            group_instance_id=None,
            client_id="c",
            client_host="h",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            protocol_type="consumer",
            protocols=[("range", b"")],
            version=3,
            now_ms=now,
        )
    )
    await settle()
    assert second.unload([2]) == len(by_partition[2])
    assert set(second.groups) == by_partition[0] | by_partition[1]
    answer = await asyncio.wait_for(joining, 1)
    assert answer.error == ErrorCode.not_coordinator
