"""Acknowledged records survive SIGKILL: a producer (librdkafka, acks=1) writes numbered
records while the broker is killed and restarted on the same data directory again and again.

Afterwards, read from the beginning with CRC checks: every acknowledged record is at its
acknowledged offset, offsets are contiguous from 0 in every partition, every batch passes
its CRC, and nothing in the log is something the producer did not send. Records that were
in flight at a kill may be missing or duplicated (acks=1, retries, no idempotence): only
acknowledged ones are promised.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import AdminClient, NewTopic
from strom_process import StromProcess

KILLS = 20
PARTITIONS = 3
PRODUCE_WINDOW_S = 0.5  # producing time between two kills, at least...
ACKS_PER_ROUND = 200  # ...and until this many records of the round are acknowledged
ROUND_DEADLINE_S = 30.0
RECORDS_PER_TICK = 20  # records handed to librdkafka per 5 ms tick (~4000/s)


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=30)[topic].result(60)


class NumberedProducer:
    """Sends value=key=str(seq) for seq = 0, 1, 2, ... and remembers the acknowledgements."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": "e2e-crash-producer",
                "acks": 1,
                "enable.idempotence": False,
                "linger.ms": 2,
                "message.timeout.ms": 30_000,
                "retries": 1_000_000,
                "retry.backoff.ms": 50,
                "retry.backoff.max.ms": 500,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "socket.connection.setup.timeout.ms": 5_000,
            }
        )
        self.sent = 0
        self.round = 0
        self.acked: dict[int, tuple[int, int]] = {}
        self.acked_in_round: Counter[int] = Counter()
        self.failed: dict[int, KafkaError] = {}

    def _report(self, err: KafkaError | None, msg: Message) -> None:
        seq = int(msg.value())
        if err is not None:
            self.failed[seq] = err
        else:
            assert seq not in self.acked, f"record {seq} acknowledged twice"
            self.acked[seq] = (msg.partition(), msg.offset())
            self.acked_in_round[self.round] += 1

    def produce_round(self) -> None:
        """Produce for the window and until the round has acknowledgements, so every kill
        lands on a producer that is connected and writing, however slow the restart was."""
        started = time.monotonic()
        while (
            time.monotonic() - started < PRODUCE_WINDOW_S
            or self.acked_in_round[self.round] < ACKS_PER_ROUND
        ):
            assert time.monotonic() - started < ROUND_DEADLINE_S, (
                f"round {self.round}: only {self.acked_in_round[self.round]} acknowledgements "
                f"in {ROUND_DEADLINE_S}s"
            )
            self.produce_for(0.05)

    def produce_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for _ in range(RECORDS_PER_TICK):
                data = str(self.sent).encode()
                try:
                    self.producer.produce(
                        self.topic, key=data, value=data, on_delivery=self._report
                    )
                except BufferError:  # local queue full while the broker is away: back off
                    break
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.005)

    def flush(self, timeout: float) -> int:
        return int(self.producer.flush(timeout))


def read_all(bootstrap: str, topic: str, timeout: float = 90.0) -> dict[tuple[int, int], bytes]:
    """Every record of the topic by (partition, offset), read up to the high watermarks."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "e2e-crash-verifier",
            "group.id": "e2e-unused",  # required by librdkafka; unused with assign()
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "check.crcs": True,
        }
    )
    try:
        highs = {}
        for p in range(PARTITIONS):
            low, high = consumer.get_watermark_offsets(TP(topic, p), timeout=10, cached=False)
            assert low == 0, f"partition {p}: log start offset {low}, expected 0"
            highs[p] = high
        consumer.assign([TP(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        records: dict[tuple[int, int], bytes] = {}
        next_offset = dict.fromkeys(range(PARTITIONS), 0)
        deadline = time.monotonic() + timeout
        while any(next_offset[p] < highs[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, (
                f"read only up to {next_offset} of high watermarks {highs} within {timeout}s"
            )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, f"consumer error (CRC or corrupt batch?): {msg.error()}"
            p, offset = msg.partition(), msg.offset()
            assert offset == next_offset[p], (
                f"partition {p}: got offset {offset}, expected {next_offset[p]} (gap or repeat)"
            )
            assert msg.key() == msg.value(), f"({p}, {offset}): key {msg.key()!r} != value"
            records[(p, offset)] = msg.value()
            next_offset[p] = offset + 1
        return records
    finally:
        consumer.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_acknowledged_records_survive_sigkill(
    strom_factory: Callable[..., StromProcess], topic: str
) -> None:
    broker = strom_factory()
    broker.start()
    create_topic(broker.bootstrap, topic)
    producer = NumberedProducer(broker.bootstrap, topic)

    for round_ in range(KILLS):
        producer.round = round_
        producer.produce_round()
        broker.kill()
        producer.producer.poll(0.05)
        broker.start()
    producer.round = KILLS
    producer.produce_round()
    left = producer.flush(60)
    assert left == 0, f"{left} records neither acknowledged nor failed after flush"

    # The workload really ran across the kills (produce_round waited for acknowledgements).
    assert all(producer.acked_in_round[r] >= ACKS_PER_ROUND for r in range(KILLS + 1))
    assert broker.starts == KILLS + 1

    # One more restart, graceful this time (must exit 0), then read everything back.
    broker.restart(graceful=True)
    records = read_all(broker.bootstrap, topic)

    lost = []
    for seq, position in sorted(producer.acked.items()):
        got = records.get(position)
        if got != str(seq).encode():
            lost.append(f"record {seq} acknowledged at {position}, log has {got!r}")
    assert not lost, f"{len(lost)} acknowledged records lost or overwritten:\n" + "\n".join(
        lost[:20]
    )
    strangers = [v for v in records.values() if not v.isdigit() or int(v) >= producer.sent]
    assert not strangers, f"records nobody sent: {strangers[:10]}"
    print(
        f"sent {producer.sent}, acknowledged {len(producer.acked)}, "
        f"failed {len(producer.failed)}, in log {len(records)} over {KILLS} kills"
    )
