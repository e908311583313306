"""``strom-spark-demo``: sample events for the Spark pipelines, produced to a topic.

``strom-spark-demo page-views --bootstrap-server localhost:9092 --topic page-views
--rate 200 --duration-s 60`` sends page views as they happen (paced by the wall clock,
event times from now on); ``--count N --no-pacing`` sends N at once (event times still
spaced by the rate, so windows fill as they would have); ``--seed`` and ``--start-ms``
make the stream reproducible. Records go with acks=all and idempotence, keyed by user.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from strom_spark import events, extras


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
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    extras.require("strom-spark-demo", "confluent_kafka", "the Kafka client library", "client")
    args = _parser().parse_args(argv)
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
    sent = _produce(
        args.bootstrap_server, args.topic, args.seed, count, start_ms, traffic, not args.no_pacing
    )
    print(f"sent {sent} page views to {args.topic} (seed {args.seed}, from {start_ms} ms)")


def _produce(
    bootstrap: str,
    topic: str,
    seed: int,
    count: int,
    start_ms: int,
    traffic: events.Traffic,
    pacing: bool,
) -> int:
    from confluent_kafka import KafkaError, Message, Producer

    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 20}
    )
    started = time.monotonic()
    clock_ms = start_ms
    for view in events.page_views(seed, count, start_ms, traffic):
        clock_ms = max(clock_ms, view.ts)
        if pacing:
            # send each event when the stream's clock reaches it (late ones carry older times)
            ahead_s = (clock_ms - start_ms) / 1000 - (time.monotonic() - started)
            if ahead_s > 0:
                producer.poll(ahead_s)
        while True:
            try:
                producer.produce(topic, view.to_json(), view.key(), on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(60) or failures:
        sys.exit(f"strom-spark-demo: not every event was acknowledged: {failures[:3]}")
    return count
