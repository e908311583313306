"""The deterministic workload every client test produces, and the checks on what comes back.

Record i of a run: partition i % partitions, key "key-<i>", value
"value-<i>-" + "abcdefghij" * (i % 20) (so batches compress and vary in size), headers
index=<i> and source=<client>, CreateTime timestamp BASE_TIMESTAMP_MS + i * 1000.
e2e/peers/src/PeerProducer.java follows the same recipe: keep the two in step.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

BASE_TIMESTAMP_MS = 1_700_000_000_000
PARTITIONS = 3
COUNT = 300
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclasses.dataclass(frozen=True)
class Record:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


@dataclasses.dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    record: Record


def make_records(source: str, count: int = COUNT, partitions: int = PARTITIONS) -> list[Record]:
    return [
        Record(
            partition=i % partitions,
            key=f"key-{i}".encode(),
            value=(f"value-{i}-" + "abcdefghij" * (i % 20)).encode(),
            headers=(("index", str(i).encode()), ("source", source.encode())),
            timestamp=BASE_TIMESTAMP_MS + i * 1000,
        )
        for i in range(count)
    ]


def headers_of(pairs: Iterable[Sequence[object]] | None) -> tuple[tuple[str, bytes | None], ...]:
    """Normalise a client's headers ([(str, bytes)], [(str, str)], None) to our tuple form."""
    out: list[tuple[str, bytes | None]] = []
    for key, value in pairs or ():
        k = key.decode() if isinstance(key, bytes) else str(key)
        if value is None:
            out.append((k, None))
        elif isinstance(value, str):
            out.append((k, value.encode()))
        else:
            out.append((k, bytes(value)))  # type: ignore[call-overload]
    return tuple(out)


def verify_round_trip(
    sent: Sequence[Record],
    acked: Mapping[int, tuple[int, int]],
    consumed: Sequence[Consumed],
) -> None:
    """Everything sent was acknowledged and comes back intact at the acknowledged offset.

    `acked` maps the index of a sent record to its acknowledged (partition, offset).
    Also: offsets are contiguous from 0 in every partition (a fresh topic), nothing extra.
    """
    missing_acks = [i for i in range(len(sent)) if i not in acked]
    assert not missing_acks, f"records never acknowledged: {missing_acks[:20]}"
    for i, (partition, _) in acked.items():
        assert partition == sent[i].partition, (
            f"record {i} acknowledged on partition {partition}, sent to {sent[i].partition}"
        )

    assert_contiguous(consumed)
    by_position = {(c.partition, c.offset): c.record for c in consumed}
    problems: list[str] = []
    for i, position in sorted(acked.items()):
        got = by_position.get(position)
        if got is None:
            problems.append(f"record {i} acknowledged at {position} but not consumed")
        elif got != sent[i]:
            problems.append(f"record {i} at {position}:\n  sent {sent[i]}\n  got  {got}")
        if len(problems) >= 10:
            break
    assert not problems, "\n".join(problems)
    assert len(consumed) == len(sent), f"consumed {len(consumed)} records, sent {len(sent)}"


def assert_contiguous(consumed: Iterable[Consumed]) -> dict[int, int]:
    """Each partition delivered offsets 0..n-1 in order, each once. Returns {partition: n}."""
    offsets: dict[int, list[int]] = defaultdict(list)
    for c in consumed:
        offsets[c.partition].append(c.offset)
    counts = {}
    for partition, seen in sorted(offsets.items()):
        assert seen == list(range(len(seen))), (
            f"partition {partition}: offsets not delivered as 0, 1, 2, ... "
            f"(first anomaly: {_first_anomaly(seen)}; {len(seen)} records)"
        )
        counts[partition] = len(seen)
    return counts


def _first_anomaly(seen: Sequence[int]) -> str:
    for expected, got in enumerate(seen):
        if got != expected:
            return f"position {expected}: offset {got}"
    return "none"


def read_partition(
    bootstrap: str, topic: str, partition: int = 0, timeout: float = 60.0
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of one partition, from its start to its high
    watermark (librdkafka's partition-EOF event), read with assign() and confluent-kafka."""
    import time

    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "e2e-unused",  # required by librdkafka; unused with assign()
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(f"reading {topic}-{partition}: {error}")
            out.append((msg.offset(), msg.key(), msg.value()))
        raise AssertionError(f"did not reach the end of {topic}-{partition} in {timeout:.0f}s")
    finally:
        consumer.close()
