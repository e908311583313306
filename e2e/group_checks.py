"""Consumer-group members as real processes, and the checks the group tests make on them.

Every member is its own process so that any of them can die without LeaveGroup (SIGKILL):
the Python clients run this file (`python group_checks.py member --client ...`), the Java
consumer runs e2e/peers/src/PeerGroupConsumer.java. Both speak the same JSON lines on
stdout, each stamped with CLOCK_MONOTONIC nanoseconds ("t": Python's time.monotonic_ns(),
Java's System.nanoTime()), so the events of all members can be put on one timeline:

    {"t": ns, "event": "subscribed"}
    {"t": ns, "event": "assigned"|"revoked"|"lost", "partitions": [..], "owned": [..]}
    {"t": ns, "event": "record", "partition": p, "offset": o, "key": "..", "value": ".."}
    {"t": ns, "event": "committed", "offsets": {"p": next offset, ..}}
    {"t": ns, "event": "commit_failed", "error": ".."}
    {"t": ns, "event": "error", "error": ".."}
    {"t": ns, "event": "closing"}            (Python members; no record is read after it)
    {"t": ns, "event": "closed", "reason": "stdin"|"max-records"|"deadline"}

A member commits the next offsets of what it read synchronously after every poll that
returned records, stops on a line (or EOF) on stdin, after the poll that reached
--max-records, or at --timeout-ms (exit status 3); it closes its consumer (LeaveGroup).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from waiting import wait_until

CLIENTS = ("confluent", "kafka-python", "aiokafka", "java")
SESSION_TIMEOUT_MS = 6000  # Kafka's group.min.session.timeout.ms: the shortest allowed
HEARTBEAT_INTERVAL_MS = 1000
# Broker settings every group test uses (Strom honours Kafka's key).
BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
JAVA_MAIN = "PeerGroupConsumer"
STOP_TIMEOUT_S = 30.0


class Member:
    """One group member process; its events are collected by a reader thread."""

    def __init__(self, name: str, argv: Sequence[str], log_dir: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.events: list[dict[str, Any]] = []
        self.killed_at: int | None = None
        self._lock = threading.Lock()
        self._stderr_path = log_dir / f"member-{name}.stderr.txt"
        with self._stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self._reader = threading.Thread(target=self._read, name=f"member-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"t": time.monotonic_ns(), "event": "garbage", "line": line}
            with self._lock:
                self.events.append(event)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.snapshot() if e["event"] == kind]

    def owned(self) -> frozenset[int] | None:
        """Partitions owned after the latest assignment change (None: never assigned)."""
        changes = [e for e in self.snapshot() if "owned" in e]
        return frozenset(changes[-1]["owned"]) if changes else None

    def records(self) -> list[dict[str, Any]]:
        return self.of("record")

    def committed(self) -> dict[int, int]:
        """The latest offset this member committed per partition."""
        out: dict[int, int] = {}
        for e in self.of("committed"):
            out.update({int(p): o for p, o in e["offsets"].items()})
        return out

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self._stderr_path.read_bytes()[-chars:].decode("utf-8", "replace")
        return ""

    def describe(self) -> str:
        rc = self.proc.poll()
        events = Counter(e["event"] for e in self.snapshot())
        return (
            f"{self.name}: rc={rc} owned={sorted(self.owned() or [])} events={dict(events)}"
            f"\n  stderr: {self.stderr_tail(1500)!r}"
        )

    def request_stop(self) -> None:
        if self.alive and self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.write(b"stop\n")
                self.proc.stdin.flush()
                self.proc.stdin.close()

    def wait_closed(self, timeout: float = STOP_TIMEOUT_S, expect_rc: int = 0) -> None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"member did not stop within {timeout}s\n{self.describe()}"
            ) from None
        self._reader.join(10)
        assert rc == expect_rc, f"member exited with {rc}\n{self.describe()}"
        closed = self.of("closed")
        assert closed, f"member exited without closing its consumer\n{self.describe()}"

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        self.request_stop()
        self.wait_closed(timeout)

    def kill(self) -> None:
        """SIGKILL: the member dies without LeaveGroup and without committing."""
        if self.alive:
            self.killed_at = time.monotonic_ns()
            self.proc.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self._reader.join(10)


class Group:
    """Starts members of one client kind and tears down whatever is left at the end."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        topic: str,
        log_dir: Path,
        java_argv: Callable[..., list[str]] | None = None,
    ) -> None:
        assert client in CLIENTS, client
        self.client = client
        self.bootstrap = bootstrap
        self.topic = topic
        self.log_dir = log_dir
        self.java_argv = java_argv
        self.members: list[Member] = []

    def start(
        self,
        name: str,
        group: str,
        *,
        max_records: int | None = None,
        timeout_ms: int = 150_000,
        commit_metadata: str = "",
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS,
        group_protocol: str = "classic",
    ) -> Member:
        """`group_protocol="consumer"` (Java only): KIP-848's protocol, where the broker
        sets the session timeout and heartbeat interval, so they are not passed."""
        client_id = f"e2e-{self.client}-{name}"
        if self.client == "java":
            assert self.java_argv is not None, "the java client needs the java_peers fixture"
            args = [
                "--bootstrap-server",
                self.bootstrap,
                "--topic",
                self.topic,
                "--group",
                group,
                "--timeout-ms",
                str(timeout_ms),
                "--commit-metadata",
                commit_metadata,
                "--prop",
                f"client.id={client_id}",
                "--prop",
                f"group.protocol={group_protocol}",
            ]
            if group_protocol == "classic":
                args += [
                    "--prop",
                    f"session.timeout.ms={session_timeout_ms}",
                    "--prop",
                    f"heartbeat.interval.ms={heartbeat_interval_ms}",
                ]
            if max_records is not None:
                args += ["--max-records", str(max_records)]
            argv = self.java_argv(JAVA_MAIN, *args)
        else:
            argv = [
                sys.executable,
                str(Path(__file__).resolve()),
                "member",
                "--client",
                self.client,
                "--bootstrap-server",
                self.bootstrap,
                "--topic",
                self.topic,
                "--group",
                group,
                "--client-id",
                client_id,
                "--timeout-ms",
                str(timeout_ms),
                "--commit-metadata",
                commit_metadata,
                "--session-timeout-ms",
                str(session_timeout_ms),
                "--heartbeat-interval-ms",
                str(heartbeat_interval_ms),
            ]
            if max_records is not None:
                argv += ["--max-records", str(max_records)]
        member = Member(name, argv, self.log_dir)
        self.members.append(member)
        return member

    def describe(self) -> str:
        return "\n".join(m.describe() for m in self.members)

    def stop_all(self, members: Iterable[Member] | None = None) -> None:
        """Ask all at once (so nobody waits for a rebalance of the others), then wait."""
        chosen = [m for m in (members if members is not None else self.members) if m.alive]
        for m in chosen:
            m.request_stop()
        for m in chosen:
            m.wait_closed()

    def cleanup(self) -> None:
        for m in self.members:
            m.request_stop()
        for m in self.members:
            try:
                m.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                m.kill()


def wait_balanced(
    members: Sequence[Member],
    partitions: int,
    sizes: Sequence[int],
    timeout: float,
    describe: Callable[[], str],
) -> float:
    """Wait until the members' latest assignments are disjoint, cover every partition and
    have these sizes (in any order). Returns the seconds it took."""

    def balanced() -> bool:
        owned = [m.owned() for m in members]
        if any(o is None for o in owned):
            return False
        sets = [o for o in owned if o is not None]
        union = frozenset().union(*sets)
        return (
            sum(len(s) for s in sets) == len(union)
            and union == frozenset(range(partitions))
            and sorted(len(s) for s in sets) == sorted(sizes)
        )

    start = time.monotonic()
    wait_until(
        balanced,
        timeout,
        lambda: f"assignment sizes {sorted(sizes)} over {partitions}\n" + describe(),
    )
    return time.monotonic() - start


def ownership_intervals(member: Member) -> dict[int, list[tuple[int, int]]]:
    """partition -> [(from, to)] in monotonic ns during which the member owned it.

    Ownership ends at a revoke/lost event, at "closing"/"closed", or at the SIGKILL.
    """
    events = member.snapshot()
    end_of_life = member.killed_at if member.killed_at is not None else 2**63
    open_since: dict[int, int] = {}
    out: dict[int, list[tuple[int, int]]] = {}
    for e in events:
        kind = e["event"]
        if kind == "assigned":
            for p in e["partitions"]:
                open_since.setdefault(p, e["t"])
        elif kind in ("revoked", "lost"):
            for p in e["partitions"]:
                if p in open_since:
                    out.setdefault(p, []).append((open_since.pop(p), e["t"]))
        elif kind in ("closing", "closed"):
            end_of_life = min(end_of_life, e["t"])
    for p, since in open_since.items():
        out.setdefault(p, []).append((since, end_of_life))
    return out


def check_no_shared_reads(members: Sequence[Member]) -> None:
    """No partition was owned by two members at the same time, and every record a member
    read was of a partition it owned at that moment."""
    intervals = {m.name: ownership_intervals(m) for m in members}
    flat = [
        (p, a, b, name)
        for name, by_p in intervals.items()
        for p, ivs in by_p.items()
        for a, b in ivs
    ]
    for i, (p1, a1, b1, n1) in enumerate(flat):
        for p2, a2, b2, n2 in flat[i + 1 :]:
            if p1 == p2 and n1 != n2 and a1 < b2 and a2 < b1:
                raise AssertionError(
                    f"partition {p1} owned by {n1} [{a1}, {b1}) and {n2} [{a2}, {b2}) at once"
                )
    for m in members:
        mine = intervals[m.name]
        for r in m.records():
            ok = any(a <= r["t"] <= b for a, b in mine.get(r["partition"], []))
            assert ok, f"{m.name} read {r} outside its ownership of the partition: {mine}"


def check_exactly_once(members: Sequence[Member], produced: Mapping[tuple[int, int], str]) -> None:
    """Every produced (partition, offset) was read exactly once across the members, with
    the produced value, and nothing else was read."""
    seen: Counter[tuple[int, int]] = Counter()
    values: dict[tuple[int, int], str] = {}
    for m in members:
        for r in m.records():
            key = (r["partition"], r["offset"])
            seen[key] += 1
            values[key] = r["value"]
    missing = sorted(set(produced) - set(seen))
    extra = sorted(set(seen) - set(produced))
    twice = sorted(k for k, n in seen.items() if n > 1)
    assert not missing, f"{len(missing)} records never read, e.g. {missing[:10]}"
    assert not extra, f"read records that were not produced: {extra[:10]}"
    assert not twice, f"{len(twice)} records read more than once, e.g. {twice[:10]}"
    wrong = [k for k, v in produced.items() if values[k] != v]
    assert not wrong, f"records with the wrong value: {wrong[:10]}"


def check_member_errors(members: Sequence[Member]) -> None:
    for m in members:
        bad = [e for e in m.snapshot() if e["event"] in ("error", "commit_failed", "garbage")]
        assert not bad, f"{m.name} reported errors: {bad[:5]}\n{m.describe()}"


def read_count(members: Sequence[Member]) -> int:
    return sum(len(m.records()) for m in members)


def distinct_read(members: Sequence[Member]) -> set[tuple[int, int]]:
    return {(r["partition"], r["offset"]) for m in members for r in m.records()}


# --- broker-side helpers (confluent-kafka, used for setup and independent checks) ---


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic].result(60)


def produce(
    bootstrap: str, topic: str, counts: Sequence[int], tag: str
) -> dict[tuple[int, int], str]:
    """Produce counts[p] records to partition p (acks=all); return {(p, offset): value}."""
    from confluent_kafka import KafkaError, Message, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acked: dict[tuple[int, int], str] = {}
    errors: list[str] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[(msg.partition(), msg.offset())] = msg.value().decode()

    for p, n in enumerate(counts):
        for i in range(n):
            value = f"{tag}-p{p}-{i}"
            producer.produce(
                topic, key=f"k{i}".encode(), value=value.encode(), partition=p, on_delivery=report
            )
    left = producer.flush(60)
    assert left == 0 and not errors, f"produce failed: {left} unsent, errors {errors[:5]}"
    assert len(acked) == sum(counts), f"acknowledged {len(acked)} of {sum(counts)}"
    return acked


def committed_offsets(
    bootstrap: str, group: str, topic: str, partitions: int
) -> dict[int, tuple[int, str | None]]:
    """OffsetFetch of a group, without joining it: {partition: (offset, metadata)}.

    kafka-python's admin client, not confluent-kafka: librdkafka reads committed metadata
    as a C string and returns bytes past its end (librdkafka issue 4649)."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        fetched = admin.list_group_offsets({group: wanted})[group]
    finally:
        admin.close()
    out: dict[int, tuple[int, str | None]] = {p: (-1, None) for p in range(partitions)}
    for tp, committed in fetched.items():
        out[tp.partition] = (committed.offset, committed.metadata)
    return out


def log_end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-watermarks"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


# --- the Python member program ----------------------------------------------------------


class _Emitter:
    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, event: str, **fields: object) -> None:
        line = json.dumps({"t": time.monotonic_ns(), "event": event, **fields})
        with self.lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


emit = _Emitter()


class _Owned:
    def __init__(self) -> None:
        self.partitions: set[int] = set()

    def change(self, event: str, partitions: Iterable[int]) -> None:
        ps = sorted(set(partitions))
        if event == "assigned":
            self.partitions |= set(ps)
        else:
            self.partitions -= set(ps)
        emit(event, partitions=ps, owned=sorted(self.partitions))


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


def _run_confluent(args: argparse.Namespace, stop: threading.Event) -> str:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    owned = _Owned()
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap_server,
            "group.id": args.group,
            "client.id": args.client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": args.heartbeat_interval_ms,
        }
    )
    consumer.subscribe(
        [args.topic],
        on_assign=lambda c, ps: owned.change("assigned", (tp.partition for tp in ps)),
        on_revoke=lambda c, ps: owned.change("revoked", (tp.partition for tp in ps)),
        on_lost=lambda c, ps: owned.change("lost", (tp.partition for tp in ps)),
    )
    emit("subscribed")
    seen = 0
    reason = "deadline"
    deadline = time.monotonic() + args.timeout_ms / 1000
    while time.monotonic() < deadline:
        if stop.is_set():
            reason = "stdin"
            break
        msgs = consumer.consume(num_messages=500, timeout=0.2)
        nxt: dict[int, int] = {}
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    emit("error", error=str(err))
                continue
            emit(
                "record",
                partition=msg.partition(),
                offset=msg.offset(),
                key=_text(msg.key()),
                value=_text(msg.value()),
            )
            nxt[msg.partition()] = msg.offset() + 1
            seen += 1
        if not nxt:
            continue
        offsets = [
            TopicPartition(args.topic, p, o, metadata=args.commit_metadata) for p, o in nxt.items()
        ]
        try:
            result = consumer.commit(offsets=offsets, asynchronous=False)
            failed = [tp for tp in result or [] if tp.error is not None]
            if failed:
                emit("commit_failed", error=str([str(tp.error) for tp in failed]))
                continue
        except KafkaException as e:
            emit("commit_failed", error=str(e))
            continue
        emit("committed", offsets={str(p): o for p, o in sorted(nxt.items())})
        if args.max_records is not None and seen >= args.max_records:
            reason = "max-records"
            break
    emit("closing")
    consumer.close()
    return reason


def _run_kafka_python(args: argparse.Namespace, stop: threading.Event) -> str:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    owned = _Owned()

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
            owned.change("revoked", (tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
            owned.change("assigned", (tp.partition for tp in assigned))

        def on_partitions_lost(self, lost: Iterable[TopicPartition]) -> None:
            owned.change("lost", (tp.partition for tp in lost))

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap_server,
        group_id=args.group,
        client_id=args.client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
    )
    consumer.subscribe([args.topic], listener=Listener())
    emit("subscribed")
    seen = 0
    reason = "deadline"
    deadline = time.monotonic() + args.timeout_ms / 1000
    while time.monotonic() < deadline:
        if stop.is_set():
            reason = "stdin"
            break
        batches = consumer.poll(timeout_ms=200)
        nxt: dict[int, int] = {}
        for tp, records in sorted(batches.items()):
            for r in records:
                emit(
                    "record",
                    partition=tp.partition,
                    offset=r.offset,
                    key=_text(r.key),
                    value=_text(r.value),
                )
                nxt[tp.partition] = r.offset + 1
                seen += 1
        if not nxt:
            continue
        offsets = {
            TopicPartition(args.topic, p): OffsetAndMetadata(o, args.commit_metadata, -1)
            for p, o in nxt.items()
        }
        try:
            consumer.commit(offsets)
        except KafkaError as e:
            emit("commit_failed", error=repr(e))
            continue
        emit("committed", offsets={str(p): o for p, o in sorted(nxt.items())})
        if args.max_records is not None and seen >= args.max_records:
            reason = "max-records"
            break
    emit("closing")
    consumer.close(autocommit=False)
    return reason


async def _run_aiokafka(args: argparse.Namespace, stop: threading.Event) -> str:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.errors import KafkaError

    owned = _Owned()

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
            owned.change("revoked", (tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
            owned.change("assigned", (tp.partition for tp in assigned))

    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap_server,
        group_id=args.group,
        client_id=args.client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
    )
    await consumer.start()
    consumer.subscribe([args.topic], listener=Listener())
    emit("subscribed")
    seen = 0
    reason = "deadline"
    deadline = time.monotonic() + args.timeout_ms / 1000
    while time.monotonic() < deadline:
        if stop.is_set():
            reason = "stdin"
            break
        batches = await consumer.getmany(timeout_ms=200)
        nxt: dict[int, int] = {}
        for tp, records in sorted(batches.items()):
            for r in records:
                emit(
                    "record",
                    partition=tp.partition,
                    offset=r.offset,
                    key=_text(r.key),
                    value=_text(r.value),
                )
                nxt[tp.partition] = r.offset + 1
                seen += 1
        if not nxt:
            continue
        try:
            await consumer.commit(
                {TopicPartition(args.topic, p): (o, args.commit_metadata) for p, o in nxt.items()}
            )
        except KafkaError as e:
            emit("commit_failed", error=repr(e))
            continue
        emit("committed", offsets={str(p): o for p, o in sorted(nxt.items())})
        if args.max_records is not None and seen >= args.max_records:
            reason = "max-records"
            break
    emit("closing")
    await consumer.stop()
    return reason


def member_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="group_checks.py member")
    parser.add_argument("--client", choices=[c for c in CLIENTS if c != "java"], required=True)
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--client-id", default="e2e-group-member")
    parser.add_argument("--max-records", type=int)
    parser.add_argument("--timeout-ms", type=int, default=120_000)
    parser.add_argument("--commit-metadata", default="")
    parser.add_argument("--session-timeout-ms", type=int, default=SESSION_TIMEOUT_MS)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=HEARTBEAT_INTERVAL_MS)
    args = parser.parse_args(argv)

    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.readline()  # a line or EOF
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    if args.client == "confluent":
        reason = _run_confluent(args, stop)
    elif args.client == "kafka-python":
        reason = _run_kafka_python(args, stop)
    else:
        reason = asyncio.run(_run_aiokafka(args, stop))
    emit("closed", reason=reason)
    return 3 if reason == "deadline" else 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["member"]:
        sys.exit("usage: group_checks.py member --client CLIENT ... (see member_main)")
    sys.exit(member_main(sys.argv[2:]))
