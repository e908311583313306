"""The transaction coordinator as a service (coordinator/transactions.py): it runs the
decisions of the txn_* rule modules, writes their records to `__transaction_state` and applies them
once written, sends the markers of prepared transactions and writes CompleteCommit /
CompleteAbort once every partition has its marker, loads and unloads partitions with
their coordinator epochs, aborts timed-out transactions and expires idle ids.

The log is in memory (it can hold, refuse or fail appends), the markers are answered by
a script per partition, the clock and the producer ids are the test's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import pytest
from kio.schema.errors import ErrorCode
from strom.coordinator import offsets_log, txn_records
from strom.coordinator.transactions import MarkerRequest, TransactionCoordinator, TxnConfig
from strom.coordinator.txn_records import TransactionLogValue
from strom.coordinator.txn_states import TransactionState, TransactionVersion

E = ErrorCode
S = TransactionState
T0 = 1_700_000_000_000
PARTITIONS = 4
EPOCH = 7  # the coordinator epoch every partition is loaded with
FIRST_PID = 1000
TIMEOUT = 60_000
EXPIRATION = 3_600_000
Entry = tuple[bytes, bytes | None]
TopicPartition = tuple[str, int]
T_0, T_1, U_0 = ("t", 0), ("t", 1), ("u", 0)


def id_in(partition: int, prefix: str = "txn") -> str:
    """A transactional id that `__transaction_state` partition `partition` holds."""
    for n in range(1000):
        candidate = f"{prefix}-{n}"
        if txn_records.partition_for(candidate, PARTITIONS) == partition:
            return candidate
    raise AssertionError(f"no id for partition {partition}")


A = id_in(0, "a")
B = id_in(0, "b")
C = id_in(1, "c")


class MemoryLog:
    """`__transaction_state` in memory. `hold()` keeps appends waiting until
    `release()`; `refuse(state, error)` fails the next append of a record in `state`
    (None: a tombstone, "any": whatever comes next)."""

    def __init__(self, partitions: int | None = PARTITIONS) -> None:
        self.count = partitions
        self.records: dict[int, list[Entry]] = {i: [] for i in range(partitions or 0)}
        self.refusals: list[tuple[object, ErrorCode]] = []
        self.gate: asyncio.Future[None] | None = None
        self.appends_started = 0

    def hold(self) -> None:
        self.gate = asyncio.get_running_loop().create_future()

    def release(self) -> None:
        assert self.gate is not None
        self.gate.set_result(None)
        self.gate = None

    def refuse(self, state: object, error: ErrorCode) -> None:
        self.refusals.append((state, error))

    def partition_count(self) -> int | None:
        return self.count

    async def ensure_created(self) -> int:
        assert self.count is not None
        return self.count

    async def append(
        self,
        partition: int,
        entries: Sequence[Entry],
        now_ms: int,
        producer: offsets_log.Producer | None = None,
    ) -> None:
        assert producer is None, "__transaction_state records are not transactional"
        self.appends_started += 1
        if self.gate is not None:
            await self.gate
        (_, value) = entries[0]
        parsed = txn_records.parse_value(value)
        state = None if parsed is None else parsed.state
        for refusal in self.refusals:
            wanted, error = refusal
            if wanted == "any" or wanted == state:
                self.refusals.remove(refusal)
                raise offsets_log.StoreFailed(f"refused: {error.name}", error)
        self.records[partition].extend(entries)

    def read(self, partition: int) -> Iterator[Entry]:
        return iter(list(self.records[partition]))

    def read_batches(self, partition: int) -> Iterator[offsets_log.StoredBatch]:
        return (offsets_log.StoredBatch([entry]) for entry in self.read(partition))

    def values(self, transactional_id: str) -> list[TransactionLogValue | None]:
        """The records written for an id, in log order (None for a tombstone)."""
        partition = txn_records.partition_for(transactional_id, PARTITIONS)
        return [
            txn_records.parse_value(value)
            for key, value in self.records[partition]
            if txn_records.parse_key(key) == transactional_id
        ]

    def states(self, transactional_id: str) -> list[TransactionState | None]:
        return [None if v is None else v.state for v in self.values(transactional_id)]

    def last(self, transactional_id: str) -> TransactionLogValue:
        value = self.values(transactional_id)[-1]
        assert value is not None
        return value

    def put(self, transactional_id: str, value: TransactionLogValue | None) -> None:
        """A record written by an earlier coordinator."""
        partition = txn_records.partition_for(transactional_id, PARTITIONS)
        encoded = None if value is None else txn_records.encode_value(value)
        self.records[partition].append((txn_records.encode_key(transactional_id), encoded))


class Markers:
    """The coordinator's SendMarkers: records every request and answers each partition
    from its script (NONE once the script is used up). `hold()` keeps rounds waiting."""

    def __init__(self) -> None:
        self.requests: list[MarkerRequest] = []
        self.script: dict[TopicPartition, list[ErrorCode]] = {}
        self.gate: asyncio.Future[None] | None = None

    def hold(self) -> None:
        self.gate = asyncio.get_running_loop().create_future()

    def release(self) -> None:
        assert self.gate is not None
        self.gate.set_result(None)
        self.gate = None

    async def __call__(self, request: MarkerRequest) -> dict[TopicPartition, ErrorCode]:
        self.requests.append(request)
        if self.gate is not None:
            await self.gate
        answers = {}
        for partition in request.partitions:
            script = self.script.get(partition)
            answers[partition] = script.pop(0) if script else E.none
        return answers


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def time_ms(self) -> int:
        return self.now


class ProducerIds:
    def __init__(self) -> None:
        self.next = FIRST_PID
        self.failure: Exception | None = None
        self.gate: asyncio.Future[None] | None = None

    async def __call__(self) -> int:
        if self.gate is not None:
            await self.gate
        if self.failure is not None:
            raise self.failure
        self.next += 1
        return self.next - 1


class World:
    def __init__(self, config: TxnConfig | None = None, partitions: int | None = PARTITIONS):
        self.log = MemoryLog(partitions)
        self.markers = Markers()
        self.clock = Clock()
        self.ids = ProducerIds()
        self.coordinator = self.new_coordinator(
            config or TxnConfig(retry_backoff_ms=0, id_expiration_ms=EXPIRATION)
        )

    def new_coordinator(self, config: TxnConfig) -> TransactionCoordinator:
        return TransactionCoordinator(
            self.log,
            send_markers=self.markers,
            new_producer_id=self.ids,
            time_ms=self.clock.time_ms,
            config=config,
        )

    def load_all(self, epoch: int = EPOCH) -> None:
        for partition in range(PARTITIONS):
            self.coordinator.load(partition, epoch)

    async def init(self, transactional_id: str, pid: int = -1, epoch: int = -1) -> tuple[int, int]:
        reply = await self.coordinator.init_producer_id(transactional_id, TIMEOUT, pid, epoch)
        assert reply.error is E.none, reply
        return reply.producer_id, reply.producer_epoch

    async def begin(
        self, transactional_id: str, partitions: Sequence[TopicPartition] = (T_0, T_1)
    ) -> tuple[int, int]:
        """An initialised producer with an ongoing transaction over `partitions`."""
        pid, epoch = await self.init(transactional_id)
        added = await self.coordinator.add_partitions(transactional_id, pid, epoch, partitions)
        assert added is E.none
        return pid, epoch

    def state(self, transactional_id: str) -> str:
        described = self.coordinator.describe(transactional_id)
        assert described.error is E.none, described
        return described.state


@pytest.fixture
def w() -> World:
    world = World()
    world.load_all()
    return world


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


# InitProducerId --------------------------------------------------------------------------


async def test_init_of_a_new_id_allocates_a_producer_id_at_epoch_0_and_writes_empty(
    w: World,
) -> None:
    reply = await w.coordinator.init_producer_id(A, TIMEOUT, -1, -1)
    assert (reply.error, reply.producer_id, reply.producer_epoch) == (E.none, FIRST_PID, 0)
    [value] = w.log.values(A)
    assert value is not None
    assert (value.state, value.producer_id, value.producer_epoch, value.timeout_ms) == (
        S.EMPTY,
        FIRST_PID,
        0,
        TIMEOUT,
    )
    assert w.state(A) == "Empty"


async def test_init_again_bumps_the_epoch_of_the_same_producer_id(w: World) -> None:
    assert await w.init(A) == (FIRST_PID, 0)
    assert await w.init(A) == (FIRST_PID, 1)
    assert await w.init(A) == (FIRST_PID, 2)
    assert w.ids.next == FIRST_PID + 1, "one producer id for the id's whole life"
    assert [v.producer_epoch for v in w.log.values(A) if v is not None] == [0, 1, 2]
    assert await w.init(B) == (FIRST_PID + 1, 0), "another id, another producer id"


async def test_kip_360_init_with_the_current_epoch_bumps_and_a_stale_one_is_fenced(
    w: World,
) -> None:
    pid, epoch = await w.init(A)
    assert await w.init(A, pid, epoch) == (pid, epoch + 1)
    # the answer was lost: the producer asks again with the epoch it had
    assert await w.init(A, pid, epoch) == (pid, epoch + 1)
    stale = await w.coordinator.init_producer_id(A, TIMEOUT, pid, epoch + 5)
    assert stale.error is E.producer_fenced
    other = await w.coordinator.init_producer_id(A, TIMEOUT, pid + 50, epoch + 1)
    assert other.error is E.producer_fenced
    assert await w.init(A, pid, epoch + 1) == (pid, epoch + 2)


async def test_init_refuses_bad_timeouts_and_an_empty_id_without_writing(w: World) -> None:
    too_long = await w.coordinator.init_producer_id(A, 900_001, -1, -1)
    assert too_long.error is E.invalid_transaction_timeout
    zero = await w.coordinator.init_producer_id(A, 0, -1, -1)
    assert zero.error is E.invalid_transaction_timeout
    half = await w.coordinator.init_producer_id(A, TIMEOUT, 5, -1)
    assert half.error is E.invalid_request, "producer id and epoch come together"
    assert w.log.values(A) == []
    assert w.coordinator.describe(A).error is E.transactional_id_not_found


async def test_init_fences_an_ongoing_transaction_which_is_aborted_with_markers(
    w: World,
) -> None:
    pid, epoch = await w.begin(A, [T_0, T_1])
    # a restarted producer: the zombie's transaction is aborted first
    fencing = await w.coordinator.init_producer_id(A, TIMEOUT, -1, -1)
    assert fencing.error is E.concurrent_transactions
    await w.coordinator.drain()
    [request] = w.markers.requests
    assert request == MarkerRequest(
        pid, epoch + 1, False, EPOCH, TransactionVersion.TV_0, frozenset({T_0, T_1})
    )
    assert w.log.states(A) == [S.EMPTY, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT]
    assert [v.producer_epoch for v in w.log.values(A) if v is not None][2:] == [
        epoch + 1,
        epoch + 1,
    ]
    # the retry finds CompleteAbort and bumps again
    assert await w.init(A) == (pid, epoch + 2)
    # the zombie is fenced everywhere
    zombie_end = await w.coordinator.end_txn(A, pid, epoch, True)
    assert zombie_end.error is E.producer_fenced
    zombie_add = await w.coordinator.add_partitions(A, pid, epoch, [U_0])
    assert zombie_add is E.producer_fenced


async def test_init_while_the_markers_of_an_end_are_out_is_concurrent(w: World) -> None:
    pid, epoch = await w.begin(A)
    w.markers.hold()
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    await settle()
    busy = await w.coordinator.init_producer_id(A, TIMEOUT, -1, -1)
    assert busy.error is E.concurrent_transactions
    w.markers.release()
    await w.coordinator.drain()
    assert await w.init(A) == (pid, epoch + 1)


async def test_init_answers_load_in_progress_when_no_producer_id_can_be_had(w: World) -> None:
    w.ids.failure = RuntimeError("the controller is away")
    reply = await w.coordinator.init_producer_id(A, TIMEOUT, -1, -1)
    assert reply.error is E.coordinator_load_in_progress
    assert w.log.values(A) == []
    assert w.coordinator.describe(A).error is E.transactional_id_not_found
    w.ids.failure = None
    assert await w.init(A) == (FIRST_PID, 0)


async def test_a_request_on_an_id_with_a_write_in_flight_is_concurrent(w: World) -> None:
    pid, epoch = await w.init(A)
    w.log.hold()
    adding = asyncio.ensure_future(w.coordinator.add_partitions(A, pid, epoch, [T_0]))
    await settle()
    assert (await w.coordinator.end_txn(A, pid, epoch, False)).error is E.concurrent_transactions
    assert (await w.coordinator.init_producer_id(A, TIMEOUT, -1, -1)).error is (
        E.concurrent_transactions
    )
    w.log.release()
    assert await adding is E.none
    assert w.state(A) == "Ongoing"


async def test_the_next_transactions_add_waits_for_the_last_ones_markers(w: World) -> None:
    """A producer's next AddPartitionsToTxn (or AddOffsetsToTxn), sent as soon as EndTxn
    answered, is held until the markers are written and CompleteCommit is in the log,
    then starts the new transaction: no CONCURRENT_TRANSACTIONS round trip (which
    librdkafka's abort_transaction() turns into a fatal INVALID_TXN_STATE)."""
    pid, epoch = await w.begin(A, [T_0])
    w.markers.hold()
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    adding = asyncio.ensure_future(w.coordinator.add_partitions(A, pid, epoch, [T_1]))
    offsets = asyncio.ensure_future(w.coordinator.add_offsets(A, pid, epoch, 3))
    await settle()
    assert not adding.done() and not offsets.done()
    w.markers.release()
    assert await adding is E.none
    assert await offsets is E.none
    assert (
        w.log.states(A)
        == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT] + [S.ONGOING] * 2
    )
    assert w.log.last(A).partitions == {T_1, ("__consumer_offsets", 3)}
    assert (w.coordinator.held.held, w.coordinator.held.ran_out) == (2, 0)
    assert (await w.coordinator.end_txn(A, pid, epoch, False)).error is E.none
    # an add that finds nothing ending is not held
    await w.coordinator.drain()
    await w.begin(B)
    assert w.coordinator.held.held == 2


async def test_an_add_answers_concurrent_once_the_end_outlasts_the_wait() -> None:
    w = World(TxnConfig(retry_backoff_ms=0, add_partitions_wait_ms=20))
    w.load_all()
    pid, epoch = await w.begin(A, [T_0])
    w.markers.hold()
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    loop = asyncio.get_running_loop()
    asked = loop.time()
    assert await w.coordinator.add_partitions(A, pid, epoch, [T_1]) is (E.concurrent_transactions)
    assert loop.time() - asked >= 0.019  # the 20 ms wait (timers may fire a tick early)
    assert w.log.states(A)[-1] is S.PREPARE_COMMIT, "nothing written"
    assert (w.coordinator.held.held, w.coordinator.held.ran_out) == (1, 1)
    assert w.coordinator.held.seconds >= 0.019
    w.markers.release()
    await w.coordinator.drain()
    assert await w.coordinator.add_partitions(A, pid, epoch, [T_1]) is E.none


async def test_an_add_waiting_for_the_end_answers_not_coordinator_after_an_unload(
    w: World,
) -> None:
    pid, epoch = await w.begin(A, [T_0])
    w.markers.hold()
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    adding = asyncio.ensure_future(w.coordinator.add_partitions(A, pid, epoch, [T_1]))
    await settle()
    w.coordinator.unload(0)
    w.markers.release()
    assert await adding is E.not_coordinator


# AddPartitionsToTxn, AddOffsetsToTxn, verification ----------------------------------------


async def test_add_partitions_writes_ongoing_with_the_union_and_the_start_time(
    w: World,
) -> None:
    pid, epoch = await w.init(A)
    w.clock.now = T0 + 5
    assert await w.coordinator.add_partitions(A, pid, epoch, [T_0]) is E.none
    first = w.log.last(A)
    assert (first.state, first.partitions, first.start_ms) == (S.ONGOING, frozenset({T_0}), T0 + 5)
    w.clock.now = T0 + 9
    assert await w.coordinator.add_partitions(A, pid, epoch, [T_1, U_0]) is E.none
    second = w.log.last(A)
    assert second.partitions == {T_0, T_1, U_0}
    assert second.start_ms == T0 + 5, "the first add starts the transaction"
    described = w.coordinator.describe(A)
    assert described.state == "Ongoing" and described.start_ms == T0 + 5
    assert described.topics == (("t", (0, 1)), ("u", (0,)))


async def test_adding_partitions_already_in_the_transaction_writes_nothing(w: World) -> None:
    pid, epoch = await w.begin(A, [T_0, T_1])
    written = len(w.log.values(A))
    assert await w.coordinator.add_partitions(A, pid, epoch, [T_1]) is E.none
    assert len(w.log.values(A)) == written


async def test_add_partitions_refuses_unknown_ids_other_producers_and_old_epochs(
    w: World,
) -> None:
    assert await w.coordinator.add_partitions(A, 1, 0, [T_0]) is E.invalid_producer_id_mapping
    pid, epoch = await w.init(A)
    assert await w.coordinator.add_partitions(A, pid + 1, epoch, [T_0]) is (
        E.invalid_producer_id_mapping
    )
    await w.init(A)
    assert await w.coordinator.add_partitions(A, pid, epoch, [T_0]) is E.producer_fenced
    assert w.log.states(A) == [S.EMPTY, S.EMPTY]


async def test_add_offsets_adds_the_groups_offsets_partition(w: World) -> None:
    pid, epoch = await w.init(A)
    assert await w.coordinator.add_offsets(A, pid, epoch, 17) is E.none
    assert w.log.last(A).partitions == {("__consumer_offsets", 17)}
    assert await w.coordinator.add_offsets(A, pid + 1, epoch, 17) is (E.invalid_producer_id_mapping)


async def test_verify_partitions_says_which_are_in_the_transaction(w: World) -> None:
    pid, epoch = await w.begin(A, [T_0])
    written = len(w.log.values(A))
    assert w.coordinator.verify_partitions(A, pid, epoch, [T_0, T_1]) == {
        T_0: E.none,
        T_1: E.transaction_abortable,
    }
    assert w.coordinator.verify_partitions(A, pid, epoch - 1, [T_0]) == {T_0: E.producer_fenced}
    assert len(w.log.values(A)) == written, "verification writes nothing"
    w.coordinator.unload(0)
    assert w.coordinator.verify_partitions(A, pid, epoch, [T_0, T_1]) == {
        T_0: E.not_coordinator,
        T_1: E.not_coordinator,
    }


# EndTxn and its markers --------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
async def test_end_txn_writes_prepare_sends_markers_then_writes_complete(
    w: World, commit: bool
) -> None:
    pid, epoch = await w.begin(A, [T_0, T_1, U_0])
    reply = await w.coordinator.end_txn(A, pid, epoch, commit)
    assert reply.error is E.none
    prepared = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    completed = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
    assert prepared in w.log.states(A)  # the answer comes once Prepare* is written
    await w.coordinator.drain()
    assert w.markers.requests == [
        MarkerRequest(
            pid, epoch, commit, EPOCH, TransactionVersion.TV_0, frozenset({T_0, T_1, U_0})
        )
    ]
    assert w.log.states(A) == [S.EMPTY, S.ONGOING, prepared, completed]
    done = w.log.last(A)
    assert (done.producer_id, done.producer_epoch, done.partitions) == (pid, epoch, frozenset())
    described = w.coordinator.describe(A)
    assert described.state == completed.kafka_name and described.topics == ()


async def test_complete_is_written_only_once_every_partition_has_its_marker(
    w: World,
) -> None:
    pid, epoch = await w.begin(A, [T_0, T_1])
    w.markers.hold()
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    await settle()
    assert w.log.states(A)[-1] is S.PREPARE_COMMIT
    assert w.state(A) == "PrepareCommit"
    w.markers.release()
    await w.coordinator.drain()
    assert w.log.states(A)[-1] is S.COMPLETE_COMMIT
    assert w.state(A) == "CompleteCommit"


async def test_retriable_marker_errors_are_retried_for_the_partitions_still_waiting(
    w: World,
) -> None:
    pid, epoch = await w.begin(A, [T_0, T_1, U_0])
    w.markers.script[T_0] = [E.not_leader_or_follower, E.not_enough_replicas]
    w.markers.script[U_0] = [E.request_timed_out]
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    await w.coordinator.drain()
    assert [r.partitions for r in w.markers.requests] == [
        {T_0, T_1, U_0},
        {T_0, U_0},
        {T_0},
    ]
    assert all(
        (r.producer_id, r.producer_epoch, r.commit, r.coordinator_epoch)
        == (pid, epoch, True, EPOCH)
        for r in w.markers.requests
    )
    assert w.log.states(A).count(S.COMPLETE_COMMIT) == 1


@pytest.mark.parametrize("fenced", [E.invalid_producer_epoch, E.transaction_coordinator_fenced])
async def test_a_fencing_marker_error_stops_the_round_without_completing(
    w: World, fenced: ErrorCode
) -> None:
    pid, epoch = await w.begin(A, [T_0, T_1])
    w.markers.script[T_0] = [fenced]
    w.markers.script[T_1] = [E.not_leader_or_follower]
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    await w.coordinator.drain()
    assert len(w.markers.requests) == 1, "no retry once a newer epoch has taken over"
    assert w.log.states(A)[-1] is S.PREPARE_COMMIT
    assert w.state(A) == "PrepareCommit"


async def test_end_txn_retries_answer_as_kafka_does(w: World) -> None:
    pid, epoch = await w.begin(A)
    w.markers.hold()
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    await settle()
    # the markers are out: the same end must wait, the opposite one too
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.concurrent_transactions
    assert (await w.coordinator.end_txn(A, pid, epoch, False)).error is E.concurrent_transactions
    w.markers.release()
    await w.coordinator.drain()
    written = len(w.log.values(A))
    # a retry of the completed end is fine and writes nothing; the opposite is not
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    assert (await w.coordinator.end_txn(A, pid, epoch, False)).error is E.invalid_txn_state
    assert len(w.log.values(A)) == written
    assert len(w.markers.requests) == 1


async def test_end_txn_refuses_wrong_producers_epochs_and_states(w: World) -> None:
    assert (await w.coordinator.end_txn(A, 1, 0, True)).error is E.invalid_producer_id_mapping
    pid, epoch = await w.init(A)
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.invalid_txn_state
    assert (await w.coordinator.end_txn(A, pid, epoch, False)).error is E.invalid_txn_state
    await w.coordinator.add_partitions(A, pid, epoch, [T_0])
    assert (await w.coordinator.end_txn(A, pid, epoch + 1, True)).error is E.producer_fenced
    assert (await w.coordinator.end_txn(A, pid + 1, epoch, True)).error is (
        E.invalid_producer_id_mapping
    )
    assert w.markers.requests == []
    assert w.state(A) == "Ongoing"


async def test_tv2_end_txn_bumps_the_epoch_and_marks_with_the_bumped_one(w: World) -> None:
    pid, epoch = await w.begin(A, [T_0])
    reply = await w.coordinator.end_txn(A, pid, epoch, True, TransactionVersion.TV_2)
    assert (reply.error, reply.producer_id, reply.producer_epoch) == (E.none, pid, epoch + 1)
    await w.coordinator.drain()
    [request] = w.markers.requests
    assert (request.producer_epoch, request.transaction_version) == (
        epoch + 1,
        TransactionVersion.TV_2,
    )
    done = w.log.last(A)
    assert (done.state, done.producer_epoch, done.client_transaction_version) == (
        S.COMPLETE_COMMIT,
        epoch + 1,
        2,
    )
    # the retry with the epoch it sent is recognised and answers the bumped epoch
    retry = await w.coordinator.end_txn(A, pid, epoch, True, TransactionVersion.TV_2)
    assert (retry.error, retry.producer_epoch) == (E.none, epoch + 1)


async def test_an_abort_with_no_partitions_completes_without_markers(w: World) -> None:
    pid, epoch = await w.init(A)
    reply = await w.coordinator.end_txn(A, pid, epoch, False, TransactionVersion.TV_2)
    assert reply.error is E.none
    await w.coordinator.drain()
    assert all(r.partitions for r in w.markers.requests), "no empty marker rounds"
    assert w.log.states(A) == [S.EMPTY, S.PREPARE_ABORT, S.COMPLETE_ABORT]


# The coordinator's own writes failing ------------------------------------------------------


@pytest.mark.parametrize(
    ("append_error", "answer"),
    [
        (E.unknown_topic_or_partition, E.coordinator_not_available),
        (E.not_enough_replicas, E.coordinator_not_available),
        (E.not_enough_replicas_after_append, E.coordinator_not_available),
        (E.request_timed_out, E.coordinator_not_available),
        (E.not_leader_or_follower, E.not_coordinator),
        (E.kafka_storage_error, E.not_coordinator),
        (E.message_too_large, E.unknown_server_error),
    ],
)
async def test_a_refused_write_maps_its_error_and_clears_the_pending_state(
    w: World, append_error: ErrorCode, answer: ErrorCode
) -> None:
    pid, epoch = await w.init(A)
    w.log.refuse("any", append_error)
    assert await w.coordinator.add_partitions(A, pid, epoch, [T_0]) is answer
    assert w.state(A) == "Empty", "memory changes only once the record is written"
    # no transition left pending: the retry goes through
    assert await w.coordinator.add_partitions(A, pid, epoch, [T_0]) is E.none
    assert w.log.states(A) == [S.EMPTY, S.ONGOING]


async def test_a_refused_first_init_keeps_the_id_and_its_producer_id(w: World) -> None:
    w.log.refuse("any", E.not_enough_replicas)
    reply = await w.coordinator.init_producer_id(A, TIMEOUT, -1, -1)
    assert reply.error is E.coordinator_not_available
    assert w.log.values(A) == []
    assert await w.init(A) == (FIRST_PID, 0), "the retry starts at epoch 0 again"


async def test_a_refused_prepare_leaves_the_transaction_ongoing_without_markers(
    w: World,
) -> None:
    pid, epoch = await w.begin(A)
    w.log.refuse(S.PREPARE_COMMIT, E.not_leader_or_follower)
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.not_coordinator
    await w.coordinator.drain()
    assert w.markers.requests == []
    assert w.state(A) == "Ongoing"
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    await w.coordinator.drain()
    assert w.log.states(A)[-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]


async def test_a_fence_whose_write_failed_does_not_bump_the_epoch_twice(w: World) -> None:
    pid, epoch = await w.begin(A)
    w.log.refuse(S.PREPARE_ABORT, E.not_enough_replicas)
    first = await w.coordinator.init_producer_id(A, TIMEOUT, -1, -1)
    assert first.error is E.coordinator_not_available
    retry = await w.coordinator.init_producer_id(A, TIMEOUT, -1, -1)
    assert retry.error is E.concurrent_transactions
    await w.coordinator.drain()
    aborted = [v for v in w.log.values(A) if v is not None and v.state is S.PREPARE_ABORT]
    assert [v.producer_epoch for v in aborted] == [epoch + 1]
    assert w.markers.requests[0].producer_epoch == epoch + 1
    assert await w.init(A) == (pid, epoch + 2)


async def test_complete_is_retried_while_the_log_is_unavailable(w: World) -> None:
    pid, epoch = await w.begin(A)
    w.log.refuse(S.COMPLETE_COMMIT, E.not_enough_replicas)
    w.log.refuse(S.COMPLETE_COMMIT, E.request_timed_out)
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    await w.coordinator.drain()
    assert w.log.states(A)[-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    assert len(w.markers.requests) == 1, "the markers are not sent again"
    assert w.state(A) == "CompleteCommit"


async def test_complete_refused_as_not_coordinator_is_left_to_the_next_load(
    w: World,
) -> None:
    pid, epoch = await w.begin(A)
    w.log.refuse(S.COMPLETE_COMMIT, E.not_leader_or_follower)
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    await w.coordinator.drain()
    assert w.log.states(A)[-1] is S.PREPARE_COMMIT
    assert w.state(A) == "PrepareCommit"
    # the partition's next load finishes it
    w.coordinator.load(0, EPOCH + 1)
    await w.coordinator.drain()
    assert w.log.states(A)[-1] is S.COMPLETE_COMMIT
    assert w.markers.requests[-1].coordinator_epoch == EPOCH + 1


# Placement: loading, unloading, coordinator epochs -----------------------------------------


async def test_ids_of_partitions_not_loaded_answer_not_coordinator() -> None:
    w = World()
    w.coordinator.load(1, EPOCH)
    assert (await w.coordinator.init_producer_id(A, TIMEOUT, -1, -1)).error is E.not_coordinator
    assert await w.coordinator.add_partitions(A, 1, 0, [T_0]) is E.not_coordinator
    assert await w.coordinator.add_offsets(A, 1, 0, 3) is E.not_coordinator
    assert (await w.coordinator.end_txn(A, 1, 0, True)).error is E.not_coordinator
    assert w.coordinator.describe(A).error is E.not_coordinator
    assert w.log.records[0] == []
    assert await w.init(C) == (FIRST_PID, 0), "partition 1 is loaded"
    assert w.coordinator.loaded_partitions == {1: EPOCH}


async def test_without_the_topic_every_id_answers_not_coordinator() -> None:
    w = World(partitions=None)
    assert (await w.coordinator.init_producer_id(A, TIMEOUT, -1, -1)).error is E.not_coordinator
    assert w.coordinator.describe(A).error is E.not_coordinator
    assert w.coordinator.partition_of(A) is None


def value(state: TransactionState, **changes: object) -> TransactionLogValue:
    fields: dict[str, object] = {
        "producer_id": 5,
        "producer_epoch": 3,
        "timeout_ms": TIMEOUT,
        "state": state,
        "partitions": frozenset(),
        "last_update_ms": T0,
        "start_ms": -1,
    }
    if state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        fields["partitions"] = frozenset({T_0, T_1})
        fields["start_ms"] = T0 - 10
    if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        fields["start_ms"] = T0 - 10
    fields.update(changes)
    return TransactionLogValue(**fields)  # type: ignore[arg-type]


async def test_load_replays_the_log_later_records_winning_and_tombstones_removing() -> None:
    w = World()
    w.log.put(A, value(S.EMPTY, producer_epoch=0))
    w.log.put(B, value(S.EMPTY, producer_id=6, producer_epoch=0))
    w.log.put(A, value(S.ONGOING, producer_epoch=0))
    w.log.put(B, None)
    w.log.records[0].append((txn_records.encode_key("broken"), b"\x00\x09garbage"))
    assert w.coordinator.load(0, EPOCH) == 1
    assert w.coordinator.loaded_partitions == {0: EPOCH}
    described = w.coordinator.describe(A)
    assert (described.state, described.producer_id, described.producer_epoch) == (
        "Ongoing",
        5,
        0,
    )
    assert described.topics == (("t", (0, 1)),)
    assert w.coordinator.describe(B).error is E.transactional_id_not_found
    # the loaded transaction goes on where it was
    assert (await w.coordinator.end_txn(A, 5, 0, True)).error is E.none
    await w.coordinator.drain()
    assert w.markers.requests[0].partitions == {T_0, T_1}
    assert w.log.states(A)[-1] is S.COMPLETE_COMMIT


async def test_load_sends_the_markers_of_prepared_transactions_with_its_epoch() -> None:
    w = World()
    w.log.put(A, value(S.PREPARE_COMMIT))
    w.log.put(B, value(S.PREPARE_ABORT, producer_id=6, partitions=frozenset({U_0})))
    w.log.put(id_in(0, "d"), value(S.ONGOING, producer_id=8))
    assert w.coordinator.load(0, 12) == 3
    await w.coordinator.drain()
    by_producer = {r.producer_id: r for r in w.markers.requests}
    assert set(by_producer) == {5, 6}, "only prepared transactions have markers to send"
    assert by_producer[5] == MarkerRequest(
        5, 3, True, 12, TransactionVersion.TV_0, frozenset({T_0, T_1})
    )
    assert by_producer[6] == MarkerRequest(
        6, 3, False, 12, TransactionVersion.TV_0, frozenset({U_0})
    )
    assert w.log.states(A)[-1] is S.COMPLETE_COMMIT
    assert w.log.states(B)[-1] is S.COMPLETE_ABORT
    assert w.state(A) == "CompleteCommit" and w.state(B) == "CompleteAbort"


async def test_a_new_coordinator_loads_what_the_last_one_wrote(w: World) -> None:
    pid, epoch = await w.begin(A, [T_0, U_0])
    pid_b, epoch_b = await w.begin(B, [T_1])
    assert (await w.coordinator.end_txn(B, pid_b, epoch_b, False)).error is E.none
    await w.coordinator.drain()
    successor = w.new_coordinator(TxnConfig(retry_backoff_ms=0))
    assert successor.load(0, EPOCH + 1) == 2
    assert successor.describe(A) == w.coordinator.describe(A)
    assert successor.describe(B) == w.coordinator.describe(B)
    assert await successor.add_partitions(A, pid, epoch, [T_1]) is E.none


async def test_unload_drops_the_ids_of_the_partition(w: World) -> None:
    await w.init(A)
    await w.init(C)
    assert w.coordinator.unload(0) == 1
    assert w.coordinator.unload(0) == 0
    assert w.coordinator.describe(A).error is E.not_coordinator
    assert w.coordinator.describe(C).error is E.none
    assert [t.transactional_id for t in w.coordinator.list().transactions] == [C]


async def test_unload_in_the_middle_of_a_marker_round_stops_it(w: World) -> None:
    pid, epoch = await w.begin(A)
    w.markers.script[T_0] = [E.not_leader_or_follower] * 3
    w.markers.hold()
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    await settle()
    assert len(w.markers.requests) == 1
    w.coordinator.unload(0)
    w.markers.release()
    await w.coordinator.drain()
    assert len(w.markers.requests) == 1, "no retry after the unload"
    assert w.log.states(A)[-1] is S.PREPARE_COMMIT, "nothing written after the unload"


async def test_unload_after_the_markers_but_before_complete_writes_nothing(w: World) -> None:
    pid, epoch = await w.begin(A)
    w.markers.hold()
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    await settle()
    w.coordinator.unload(0)
    w.markers.release()  # every partition answers NONE
    await w.coordinator.drain()
    assert w.log.states(A)[-1] is S.PREPARE_COMMIT


async def test_a_coordinator_epoch_change_during_a_write_answers_not_coordinator(
    w: World,
) -> None:
    pid, epoch = await w.begin(A)
    w.log.hold()
    ending = asyncio.ensure_future(w.coordinator.end_txn(A, pid, epoch, True))
    await settle()
    w.coordinator.load(0, EPOCH + 1)  # the leadership moved and came back
    w.log.release()
    assert (await ending).error is E.not_coordinator
    await w.coordinator.drain()
    assert w.markers.requests == [], "the next coordinator sends the markers"


async def test_a_write_failing_after_an_unload_answers_not_coordinator(w: World) -> None:
    pid, epoch = await w.init(A)
    w.log.hold()
    w.log.refuse("any", E.not_enough_replicas)
    adding = asyncio.ensure_future(w.coordinator.add_partitions(A, pid, epoch, [T_0]))
    await settle()
    w.coordinator.unload(0)
    w.log.release()
    assert await adding is E.not_coordinator


async def test_an_unload_while_a_producer_id_is_allocated_answers_not_coordinator(
    w: World,
) -> None:
    w.ids.gate = asyncio.get_running_loop().create_future()
    initialising = asyncio.ensure_future(w.coordinator.init_producer_id(A, TIMEOUT, -1, -1))
    await settle()
    w.coordinator.unload(0)
    w.ids.gate.set_result(None)
    assert (await initialising).error is E.not_coordinator
    assert w.log.values(A) == []


# Timeouts ---------------------------------------------------------------------------------


async def test_a_transaction_open_past_its_timeout_is_fenced_and_aborted(w: World) -> None:
    pid, epoch = await w.begin(A, [T_0, T_1])
    w.clock.now = T0 + TIMEOUT
    assert await w.coordinator.abort_timed_out() == 0, "not past its timeout yet"
    assert w.log.states(A)[-1] is S.ONGOING
    w.clock.now = T0 + TIMEOUT + 1
    assert await w.coordinator.abort_timed_out() == 1
    await w.coordinator.drain()
    assert w.markers.requests == [
        MarkerRequest(pid, epoch + 1, False, EPOCH, TransactionVersion.TV_0, frozenset({T_0, T_1}))
    ]
    assert w.log.states(A)[-2:] == [S.PREPARE_ABORT, S.COMPLETE_ABORT]
    assert w.log.last(A).producer_epoch == epoch + 1
    # the producer finds itself fenced, and must initialise again
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.producer_fenced
    assert (await w.coordinator.end_txn(A, pid, epoch, False)).error is E.producer_fenced
    assert await w.coordinator.add_partitions(A, pid, epoch, [T_0]) is E.producer_fenced
    assert await w.init(A) == (pid, epoch + 2)


async def test_timeouts_leave_idle_and_prepared_transactions_alone(w: World) -> None:
    await w.init(A)
    pid, epoch = await w.begin(B)
    w.markers.hold()
    assert (await w.coordinator.end_txn(B, pid, epoch, True)).error is E.none
    await settle()
    w.clock.now = T0 + 10 * TIMEOUT
    assert await w.coordinator.abort_timed_out() == 0
    w.markers.release()
    await w.coordinator.drain()
    assert w.log.states(B)[-1] is S.COMPLETE_COMMIT
    assert w.log.states(A) == [S.EMPTY]


async def test_a_failed_timeout_abort_does_not_bump_twice_on_the_next_try(w: World) -> None:
    pid, epoch = await w.begin(A)
    w.clock.now = T0 + TIMEOUT + 1
    w.log.refuse(S.PREPARE_ABORT, E.not_enough_replicas)
    assert await w.coordinator.abort_timed_out() == 0
    assert await w.coordinator.abort_timed_out() == 1
    await w.coordinator.drain()
    assert w.log.last(A).producer_epoch == epoch + 1
    assert w.markers.requests[0].producer_epoch == epoch + 1
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.producer_fenced


# Expiry -----------------------------------------------------------------------------------


async def test_expire_ids_tombstones_idle_ids_and_forgets_them(w: World) -> None:
    await w.init(A)
    pid_b, epoch_b = await w.begin(B)
    assert (await w.coordinator.end_txn(B, pid_b, epoch_b, True)).error is E.none
    await w.coordinator.drain()
    await w.begin(C)  # an open transaction never expires
    w.clock.now = T0 + EXPIRATION - 1
    assert await w.coordinator.expire_ids() == 0
    w.clock.now = T0 + EXPIRATION
    assert await w.coordinator.expire_ids() == 2
    assert w.log.states(A)[-1] is None and w.log.states(B)[-1] is None
    assert w.log.states(C)[-1] is S.ONGOING
    assert w.coordinator.describe(A).error is E.transactional_id_not_found
    assert w.coordinator.describe(B).error is E.transactional_id_not_found
    assert w.coordinator.describe(C).error is E.none
    # the id starts over with a new producer id; a reload agrees it was gone
    assert await w.init(A) == (FIRST_PID + 3, 0)
    successor = w.new_coordinator(TxnConfig())
    assert successor.load(0, EPOCH + 1) == 1
    assert successor.describe(B).error is E.transactional_id_not_found


async def test_an_id_whose_tombstone_was_refused_stays_and_works(w: World) -> None:
    pid, epoch = await w.init(A)
    w.clock.now = T0 + EXPIRATION
    w.log.refuse(None, E.not_enough_replicas)
    assert await w.coordinator.expire_ids() == 0
    assert w.coordinator.describe(A).error is E.none
    assert await w.init(A) == (pid, epoch + 1), "no transition left pending"


# Describe and list ------------------------------------------------------------------------


async def test_describe_answers_the_ids_state_and_not_found_for_unknown_ones(
    w: World,
) -> None:
    pid, epoch = await w.begin(A, [U_0, T_1])
    described = w.coordinator.describe(A)
    assert described.error is E.none
    assert (described.producer_id, described.producer_epoch, described.timeout_ms) == (
        pid,
        epoch,
        TIMEOUT,
    )
    assert described.topics == (("t", (1,)), ("u", (0,)))
    assert w.coordinator.describe(B).error is E.transactional_id_not_found


async def test_list_filters_by_state_producer_id_duration_and_pattern(w: World) -> None:
    pid_a, _ = await w.begin(A)
    w.clock.now = T0 + 1000
    pid_b, _ = await w.init(B)
    pid_c, _ = await w.begin(C)
    w.clock.now = T0 + 1500

    def listed(**filters: object) -> set[tuple[str, int, str]]:
        answer = w.coordinator.list(**filters)  # type: ignore[arg-type]
        assert answer.error is E.none
        return {(t.transactional_id, t.producer_id, t.state) for t in answer.transactions}

    assert listed() == {(A, pid_a, "Ongoing"), (B, pid_b, "Empty"), (C, pid_c, "Ongoing")}
    assert listed(state_filters=["Empty"]) == {(B, pid_b, "Empty")}
    assert listed(producer_id_filters=[pid_a, pid_b]) == {
        (A, pid_a, "Ongoing"),
        (B, pid_b, "Empty"),
    }
    # KIP-994: running for longer than the duration (an idle id's start time is -1, so
    # it passes, as in Kafka's listTransactionStates)
    assert listed(duration_filter_ms=1000) == {(A, pid_a, "Ongoing"), (B, pid_b, "Empty")}
    assert listed(duration_filter_ms=1000, state_filters=["Ongoing"]) == {(A, pid_a, "Ongoing")}
    assert listed(transactional_id_pattern="a-.*") == {(A, pid_a, "Ongoing")}
    unknown = w.coordinator.list(state_filters=["Ongoing", "Sleeping"])
    assert unknown.unknown_state_filters == ("Sleeping",)
    assert w.coordinator.list(transactional_id_pattern="(").error is E.invalid_regular_expression


async def test_stop_cancels_the_marker_rounds_in_flight(w: World) -> None:
    pid, epoch = await w.begin(A)
    w.markers.hold()
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
    await settle()
    w.coordinator.stop()
    await w.coordinator.drain()
    assert len(w.markers.requests) == 1
    assert w.log.states(A)[-1] is S.PREPARE_COMMIT


async def test_a_request_cancelled_mid_write_still_applies_its_record(w: World) -> None:
    """A client that goes away while its record waits for replication (the handler is
    cancelled with the connection) must not leave the id pending for good: the record is
    written, so memory follows it, and the next request is served."""
    pid, epoch = await w.begin(A, [T_0])
    w.log.hold()
    request = asyncio.get_running_loop().create_task(
        w.coordinator.add_partitions(A, pid, epoch, [T_1])
    )
    await settle()
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    w.log.release()
    await w.coordinator.drain()
    assert w.log.states(A)[-1] is S.ONGOING
    assert w.coordinator.describe(A).topics == (("t", (0, 1)),)
    assert (await w.coordinator.end_txn(A, pid, epoch, True)).error is E.none
