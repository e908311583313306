"""The chaos test's clients: two idempotent acks=all producers of sequence-numbered values
(confluent-kafka here, the Java client in its own process), a consumer group that commits
as it goes, and the reads of the whole topic and of the group's offsets after the run.

Every client runs until a deadline and records what it was told (chaos_checker's Ack and
Commit) with the time it learned it. Values are "NAME-SEQUENCE", unique in the run, and
go to partition SEQUENCE % PARTITIONS.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chaos_checker import UNKNOWN_OFFSET, Ack, Commit
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

DELIVERY_TIMEOUT_MS = 30_000
# librdkafka logs every refused connection to stderr: only its critical lines here (the
# run's own report says what happened)
CLIENT_LOG_LEVEL = 2
# How long a client may take to wind down after its deadline: the deliveries in flight
# time out by then.
DRAIN_S = DELIVERY_TIMEOUT_MS / 1000 + 15
COMMIT_EVERY_S = 1.0
FINAL_COMMIT_S = 10.0


def sequence_value(name: str, sequence: int) -> str:
    """The same shape as PeerSequenceProducer.java's values."""
    return f"{name}-{sequence:09d}"


class Clock:
    """Seconds since the run started: the one time line of acks, commits and faults."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def reset(self) -> None:
        self.started = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.started


class PythonProducer(threading.Thread):
    """confluent-kafka (librdkafka), enable.idempotence=true, acks=all."""

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, clock: Clock, *, name: str, rate: float
    ) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.clock, self.producer_name, self.rate = clock, name, rate
        self.stop_at = float("inf")
        self.drain_s = DRAIN_S - 5  # for what is in flight at stop_at
        self.acks: list[Ack] = []
        self.sent = 0
        self.failed: list[str] = []
        self.fatal: list[str] = []  # fatal errors, each ending a producer (a new one follows)
        self.error: BaseException | None = None

    def abort(self) -> None:
        """Stop now, without waiting for what is in flight."""
        self.stop_at = self.drain_s = 0.0

    def config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "client.id": f"strom-chaos-{self.producer_name}",
            "log_level": CLIENT_LOG_LEVEL,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            "request.timeout.ms": 10_000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 5_000,
        }

    def run(self) -> None:
        try:
            self._produce()
        except BaseException as error:  # reported by the test, not lost in a thread
            self.error = error

    def _produce(self) -> None:
        producer = Producer(self.config())
        interval = 1 / self.rate
        next_send = time.monotonic()
        sequence = 0
        while self.clock.now() < self.stop_at:
            try:
                producer.poll(max(0.0, min(next_send - time.monotonic(), 0.1)))
                if time.monotonic() < next_send:
                    continue
                next_send += interval
                value = sequence_value(self.producer_name, sequence)
                partition = sequence % self.partitions
                sequence += 1
                producer.produce(
                    self.topic, value=value.encode(), partition=partition, on_delivery=self._done
                )
                self.sent += 1
            except BufferError as error:  # librdkafka's queue is full: this one is not sent
                self.failed.append(f"{value}: {error}")
            except KafkaException as error:
                if not error.args[0].fatal():
                    raise
                # the idempotent producer gave up (librdkafka raises it from poll and
                # produce): its records in flight fail, a new producer (id) goes on
                self.fatal.append(f"{self.clock.now():.1f}s: {error.args[0].str()}")
                producer.purge()
                producer.flush(1)
                producer = Producer(self.config())
        try:
            left = producer.flush(self.drain_s)
        except (KafkaException, SystemError) as error:
            # A fatal error in the drain (librdkafka's "unable to reconstruct MessageSet"
            # for an idempotent retry, seen once): confluent-kafka raises it from flush, at
            # times as a SystemError out of the delivery callback it was running. The
            # records still in flight are not acknowledged, so the claim is unaffected.
            self.fatal.append(f"{self.clock.now():.1f}s (drain): {error}")
            producer.purge()
            left = 0
        if left:
            self.failed.append(f"{left} records still in flight after the drain")

    def _done(self, error: KafkaError | None, message: Message) -> None:
        value = (message.value() or b"").decode()
        if error is not None:
            self.failed.append(f"{value}: {error}")
            return
        self.acks.append(
            Ack(
                self.producer_name,
                int(message.partition() or 0),
                UNKNOWN_OFFSET if message.offset() is None else int(message.offset()),
                value,
                self.clock.now(),
            )
        )


class JavaProducer:
    """PeerSequenceProducer (the Java client) as a process; its JSON lines read as they come."""

    def __init__(
        self,
        argv_prefix: Sequence[str],
        bootstrap: str,
        topic: str,
        partitions: int,
        clock: Clock,
        *,
        name: str,
        rate: float,
        seconds: float,
        stderr_path: Path,
    ) -> None:
        self.clock, self.producer_name, self.stderr_path = clock, name, stderr_path
        self.argv = [
            *argv_prefix,
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--name",
            name,
            "--partitions",
            str(partitions),
            "--seconds",
            str(seconds),
            "--rate",
            str(rate),
            "--delivery-timeout-ms",
            str(DELIVERY_TIMEOUT_MS),
        ]
        self.acks: list[Ack] = []
        self.failed: list[str] = []
        self.fatal: list[str] = []
        self.sent = 0  # known at the end
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        # stdout is read line by line as the acks come; stderr (the client's log) goes to a
        # file, so that neither pipe fills up and neither has two readers
        with self.stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                self.argv, stdout=subprocess.PIPE, stderr=stderr, text=True
            )
        self._reader = threading.Thread(target=self._read, name="chaos-java-acks", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if "ack" in record:
                self.acks.append(
                    Ack(
                        self.producer_name,
                        record["partition"],
                        record["offset"],
                        record["ack"],
                        self.clock.now(),
                    )
                )
            elif "failed" in record:
                self.failed.append(f"{record['failed']}: {record['error']}")
            elif "fatal" in record:
                self.fatal.append(f"{self.clock.now():.1f}s: {record['fatal']}")
            elif "sent" in record:
                self.sent = int(record["sent"])

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float) -> None:
        """Wait for the process to end on its own; kill it (and fail) past the deadline."""
        assert self.proc is not None and self._reader is not None
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"the Java producer did not end within {timeout:.0f}s of its deadline\n"
                f"{self.stderr_tail()}"
            ) from None
        self._reader.join(10)
        assert self.proc.returncode == 0, (
            f"the Java producer exited with {self.proc.returncode}\n{self.stderr_tail()}"
        )

    def stderr_tail(self, chars: int = 4000) -> str:
        if not self.stderr_path.exists():
            return ""
        return self.stderr_path.read_bytes()[-chars:].decode("utf-8", "replace")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class GroupConsumer(threading.Thread):
    """One member of a consumer group reading the topic and committing its position every
    COMMIT_EVERY_S: one commit at a time (so acknowledgements come in commit order), each
    counted once the coordinator acknowledged it. Asynchronous, so that a commit waiting
    for a coordinator never holds the thread past its deadline."""

    def __init__(self, bootstrap: str, topic: str, group: str, clock: Clock) -> None:
        super().__init__(name="chaos-group", daemon=True)
        self.bootstrap, self.topic, self.group, self.clock = bootstrap, topic, group, clock
        self.stop_at = float("inf")
        self.consumed = 0
        self.commits: list[Commit] = []
        self.failed_commits: list[str] = []
        self.error: BaseException | None = None
        self._committing = False

    def run(self) -> None:
        try:
            self._consume()
        except BaseException as error:
            self.error = error

    def _consume(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "log_level": CLIENT_LOG_LEVEL,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 1_000,
                "on_commit": self._committed,
            }
        )
        consumer.subscribe([self.topic])
        next_commit = time.monotonic() + COMMIT_EVERY_S
        try:
            while self.clock.now() < self.stop_at:
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    self.consumed += 1
                if time.monotonic() >= next_commit:
                    next_commit = time.monotonic() + COMMIT_EVERY_S
                    self._commit(consumer)
            # a last commit of where it stopped, acknowledged within a few seconds or not
            last_call = time.monotonic() + FINAL_COMMIT_S
            while self._committing and time.monotonic() < last_call:
                consumer.poll(0.2)
            self._commit(consumer)
            while self._committing and time.monotonic() < last_call:
                consumer.poll(0.2)
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer) -> None:
        if self._committing:
            return
        positions = [p for p in consumer.position(consumer.assignment()) if p.offset >= 0]
        if not positions:
            return
        try:
            consumer.commit(offsets=positions, asynchronous=True)
        except KafkaException as error:
            self.failed_commits.append(f"{self.clock.now():.1f}s: {error}")
            return
        self._committing = True

    def _committed(self, error: KafkaError | None, offsets: list[TopicPartition]) -> None:
        self._committing = False
        at = self.clock.now()
        if error is not None:
            self.failed_commits.append(f"{at:.1f}s: {error}")
        for committed in offsets:
            if committed.error is None and error is None:
                self.commits.append(Commit(committed.partition, committed.offset, at))


def read_all(
    bootstrap: str, topic: str, partitions: int, acks: Sequence[Ack], timeout: float
) -> dict[int, list[tuple[int, str]]]:
    """Every record of every partition, from the start to the high watermark, read by a
    fresh consumer (no group: assign and read).

    A leader elected just before may not have advanced its high watermark to what was
    committed yet (Kafka's new leader learns it from its followers' next fetches): wait up
    to `timeout` for each high watermark to cover the partition's acknowledged offsets,
    then read whatever it covers (what it never covers is lost)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "strom-chaos-reader",
            "log_level": CLIENT_LOG_LEVEL,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    deadline = time.monotonic() + timeout
    wanted = {p: 0 for p in range(partitions)}
    for ack in acks:
        wanted[ack.partition] = max(wanted[ack.partition], ack.offset + 1)
    try:
        while True:
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                for p in range(partitions)
            }
            if all(ends[p] >= wanted[p] for p in ends) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        deadline = time.monotonic() + timeout
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        records: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        positions = {p: 0 for p in range(partitions)}
        while any(positions[p] < ends[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"reading {topic} took over {timeout:.0f}s: at {positions}, ends {ends}"
                )
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:  # the end (past any gap)
                    partition = int(message.partition() or 0)
                    positions[partition] = max(positions[partition], int(message.offset() or 0))
                    continue
                raise AssertionError(f"reading {topic}: {error}")
            partition, offset = int(message.partition() or 0), int(message.offset() or 0)
            records[partition].append((offset, (message.value() or b"").decode()))
            positions[partition] = offset + 1
        return records
    finally:
        consumer.close()


def committed_offsets(
    bootstrap: str, topic: str, group: str, partitions: int, timeout: float
) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch through a consumer of the group that does
    not join it: -1001 where nothing is committed)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        answer = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=timeout
        )
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in answer}
