"""The transactional chaos test's clients (issue 18, docs/transactions-design.md step 11),
all confluent-kafka (librdkafka), recording a chaos_txn_checker.History:

- input producers: transactional, a few records per transaction over random partitions of
  `in`, some transactions aborted on purpose (a seeded RNG per client);
- transform workers: a read_committed group consumer on `in`, a transactional producer
  writing each record's output to the same partition of `out` with the consumed offsets
  in the transaction (send_offsets_to_transaction), some aborted on purpose;
- tailing readers (read_committed, every partition from the start) and an LSO watcher;
- after the run: full read_committed reads of both topics, the group's offsets.

Errors are handled as librdkafka documents for transactions: a retriable error retries the
call, an abortable one aborts the transaction, a fatal one replaces the producer by one of
the same transactional.id (its init_transactions fences the old one and ends what it left
open). A transaction whose commit raised and was not proven aborted has an unknown outcome.
Values: input `ID:SEQUENCE:INDEX`, output `INPUT>ID:SEQUENCE` (the transform's transaction).
Every count and time is bounded; the clients talk to the given bootstrap servers only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from chaos_txn_checker import Consumed, History, LsoSample, Outcome, Read, Record, Transform, Txn
from chaos_workload import CLIENT_LOG_LEVEL, Clock
from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from waiting import wait_until

OP_TIMEOUT_S = 10.0  # one transactional call: init, send offsets, commit, abort
RETRY_FOR_S = 30.0  # a retriable call is retried this long
RETRY_BACKOFF_S = 0.2
# librdkafka's send_offsets_to_transaction can block past its timeout, for good, when the
# group coordinator it has cached was decommissioned (a broker fenced by a fault leaves
# the metadata): confluentinc/librdkafka#5456 and #5511, open against 2.14-2.16. A call
# still blocked this long after its timeout counts as its producer's failure.
HUNG_MARGIN_S = 10.0


class ClientHung(Exception):
    """A librdkafka call that did not return within its timeout and HUNG_MARGIN_S."""


REQUEST_TIMEOUT_S = 5.0  # ListOffsets, OffsetFetch
# Where every partition's log starts (new topics, nothing deletes records): consumers start
# at this concrete offset, never at a logical one (OFFSET_BEGINNING, or auto.offset.reset
# with no committed offset). librdkafka (2.16, and its master) takes a ListOffsets reply
# from a partition's previous leader as "outdated" and puts the partition back into the
# offset-query state whatever it is in, and an active partition then starts over at its
# logical start offset: a reader read a partition again from its start, and a
# consume-transform-produce worker transformed its input twice (the debug log shows
# "outdated offset response: (re)starting offset query timer for offset BEGINNING" 14 s
# after the query, the partition long active at its new leader). The workload works
# around it so that the checks judge the broker.
LOG_START = 0
POLL_S = 0.2
PURGED = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)


@dataclasses.dataclass(frozen=True)
class TxnWorkloadConfig:
    """The workload's knobs. The seed fixes every random choice (records per transaction,
    their partitions, which transactions abort on purpose); the cluster's timing does not."""

    seed: int
    seconds: float = 10.0  # no input transaction begins after this
    producers: int = 3
    transactions_per_producer: int = 25
    records_per_transaction: tuple[int, int] = (2, 5)  # drawn uniformly, both included
    transactions_per_second: float = 4.0  # per producer
    abort_ratio: float = 0.25
    workers: int = 2
    batch: int = 8  # input records per transform transaction, at most
    transform_abort_ratio: float = 0.15
    readers_per_topic: int = 2
    partitions: int = 3
    in_topic: str = "in"
    out_topic: str = "out"
    group: str = "strom-txn-transform"
    transaction_timeout_ms: int = 10_000
    settle_s: float = 60.0  # each wait after the producers: decided, transformed, read
    lso_every_s: float = 0.25


def input_value(transactional_id: str, sequence: int, index: int) -> str:
    return f"{transactional_id}:{sequence:05d}:{index}"


def output_value(source: str, transactional_id: str, sequence: int) -> str:
    return f"{source}>{transactional_id}:{sequence:05d}"


def describe(failure: BaseException) -> str:
    if isinstance(failure, KafkaException) and isinstance(failure.args[0], KafkaError):
        return str(failure.args[0].str())
    return repr(failure)


class Context:
    """What every client shares: where the cluster is, the knobs, the clock, and the notes
    of what the clients ran into (retries, forced aborts, replaced clients) for the report."""

    def __init__(self, bootstrap: str, config: TxnWorkloadConfig, clock: Clock) -> None:
        self.bootstrap, self.config, self.clock = bootstrap, config, clock
        self.notes: list[str] = []
        self._lock = threading.Lock()

    def note(self, who: str, what: str) -> None:
        with self._lock:
            self.notes.append(f"{self.clock.now():6.1f}s {who}: {what}")

    def consumer(self, name: str, settings: Mapping[str, object] = {}) -> Consumer:
        """A read_committed consumer committing nothing by itself."""
        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": f"strom-{name}",
                "group.id": f"strom-{name}",  # librdkafka wants one even without a group
                "log_level": CLIENT_LOG_LEVEL,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                **settings,
            }
        )


class Client(threading.Thread):
    """A workload thread: works until `stop_at` (seconds on the clock) or a bound of its
    own, and keeps the error that ended it for the run's report."""

    def __init__(self, name: str, context: Context) -> None:
        super().__init__(name=name, daemon=True)
        self.context, self.config, self.clock = context, context.config, context.clock
        self.rng = random.Random(f"{self.config.seed}/{name}")
        self.stop_at = float("inf")
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as error:
            self.error = error

    def work(self) -> None:
        raise NotImplementedError


def bounded(call: Callable[[], None], timeout_s: float, what: str) -> None:
    """`call()` on a thread of its own, raising what it raises; ClientHung if it has not
    returned after `timeout_s` (it is then left blocked: a daemon thread)."""
    failures: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            call()
        except BaseException as error:
            failures.append(error)
        finally:
            done.set()

    threading.Thread(target=run, name=what, daemon=True).start()
    if not done.wait(timeout_s):
        raise ClientHung(f"{what} still blocked after {timeout_s:.0f}s")
    if failures:
        raise failures[0]


class TransactionalProducer:
    """One transactional.id's librdkafka producer, replaced after a fatal error."""

    def __init__(self, transactional_id: str, context: Context) -> None:
        self.transactional_id, self.context = transactional_id, context
        self.producer = self._new()

    def _new(self) -> Producer:
        timeout_ms = self.context.config.transaction_timeout_ms
        producer = Producer(
            {
                "bootstrap.servers": self.context.bootstrap,
                "client.id": f"strom-{self.transactional_id}",
                "log_level": CLIENT_LOG_LEVEL,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": timeout_ms,
                "message.timeout.ms": timeout_ms,  # librdkafka: not above the transaction's
                "linger.ms": 5,
            }
        )
        self._retrying(producer.init_transactions, "init_transactions")
        return producer

    def transaction(
        self,
        topic: str,
        records: tuple[Record, ...],
        *,
        abort: bool,
        offsets: tuple[list[TopicPartition], Any] | None = None,
    ) -> Outcome:
        """Produce `records` in one transaction, with `offsets` (positions and the
        consumer's group metadata), and commit it, or abort it if `abort`: its outcome."""
        commit_asked = False
        try:
            self.producer.poll(0)  # the last one's delivery reports; raises a fatal error
            self.producer.begin_transaction()
            for record in records:
                self.producer.produce(
                    topic, record.value.encode(), partition=record.partition, on_delivery=self._sent
                )
            if offsets is not None:
                positions, metadata = offsets
                producer = self.producer
                self._retrying(
                    lambda t: bounded(
                        lambda: producer.send_offsets_to_transaction(positions, metadata, t),
                        t + HUNG_MARGIN_S,
                        f"{self.transactional_id} send_offsets_to_transaction",
                    ),
                    "send_offsets_to_transaction",
                )
            if abort:
                # written first, so that the log holds what the abort marker hides (an abort
                # purges what librdkafka has not sent yet)
                self.producer.flush(OP_TIMEOUT_S)
                self._retrying(self.producer.abort_transaction, "abort_transaction")
                return Outcome.ABORTED
            commit_asked = True
            self._retrying(self.producer.commit_transaction, "commit_transaction")
            return Outcome.COMMITTED
        except (KafkaException, BufferError) as failure:
            return self._recover(failure, commit_asked)
        except ClientHung as hung:
            # The blocked producer is left to its thread; the new one's init_transactions
            # fences it and aborts what it left open (nothing was committed: no commit
            # was asked).
            self.context.note(self.transactional_id, f"{hung}: replaced by a new producer")
            self.producer = self._new()
            return Outcome.UNKNOWN if commit_asked else Outcome.ABORTED

    def _recover(self, failure: BaseException, commit_asked: bool) -> Outcome:
        self.context.note(self.transactional_id, describe(failure))
        error = failure.args[0] if isinstance(failure, KafkaException) else None
        if not (isinstance(error, KafkaError) and error.fatal()):
            try:
                self._retrying(self.producer.abort_transaction, "abort_transaction")
                return Outcome.ABORTED  # the coordinator acknowledged the abort
            except KafkaException as again:
                self.context.note(self.transactional_id, f"abort: {describe(again)}")
        # A new producer of the same id fences this one, and its init_transactions ends
        # what this one left open: committed if the commit had reached the coordinator.
        with contextlib.suppress(KafkaException):
            self.producer.purge()
        self.context.note(self.transactional_id, "replaced by a new producer")
        self.producer = self._new()
        return Outcome.UNKNOWN if commit_asked else Outcome.ABORTED

    def _retrying(self, call: Callable[[float], None], what: str) -> None:
        """`call(timeout)`, again while it raises a retriable error (not fatal, not one
        that requires an abort), for up to RETRY_FOR_S."""
        deadline = time.monotonic() + RETRY_FOR_S
        while True:
            try:
                call(OP_TIMEOUT_S)
                return
            except KafkaException as failure:
                error = failure.args[0]
                if (
                    not isinstance(error, KafkaError)
                    or not error.retriable()
                    or error.fatal()
                    or error.txn_requires_abort()
                    or time.monotonic() >= deadline
                ):
                    raise
                self.context.note(self.transactional_id, f"{what} retried: {error.str()}")
                time.sleep(RETRY_BACKOFF_S)

    def _sent(self, error: KafkaError | None, message: Message) -> None:
        # a failed delivery fails the commit (abortable); what an abort purged is no news
        if error is not None and error.code() not in PURGED:
            self.context.note(self.transactional_id, f"not delivered: {error.str()}")


class InputProducer(Client):
    """Transactions to `in`, paced, until its count or `stop_at` (`config.seconds`)."""

    def __init__(self, index: int, context: Context) -> None:
        super().__init__(f"txn-input-{index}", context)
        self.stop_at = self.config.seconds
        self.txns: list[Txn] = []

    def work(self) -> None:
        config, tid = self.config, self.name
        producer = TransactionalProducer(tid, self.context)
        next_at = time.monotonic()
        for sequence in range(config.transactions_per_producer):
            time.sleep(max(0.0, next_at - time.monotonic()))  # pacing, not waiting
            if self.clock.now() >= self.stop_at:
                break
            next_at += 1 / config.transactions_per_second
            records = tuple(
                Record(self.rng.randrange(config.partitions), input_value(tid, sequence, i))
                for i in range(self.rng.randint(*config.records_per_transaction))
            )
            abort = self.rng.random() < config.abort_ratio
            outcome = Outcome.UNKNOWN  # if it raises: not even a new producer could be made
            try:
                outcome = producer.transaction(config.in_topic, records, abort=abort)
            finally:
                self.txns.append(Txn(tid, sequence, config.in_topic, records, outcome))


class TransformWorker(Client):
    """Consume-transform-produce from `in` to the same partition of `out`, a transaction
    per polled batch, until `stop_at`. After an abort the consumer seeks back to the batch's
    first offsets (a later transaction takes its records); after an unknown outcome it is
    replaced, to go on from the group's committed offsets whichever way it went."""

    def __init__(self, index: int, context: Context) -> None:
        super().__init__(f"txn-transform-{index}", context)
        self.transforms: list[Transform] = []

    def work(self) -> None:
        config, tid = self.config, self.name
        producer = TransactionalProducer(tid, self.context)
        consumer = self._new_consumer()
        try:
            for sequence in itertools.count():
                consumed: tuple[Consumed, ...] = ()
                while not consumed and self.clock.now() < self.stop_at:
                    consumed = self._poll(consumer)
                if not consumed:
                    return
                records = tuple(
                    Record(c.partition, output_value(c.value, tid, sequence)) for c in consumed
                )
                offsets = {c.partition: c.offset + 1 for c in consumed}  # the last one's
                positions = [TopicPartition(config.in_topic, p, o) for p, o in offsets.items()]
                abort = self.rng.random() < config.transform_abort_ratio
                outcome = Outcome.UNKNOWN
                try:
                    metadata = consumer.consumer_group_metadata()
                    outcome = producer.transaction(
                        config.out_topic, records, abort=abort, offsets=(positions, metadata)
                    )
                finally:
                    txn = Txn(tid, sequence, config.out_topic, records, outcome)
                    self.transforms.append(Transform(txn, consumed, tuple(sorted(offsets.items()))))
                if outcome is Outcome.ABORTED:
                    consumer = self._rewind(consumer, consumed)
                elif outcome is Outcome.UNKNOWN:
                    consumer = self._replace(consumer)
        finally:
            consumer.close()

    def _new_consumer(self) -> Consumer:
        settings = {"group.id": self.config.group, "auto.offset.reset": "earliest"}
        consumer = self.context.consumer(self.name, settings)
        consumer.subscribe([self.config.in_topic])
        return consumer

    def _poll(self, consumer: Consumer) -> tuple[Consumed, ...]:
        consumed = []
        for message in consumer.consume(self.config.batch, POLL_S):
            error = message.error()
            if error is not None:
                self.context.note(self.name, f"consumer: {error.str()}")
                continue
            consumed.append(Consumed(*placed(message)))
        return tuple(consumed)

    def _rewind(self, consumer: Consumer, consumed: tuple[Consumed, ...]) -> Consumer:
        starts: dict[int, int] = {}
        for c in consumed:
            starts.setdefault(c.partition, c.offset)
        try:
            for partition, offset in starts.items():
                consumer.seek(TopicPartition(self.config.in_topic, partition, offset))
        except KafkaException as failure:
            self.context.note(self.name, f"seek back: {describe(failure)}")
            return self._replace(consumer)
        return consumer

    def _replace(self, consumer: Consumer) -> Consumer:
        consumer.close()
        self.context.note(self.name, "consumer replaced")
        return self._new_consumer()


class TailReader(Client):
    """Reads every partition of one topic from the start, until `stop_at`."""

    def __init__(self, topic: str, index: int, context: Context) -> None:
        super().__init__(f"tail-{topic}-{index}", context)
        self.topic = topic
        self.records: dict[int, list[tuple[int, str]]] = {
            p: [] for p in range(self.config.partitions)
        }
        self.positions: dict[int, int] = {}

    def work(self) -> None:
        # no offset reset: one would hide a regression (`error` reports it instead)
        consumer = self.context.consumer(self.name, {"auto.offset.reset": "error"})
        consumer.assign([TopicPartition(self.topic, p, LOG_START) for p in self.records])
        try:
            while self.clock.now() < self.stop_at:
                message = consumer.poll(POLL_S)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    self.context.note(self.name, error.str())
                    continue
                partition, offset, value = placed(message)
                self.records[partition].append((offset, value))
            # where it stopped: past what it read, and past what read_committed hides
            self.positions = {
                tp.partition: max(0, tp.offset) for tp in consumer.position(consumer.assignment())
            }
        finally:
            consumer.close()

    def read(self) -> Read:
        records = {p: list(values) for p, values in self.records.items()}
        return Read(self.name, self.topic, records, dict(self.positions))

    def caught_up(self, final: Read) -> bool:
        return all(len(self.records[p]) >= len(values) for p, values in final.records.items())


class LsoWatcher(Client):
    """Samples the LSO of every partition of both topics, until `stop_at`."""

    def __init__(self, context: Context) -> None:
        super().__init__("lso-watcher", context)
        self.samples: list[LsoSample] = []

    def work(self) -> None:
        admin = admin_client(self.context.bootstrap)
        topics = (self.config.in_topic, self.config.out_topic)
        next_at = time.monotonic()
        while self.clock.now() < self.stop_at:
            time.sleep(max(0.0, next_at - time.monotonic()))  # pacing, not waiting
            next_at += self.config.lso_every_s
            for topic in topics:
                try:
                    lsos = end_offsets(admin, topic, self.config.partitions, committed=True)
                except KafkaException:  # a fault: no sample this time
                    continue
                at = self.clock.now()
                # librdkafka's OFFSET_INVALID (-1001) is no sample: the partition's leader
                # was not known at that moment (a fault)
                self.samples.extend(
                    LsoSample(self.name, topic, p, at, lso)
                    for p, lso in sorted(lsos.items())
                    if lso >= 0
                )


def placed(message: Message) -> tuple[int, int, str]:
    """A consumed message's partition, offset and value."""
    value = (message.value() or b"").decode()
    return int(message.partition() or 0), int(message.offset() or 0), value


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": CLIENT_LOG_LEVEL})


def end_offsets(
    admin: AdminClient, topic: str, partitions: int, *, committed: bool
) -> dict[int, int]:
    """ListOffsets latest: the LSO (read_committed) or the high watermark."""
    isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # unannotated upstream
    futures = admin.list_offsets(
        {TopicPartition(topic, p): latest for p in range(partitions)},
        isolation_level=isolation,
        request_timeout=REQUEST_TIMEOUT_S,
    )
    return {tp.partition: int(future.result().offset) for tp, future in futures.items()}


def open_transactions(admin: AdminClient, topic: str, partitions: int) -> str | None:
    """Partitions whose LSO is below the high watermark (a transaction open), or None."""
    try:
        lsos = end_offsets(admin, topic, partitions, committed=True)
        highs = end_offsets(admin, topic, partitions, committed=False)
    except KafkaException as failure:
        return f"{topic}: ListOffsets failed: {describe(failure)}"
    open_ones = {p: (lsos[p], highs[p]) for p in lsos if lsos[p] < highs[p]}
    return f"{topic}: (LSO, high watermark) {open_ones}" if open_ones else None


def full_read(context: Context, admin: AdminClient, topic: str) -> Read:
    """Every partition from the start to its LSO (no transaction open: the end)."""
    name, partitions = f"final-{topic}", range(context.config.partitions)
    ends = end_offsets(admin, topic, len(partitions), committed=True)
    consumer = context.consumer(name, {"enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, LOG_START) for p in partitions])
    records: dict[int, list[tuple[int, str]]] = {p: [] for p in partitions}
    positions = {p: 0 for p in partitions}
    deadline = time.monotonic() + context.config.settle_s
    try:
        while any(positions[p] < ends[p] for p in partitions):
            if time.monotonic() > deadline:
                raise AssertionError(f"reading {topic}: at {positions} of {ends} on the deadline")
            message = consumer.poll(POLL_S)
            if message is None:
                continue
            (partition, offset, value), error = placed(message), message.error()
            if error is None:
                records[partition].append((offset, value))
                positions[partition] = offset + 1
            elif error.code() == KafkaError._PARTITION_EOF:  # at the end, past any markers
                positions[partition] = max(positions[partition], offset)
            else:
                raise AssertionError(f"reading {topic}: {error.str()}")
    finally:
        consumer.close()
    return Read(name, topic, records, positions, final=True)


def create_topics(
    bootstrap: str, config: TxnWorkloadConfig, replicas: int, configs: Mapping[str, str] = {}
) -> None:
    topics = [
        NewTopic(name, config.partitions, replicas, config=dict(configs))
        for name in (config.in_topic, config.out_topic)
    ]
    admin = admin_client(bootstrap)  # alive until the answers come
    for future in admin.create_topics(topics, operation_timeout=30).values():
        future.result(60)


@dataclasses.dataclass
class TxnRun:
    history: History
    seconds: float  # from the clients' start to the last final read
    notes: list[str]  # what the clients ran into
    failures: list[str]  # clients that died, or did not end in time


class TxnWorkload:
    def __init__(self, bootstrap: str, config: TxnWorkloadConfig, clock: Clock) -> None:
        self.config = config
        self.context = Context(bootstrap, config, clock)
        self.admin = admin_client(bootstrap)
        self._commit_log_starts()
        self.producers = [InputProducer(i, self.context) for i in range(config.producers)]
        self.workers = [TransformWorker(i, self.context) for i in range(config.workers)]
        self.readers = [
            TailReader(topic, i, self.context)
            for topic in (config.in_topic, config.out_topic)
            for i in range(config.readers_per_topic)
        ]
        self.watcher = LsoWatcher(self.context)
        self.failures: list[str] = []

    def _commit_log_starts(self) -> None:
        """The group's offsets at LOG_START before any fault, so that the workers never
        start from auto.offset.reset (see LOG_START)."""
        config = self.config
        consumer = self.context.consumer("group-start", {"group.id": config.group})
        try:
            starts = [
                TopicPartition(config.in_topic, p, LOG_START) for p in range(config.partitions)
            ]
            consumer.commit(offsets=starts, asynchronous=False)
        finally:
            consumer.close()

    def run(self, before_settling: Callable[[], None] = lambda: None) -> TxnRun:
        """Everything, bounded: the producers' transactions while the workers transform
        them and the readers tail both topics; `before_settling()` (the nemesis's end);
        then the settling (`_settle`)."""
        started = time.monotonic()
        clients: list[Client] = [self.watcher, *self.readers, *self.workers, *self.producers]
        for client in clients:
            client.start()
        try:
            self._join(self.producers, self.config.seconds + 4 * RETRY_FOR_S)
            before_settling()
            final_in, final_out, group_offsets = self._settle()
        finally:
            self._stop(clients, 30)
        history = History(
            inputs=[txn for producer in self.producers for txn in producer.txns],
            transforms=[t for worker in self.workers for t in worker.transforms],
            reads=[*(reader.read() for reader in self.readers), final_in, final_out],
            group_offsets=group_offsets,
            lso_samples=self.watcher.samples,
            in_topic=self.config.in_topic,
            out_topic=self.config.out_topic,
        )
        return TxnRun(history, time.monotonic() - started, self.context.notes, self.failures)

    def _settle(self) -> tuple[Read, Read, dict[int, int]]:
        """Every input transaction decided and `in` read in full; every visible input
        transformed (the workers then stop); `out` decided and read in full; the group's
        offsets; and the tailing readers given time to read as much as the final reads."""
        config = self.config
        final_in = self._settled_read(config.in_topic)
        offsets = self.context.consumer("offsets", {"group.id": config.group})
        try:
            self._wait(
                lambda: self._transformed(offsets, final_in),
                lambda: (
                    "the group's committed offsets past every visible input record: "
                    f"committed {self._committed(offsets)}, last visible "
                    f"{ {p: r[-1][0] for p, r in final_in.records.items() if r} }"
                ),
            )
            self._stop(self.workers, 2 * RETRY_FOR_S)
            final_out = self._settled_read(config.out_topic)
            group_offsets = wait_until(
                lambda: self._committed(offsets), config.settle_s, "the group's offsets"
            )
        finally:
            offsets.close()
        finals = {final_in.topic: final_in, final_out.topic: final_out}
        self._wait(
            lambda: all(reader.caught_up(finals[reader.topic]) for reader in self.readers),
            lambda: "the tailing readers read as much as the final reads: behind "
            + "; ".join(
                f"{reader.name} {reader.topic}-{p} {len(reader.records[p])}/{len(values)}"
                for reader in self.readers
                for p, values in finals[reader.topic].records.items()
                if len(reader.records[p]) < len(values)
            ),
            fail=False,
        )
        assert group_offsets is not None  # wait_until returns something true
        return final_in, final_out, group_offsets

    def _join(self, clients: Sequence[Client], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for client in clients:
            client.join(max(0.0, deadline - time.monotonic()))
            if client.is_alive():
                self.failures.append(f"{client.name} did not end within {timeout:.0f}s")
            elif client.error is not None:
                self.failures.append(f"{client.name}: {describe(client.error)}")
                client.error = None  # reported once

    def _stop(self, clients: Sequence[Client], timeout: float) -> None:
        for client in clients:
            client.stop_at = 0.0
        self._join([client for client in clients if client.is_alive() or client.error], timeout)

    def _wait(
        self, condition: Callable[[], object], what: str | Callable[[], str], *, fail: bool = True
    ) -> None:
        """Wait with the settling deadline; past it, a failure of the run (the history is
        still read and judged) or, if not `fail`, a note."""
        timeout = self.config.settle_s + self.config.transaction_timeout_ms / 1000
        try:
            wait_until(condition, timeout, what)
        except AssertionError as error:
            if fail:
                self.failures.append(str(error))
            else:
                self.context.note("run", str(error))

    def _settled_read(self, topic: str) -> Read:
        """The full read of a topic once no transaction is open in it (one a dead client
        left open ends by the coordinator's transaction timeout; one that never ends is a
        failure, and the read goes up to the LSO)."""
        partitions = self.config.partitions
        self._wait(
            lambda: open_transactions(self.admin, topic, partitions) is None,
            lambda: f"no open transaction: {open_transactions(self.admin, topic, partitions)}",
        )
        return full_read(self.context, self.admin, topic)

    def _committed(self, consumer: Consumer) -> dict[int, int] | None:
        """The group's committed offsets on `in` (negative: none), None if the coordinator
        did not answer (it is moving: ask again). read_committed: librdkafka asks for
        stable offsets (KIP-447), so none is pending in a transaction."""
        partitions = [
            TopicPartition(self.config.in_topic, p) for p in range(self.config.partitions)
        ]
        try:
            answer = consumer.committed(partitions, REQUEST_TIMEOUT_S)
        except KafkaException:
            return None
        return {tp.partition: tp.offset for tp in answer}

    def _transformed(self, consumer: Consumer, final_in: Read) -> bool:
        committed = self._committed(consumer)
        return committed is not None and all(
            committed.get(p, -1) > records[-1][0]
            for p, records in final_in.records.items()
            if records
        )
