"""Offsets committed inside transactions (TxnOffsetCommit): written as the producer's
transactional batch to the group's `__consumer_offsets` partition, pending until the
producer's marker reaches that partition, then committed (COMMIT) or dropped (ABORT); on
load, the replay of the partition's batches and markers does the same (Kafka's
OffsetMetadataManager: replayTransactionalOffsetCommit / replayEndTransactionMarker).

The store is the broker's real adapter (offsets_log.PartitionsOffsetsLog) over byte logs,
so the batches carry their real flags and the markers are real control batches."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from kio.schema.errors import ErrorCode
from strom.coordinator import group as group_model
from strom.coordinator import groups, offsets_log, offsets_records, runtime
from strom.records import batches, control

E = ErrorCode
T0 = 1_700_000_000_000
RETENTION = 24 * 3600 * 1000
PID, OTHER_PID = 4001, 4002
T_0, T_1 = ("t", 0), ("t", 1)
Offsets = Sequence[tuple[str, int, int, int, str | None]]


def group_in(partition: int, partitions: int, prefix: str = "g") -> str:
    for n in range(1000):
        candidate = f"{prefix}-{n}"
        if offsets_records.partition_for(candidate, partitions) == partition:
            return candidate
    raise AssertionError(f"no group for partition {partition}")


class Chunks:
    """`__consumer_offsets` partitions as byte logs under the real PartitionsOffsetsLog:
    the coordinator's batches are appended whole; `marker` appends what a partition
    leader appends on WriteTxnMarkers."""

    def __init__(self, partitions: int = 1) -> None:
        self.partitions = partitions
        self.logs = {index: bytearray() for index in range(partitions)}
        self.refusal: Exception | None = None
        self.store = offsets_log.PartitionsOffsetsLog(
            partition_count=lambda: self.partitions,
            create=lambda: self.partitions,
            append_batch=self._append_batch,
            read_chunks=lambda index: [bytes(self.logs[index])],
        )

    def _append_batch(
        self, partition: int, data: bytearray, headers: list[batches.BatchHeader], now_ms: int
    ) -> None:
        if self.refusal is not None:
            raise self.refusal
        self.logs[partition] += data

    def marker(self, partition: int, producer_id: int, commit: bool, epoch: int = 0) -> None:
        self.logs[partition] += control.build_end_txn_marker(
            producer_id=producer_id,
            producer_epoch=epoch,
            commit=commit,
            coordinator_epoch=3,
            timestamp_ms=T0,
        )

    def headers(self, partition: int) -> list[batches.BatchHeader]:
        return list(batches.iter_batches(bytes(self.logs[partition])))


def coordinator(chunks: Chunks) -> groups.GroupCoordinator:
    return groups.GroupCoordinator(
        group_model.CoordinatorConfig(offsets_retention_ms=RETENTION), chunks.store
    )


def reloaded(chunks: Chunks) -> groups.GroupCoordinator:
    """A coordinator that has just gained every partition: rebuilt from the logs."""
    fresh = coordinator(chunks)
    fresh.load(range(chunks.partitions), T0)
    return fresh


async def txn_commit(
    c: groups.GroupCoordinator,
    offsets: Offsets,
    *,
    group_id: str = "g",
    producer_id: int = PID,
    producer_epoch: int = 0,
    generation_id: int = -1,
    member_id: str = "",
    now_ms: int = T0,
) -> ErrorCode | dict[tuple[str, int], ErrorCode]:
    return await c.commit_transactional_offsets(
        group_id=group_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=None,
        offsets=list(offsets),
        now_ms=now_ms,
    )


async def plain_commit(
    c: groups.GroupCoordinator, offsets: Offsets, group_id: str = "g", now_ms: int = T0
) -> None:
    answer = await c.commit_offsets(
        group_id=group_id,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        offsets=list(offsets),
        now_ms=now_ms,
    )
    assert answer == {(t, p): E.none for t, p, *_ in offsets}


def end(chunks: Chunks, c: groups.GroupCoordinator, producer_id: int, commit: bool) -> int:
    """The producer's marker reaches partition 0, as LocalMarkers writes it."""
    chunks.marker(0, producer_id, commit)
    return c.on_transaction_completed(producer_id, 0, commit)


def committed(c: groups.GroupCoordinator, key: tuple[str, int], group_id: str = "g") -> int | None:
    fetched = c.fetch_offsets(group_id, [key])
    assert isinstance(fetched, dict)
    found = fetched[key]
    return None if found is None else found.offset


def pending(c: groups.GroupCoordinator, key: tuple[str, int], group_id: str = "g") -> bool:
    return c.groups[group_id].has_pending_offset(key)


# Writing ----------------------------------------------------------------------------------


async def test_transactional_offsets_are_the_producers_transactional_batch() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    answer = await txn_commit(c, [("t", 0, 10, 2, "m"), ("t", 1, 11, -1, None)], producer_epoch=5)
    assert answer == {T_0: E.none, T_1: E.none}
    [header] = chunks.headers(0)
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.records_count) == (PID, 5, 2)
    [stored] = chunks.store.read_batches(0)
    assert stored.transactional_producer == PID
    values = {
        (key.topic, key.partition): offsets_records.parse_offset_value(value).offset
        for key_bytes, value in stored.entries
        if value is not None
        and isinstance(key := offsets_records.parse_key(key_bytes), offsets_records.OffsetKey)
    }
    assert values == {T_0: 10, T_1: 11}


async def test_offsets_stay_pending_until_the_commit_marker() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await txn_commit(c, [("t", 0, 10, -1, "")])
    assert committed(c, T_0) is None, "not visible before the marker"
    assert pending(c, T_0) and not pending(c, T_1)
    assert end(chunks, c, PID, commit=True) == 1
    assert committed(c, T_0) == 10
    assert not pending(c, T_0)
    assert c.on_transaction_completed(PID, 0, True) == 0, "a second marker changes nothing"


async def test_an_abort_marker_drops_them_and_the_committed_offset_stays() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await plain_commit(c, [("t", 0, 5, -1, "")])
    await txn_commit(c, [("t", 0, 10, -1, ""), ("t", 1, 11, -1, "")])
    assert end(chunks, c, PID, commit=False) == 2
    assert committed(c, T_0) == 5
    assert committed(c, T_1) is None
    assert not pending(c, T_0) and not pending(c, T_1)


async def test_a_marker_ends_only_its_producers_offsets() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await txn_commit(c, [("t", 0, 10, -1, "")], producer_id=PID)
    await txn_commit(c, [("t", 1, 20, -1, "")], producer_id=OTHER_PID)
    assert end(chunks, c, OTHER_PID, commit=True) == 1
    assert committed(c, T_1) == 20
    assert committed(c, T_0) is None and pending(c, T_0)


async def test_a_marker_ends_the_offsets_of_its_own_partition_only() -> None:
    chunks = Chunks(partitions=3)
    c = coordinator(chunks)
    here, there = group_in(0, 3), group_in(1, 3)
    await txn_commit(c, [("t", 0, 10, -1, "")], group_id=here)
    await txn_commit(c, [("t", 0, 30, -1, "")], group_id=there)
    assert c.on_transaction_completed(PID, 1, True) == 1
    assert committed(c, T_0, there) == 30
    assert committed(c, T_0, here) is None and pending(c, T_0, here)


async def test_one_marker_commits_the_offsets_of_every_group_of_the_partition() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await txn_commit(c, [("t", 0, 10, -1, "")], group_id="g")
    await txn_commit(c, [("t", 0, 40, -1, "")], group_id="h")
    assert end(chunks, c, PID, commit=True) == 2
    assert committed(c, T_0, "g") == 10 and committed(c, T_0, "h") == 40


async def test_pending_offsets_are_kept_by_producer_later_commits_winning() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await txn_commit(c, [("t", 0, 10, -1, "")])
    await txn_commit(c, [("t", 0, 12, -1, "")])
    assert c.groups["g"].pending_txn_offsets[PID][T_0].offset == 12
    end(chunks, c, PID, commit=True)
    assert committed(c, T_0) == 12


@pytest.mark.parametrize(
    ("refusal", "answer"),
    [
        (offsets_log.StoreFailed("fenced", E.producer_fenced), E.producer_fenced),
        (offsets_log.StoreFailed("old", E.invalid_producer_epoch), E.invalid_producer_epoch),
        (offsets_log.StoreFailed("state", E.invalid_txn_state), E.invalid_txn_state),
        (offsets_log.StoreFailed("abortable", E.transaction_abortable), E.transaction_abortable),
        (offsets_log.StoreFailed("isr", E.not_enough_replicas), E.not_coordinator),
        (offsets_log.StoreFailed("leader", E.not_leader_or_follower), E.not_coordinator),
        (OSError(28, "No space left on device"), E.not_coordinator),
    ],
)
async def test_a_refused_transactional_write_answers_and_leaves_nothing_pending(
    refusal: Exception, answer: ErrorCode
) -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    chunks.refusal = refusal
    assert await txn_commit(c, [("t", 0, 10, -1, "")]) is answer
    group = c.groups.get("g")
    assert group is None or not group.pending_txn_offsets
    assert chunks.logs[0] == b""


async def test_metadata_too_large_refuses_that_partition_only() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    answer = await txn_commit(c, [("t", 0, 10, -1, "x" * 5000), ("t", 1, 11, -1, "")])
    assert answer == {T_0: E.offset_metadata_too_large, T_1: E.none}
    assert not pending(c, T_0) and pending(c, T_1)


async def test_an_unknown_group_takes_commits_only_from_outside_group_management() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    assert await txn_commit(c, [("t", 0, 10, -1, "")], generation_id=1) is E.illegal_generation
    assert "g" not in c.groups
    assert await txn_commit(c, [("t", 0, 10, -1, "")], group_id="") is E.invalid_group_id
    assert chunks.logs[0] == b""


async def classic_group(chunks: Chunks, generation: int = 3) -> None:
    """A Stable classic group with member m1 at `generation`, in the log."""
    record = offsets_records.GroupRecord(
        protocol_type="consumer",
        generation_id=generation,
        protocol_name="range",
        leader_id="m1",
        state_timestamp_ms=T0,
        members=(offsets_records.MemberRecord("m1", None, "c", "/h", 30_000, 10_000, b"", b""),),
    )
    entry = (
        offsets_records.group_key(offsets_records.GroupKey("g")),
        offsets_records.group_value(record),
    )
    await chunks.store.append(0, [entry], T0)


async def test_members_of_a_group_are_checked_as_kafka_checks_txn_offset_commits() -> None:
    chunks = Chunks()
    await classic_group(chunks, generation=3)
    c = reloaded(chunks)
    one = [("t", 0, 10, -1, "")]
    assert await txn_commit(c, one, generation_id=3, member_id="m9") is E.unknown_member_id
    assert await txn_commit(c, one, generation_id=2, member_id="m1") is E.illegal_generation
    assert await txn_commit(c, one, generation_id=3, member_id="m1") == {T_0: E.none}
    # a producer outside the group management commits whatever the group's state
    assert await txn_commit(c, [("t", 1, 11, -1, "")]) == {T_1: E.none}
    assert pending(c, T_0) and pending(c, T_1)


# Loading ----------------------------------------------------------------------------------


async def test_load_commits_offsets_whose_commit_marker_follows() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await plain_commit(c, [("t", 0, 5, -1, "")])
    await txn_commit(c, [("t", 0, 10, -1, ""), ("t", 1, 11, -1, "")])
    chunks.marker(0, PID, commit=True)
    after = reloaded(chunks)
    assert committed(after, T_0) == 10 and committed(after, T_1) == 11
    assert after.groups["g"].pending_txn_offsets == {}


async def test_load_drops_offsets_whose_abort_marker_follows() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await plain_commit(c, [("t", 0, 5, -1, "")])
    await txn_commit(c, [("t", 0, 10, -1, ""), ("t", 1, 11, -1, "")])
    chunks.marker(0, PID, commit=False)
    after = reloaded(chunks)
    assert committed(after, T_0) == 5 and committed(after, T_1) is None
    assert not pending(after, T_0) and not pending(after, T_1)


async def test_load_keeps_offsets_without_a_marker_pending_until_it_comes() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await plain_commit(c, [("t", 0, 5, -1, "")])
    await txn_commit(c, [("t", 0, 10, -1, "")])
    after = reloaded(chunks)
    assert committed(after, T_0) == 5
    assert pending(after, T_0)
    assert end(chunks, after, PID, commit=True) == 1
    assert committed(after, T_0) == 10
    assert committed(reloaded(chunks), T_0) == 10, "the marker in the log says the same"


async def test_a_group_with_only_pending_offsets_is_not_dropped_as_an_empty_husk() -> None:
    chunks = Chunks()
    await txn_commit(coordinator(chunks), [("t", 0, 10, -1, "")])
    after = reloaded(chunks)
    assert "g" in after.groups
    assert pending(after, T_0)
    assert end(chunks, after, PID, commit=True) == 1
    assert committed(after, T_0) == 10


async def test_a_group_whose_only_offsets_were_aborted_is_gone_after_load() -> None:
    chunks = Chunks()
    await txn_commit(coordinator(chunks), [("t", 0, 10, -1, "")])
    chunks.marker(0, PID, commit=False)
    assert "g" not in reloaded(chunks).groups


async def test_load_follows_interleaved_transactions_of_two_producers() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await txn_commit(c, [("t", 0, 10, -1, "")], producer_id=PID)
    await txn_commit(c, [("t", 1, 20, -1, "")], producer_id=OTHER_PID)
    chunks.marker(0, OTHER_PID, commit=False)
    await txn_commit(c, [("t", 1, 21, -1, "")], producer_id=OTHER_PID)
    chunks.marker(0, PID, commit=True)
    after = reloaded(chunks)
    assert committed(after, T_0) == 10
    assert committed(after, T_1) is None
    assert after.groups["g"].pending_txn_offsets[OTHER_PID][T_1].offset == 21
    assert PID not in after.groups["g"].pending_txn_offsets


async def test_a_marker_in_the_log_before_the_transactions_batch_does_not_end_it() -> None:
    chunks = Chunks()
    chunks.marker(0, PID, commit=True)  # the end of an earlier transaction
    await txn_commit(coordinator(chunks), [("t", 0, 10, -1, "")])
    after = reloaded(chunks)
    assert committed(after, T_0) is None and pending(after, T_0)


# Kafka's rules where pending and plain offsets meet ---------------------------------------


async def test_a_newer_plain_commit_wins_over_the_transactions_offset_at_its_marker() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await txn_commit(c, [("t", 0, 10, -1, "")])
    await plain_commit(c, [("t", 0, 20, -1, "")])
    end(chunks, c, PID, commit=True)
    assert committed(c, T_0) == 20


async def test_on_load_a_newer_plain_commit_wins_over_the_transactions_offset() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await txn_commit(c, [("t", 0, 10, -1, "")])
    await plain_commit(c, [("t", 0, 20, -1, "")])
    chunks.marker(0, PID, commit=True)
    assert committed(reloaded(chunks), T_0) == 20


async def test_expiring_a_groups_offsets_keeps_its_pending_transactional_ones() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await plain_commit(c, [("t", 0, 5, -1, "")], now_ms=T0)
    await txn_commit(c, [("t", 1, 11, -1, "")], now_ms=T0 + RETENTION - 1)
    assert await c.expire_offsets(T0 + RETENTION) == 1
    end(chunks, c, PID, commit=True)
    assert committed(c, T_1) == 11
    assert committed(reloaded(chunks), T_1) == 11


async def test_deleting_a_groups_last_offset_keeps_its_pending_transactional_ones() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await plain_commit(c, [("t", 0, 5, -1, "")])
    await txn_commit(c, [("t", 1, 11, -1, "")])
    assert await c.delete_offsets("g", [T_0], T0) == {T_0: E.none}
    end(chunks, c, PID, commit=True)
    assert committed(c, T_1) == 11


async def test_an_offset_with_a_pending_transactional_commit_does_not_expire() -> None:
    chunks = Chunks()
    c = coordinator(chunks)
    await plain_commit(c, [("t", 0, 5, -1, ""), ("t", 1, 6, -1, "")], now_ms=T0)
    # a recent commit keeps the group itself (whose deletion is the bug above)
    await plain_commit(c, [("u", 0, 7, -1, "")], now_ms=T0 + RETENTION - 1)
    await txn_commit(c, [("t", 0, 10, -1, "")], now_ms=T0 + RETENTION - 1)
    await c.expire_offsets(T0 + RETENTION)
    assert "g" in c.groups
    assert committed(c, T_1) is None, "t-1 had no transaction: it expired"
    end(chunks, c, PID, commit=False)
    assert committed(c, T_0) == 5


async def test_the_runtime_replays_the_same_batches_the_adapter_reads() -> None:
    """runtime.Runtime.load over the adapter directly, with the groups map of the caller."""
    chunks = Chunks()
    await txn_commit(coordinator(chunks), [("t", 0, 10, -1, "")])
    chunks.marker(0, OTHER_PID, commit=True)  # another producer's marker: not ours
    loaded: dict[str, group_model.Group] = {}
    runtime.Runtime(chunks.store).load(loaded, [0], T0)
    assert loaded["g"].has_pending_offset(T_0)
    chunks.marker(0, PID, commit=True)
    again: dict[str, group_model.Group] = {}
    runtime.Runtime(chunks.store).load(again, [0], T0)
    assert again["g"].offsets[T_0].offset == 10 and not again["g"].pending_txn_offsets
