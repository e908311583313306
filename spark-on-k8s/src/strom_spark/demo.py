"""``strom-spark-demo``: sample events for the Spark pipelines, produced to a topic.

``strom-spark-demo page-views --bootstrap-server localhost:9092 --topic page-views
--rate 200 --duration-s 60`` sends page views as they happen (paced by the wall clock,
event times from now on); ``--count N --no-pacing`` sends N at once (event times still
spaced by the rate, so windows fill as they would have); ``--seed`` and ``--start-ms``
make the stream reproducible.

``strom-spark-demo profiles --bootstrap-server localhost:9092 --users 1000
--updates 0.1 --tombstones 0.05`` sends the user profiles the enrich pipeline joins
with (a compacted topic read as a table): one per user, then changed plans, then
deletions (tombstones: a key with no value).

Records go with acks=all and idempotence, keyed by user.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from strom_spark import events, extras, profiles


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="strom-spark-demo",
        description="Sample events for the Spark pipelines, produced to a topic.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    views = commands.add_parser("page-views", help="page views (key: user id; JSON value)")
    views.add_argument("--bootstrap-server", required=True)
    views.add_argument("--topic", default="page-views")
    amount = views.add_mutually_exclusive_group(required=True)
    amount.add_argument("--count", type=int, help="this many events")
    amount.add_argument("--duration-s", type=float, help="events for this long at --rate")
    views.add_argument("--rate", type=float, default=100.0, help="events per second")
    views.add_argument("--seed", type=int, default=1)
    views.add_argument("--start-ms", type=int, help="the first event time (default: now)")
    views.add_argument("--users", type=int, default=1000)
    views.add_argument("--pages", type=int, default=50)
    views.add_argument("--skew", type=float, default=1.1, help="page popularity 1/rank^skew")
    views.add_argument("--late-fraction", type=float, default=0.0)
    views.add_argument("--min-lateness-s", type=float, default=0.0)
    views.add_argument("--max-lateness-s", type=float, default=0.0)
    views.add_argument("--no-pacing", action="store_true", help="send at once, not in real time")
    users = commands.add_parser(
        "profiles", help="user profiles (key: user id; JSON value, or none when deleted)"
    )
    users.add_argument("--bootstrap-server", required=True)
    users.add_argument("--topic", default="user-profiles")
    users.add_argument("--users", type=int, default=1000, help="a profile for each of them")
    users.add_argument("--seed", type=int, default=1)
    users.add_argument("--updates", type=float, default=0.0, help="fraction given a new plan")
    users.add_argument("--tombstones", type=float, default=0.0, help="fraction then deleted")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    extras.require("strom-spark-demo", "confluent_kafka", "the Kafka client library", "client")
    args = _parser().parse_args(argv)
    if args.command == "profiles":
        _send_profiles(args)
    else:
        _send_page_views(args)


def _send_page_views(args: argparse.Namespace) -> None:
    try:
        traffic = events.Traffic(
            events_per_second=args.rate,
            users=args.users,
            pages=args.pages,
            skew=args.skew,
            late_fraction=args.late_fraction,
            lateness_ms=(int(args.min_lateness_s * 1000), int(args.max_lateness_s * 1000)),
        )
    except ValueError as exc:
        sys.exit(f"strom-spark-demo: {exc}")
    count = args.count if args.count is not None else int(args.duration_s * args.rate)
    start_ms = args.start_ms if args.start_ms is not None else int(time.time() * 1000)
    views = events.page_views(args.seed, count, start_ms, traffic)
    sent = _produce(args.bootstrap_server, args.topic, _timed(views, start_ms, not args.no_pacing))
    print(f"sent {sent} page views to {args.topic} (seed {args.seed}, from {start_ms} ms)")


def _send_profiles(args: argparse.Namespace) -> None:
    try:
        changes = list(
            profiles.profile_changes(args.seed, args.users, args.updates, args.tombstones)
        )
    except ValueError as exc:
        sys.exit(f"strom-spark-demo: {exc}")
    sent = _produce(
        args.bootstrap_server,
        args.topic,
        (_Record(change.key(), change.value()) for change in changes),
    )
    deleted = sum(change.profile is None for change in changes)
    print(
        f"sent {sent} profile records to {args.topic} ({args.users} users, {deleted} deleted; "
        f"seed {args.seed})"
    )


class _Record(NamedTuple):
    key: bytes
    value: bytes | None  # None: a tombstone
    # when to send it, in seconds after the first record (0: at once)
    due_s: float = 0.0


def _timed(views: Iterable[events.PageView], start_ms: int, pacing: bool) -> Iterator[_Record]:
    """Each view due when the stream's clock reaches it (late ones carry older times, so
    the clock is the largest event time so far), or all at once without pacing."""
    clock_ms = start_ms
    for view in views:
        clock_ms = max(clock_ms, view.ts)
        due_s = (clock_ms - start_ms) / 1000 if pacing else 0.0
        yield _Record(view.key(), view.to_json(), due_s)


def _produce(bootstrap: str, topic: str, records: Iterable[_Record]) -> int:
    from confluent_kafka import KafkaError, Message, Producer

    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 20}
    )
    started = time.monotonic()
    sent = 0
    for record in records:
        ahead_s = record.due_s - (time.monotonic() - started)
        if ahead_s > 0:
            producer.poll(ahead_s)
        while True:
            try:
                producer.produce(topic, record.value, record.key, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        sent += 1
    if producer.flush(60) or failures:
        sys.exit(f"strom-spark-demo: not every record was acknowledged: {failures[:3]}")
    return sent
