"""strom-console-consumer: kafka-console-consumer.sh for Strom.

Reads a topic (`--topic`) or every topic matching a regular expression (`--include`, or
`--whitelist` as older tutorials write it) and prints one line per record, formatted as
Kafka's DefaultMessageFormatter does (`--property print.key=true print.timestamp=true
print.partition=true print.offset=true print.headers=true ...`). Without `--group` it joins
a throw-away group `console-consumer-NNNNN` and commits nothing; with `--group` it commits
what it printed. `--partition P --offset O` reads one partition without a group.
Stops after `--max-messages`, after `--timeout-ms` without a record, or on Ctrl-C/SIGTERM,
and then prints "Processed a total of N messages" on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import random
import re
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any, BinaryIO

import confluent_kafka

from strom.cli import options
from strom.client import connection, errors, settings

UsageError = options.UsageError
POLL_SLICE_S = 0.2
BATCH = 500
METADATA_TIMEOUT_S = 30.0  # the topic's metadata before reading one partition of it
TIMESTAMP_TYPES = {
    confluent_kafka.TIMESTAMP_CREATE_TIME: "CreateTime",
    confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime",
}
# Consumer errors that retrying cannot cure: the tool stops with the reason.
_FATAL_CODES = frozenset(
    {
        confluent_kafka.KafkaError.TOPIC_EXCEPTION,
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED,
        confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED,
        confluent_kafka.KafkaError.INVALID_GROUP_ID,
        confluent_kafka.KafkaError._INVALID_ARG,
    }
)
STRING_DESERIALIZERS = (
    "org.apache.kafka.common.serialization.StringDeserializer",
    "org.apache.kafka.common.serialization.ByteArrayDeserializer",
)


def build_parser() -> argparse.ArgumentParser:
    parser = options.parser(
        "strom-console-consumer",
        "This tool helps to read data from Kafka topics and outputs it to standard output "
        "(Kafka's kafka-console-consumer.sh, for Strom).",
    )
    options.add_bootstrap(parser)
    parser.add_argument("--topic", help="The topic to consume from.")
    parser.add_argument(
        "--include",
        "--whitelist",
        dest="include",
        metavar="REGEX",
        help="Regular expression specifying the topics to consume.",
    )
    parser.add_argument("--group", help="The consumer group id of the consumer.")
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="Without a committed offset, start at the earliest record rather than the latest.",
    )
    parser.add_argument("--partition", type=int, help="The partition to consume from.")
    parser.add_argument(
        "--offset",
        help="The offset to start at in --partition: a number, 'earliest' or 'latest' (default).",
    )
    parser.add_argument(
        "--max-messages", type=int, help="Exit after this many records (default: no limit)."
    )
    parser.add_argument("--timeout-ms", type=int, help="Exit when no record arrives for this long.")
    parser.add_argument(
        "--property",
        "--formatter-property",
        dest="formatter_properties",
        action="append",
        type=options.key_value,
        default=[],
        metavar="KEY=VALUE",
        help="Formatter properties: print.timestamp, print.key, print.offset, "
        "print.partition, print.headers, print.value, print.epoch (true|false), "
        "key.separator, line.separator, headers.separator, null.literal.",
    )
    parser.add_argument(
        "--formatter-config", metavar="FILE", help="A properties file of formatter properties."
    )
    parser.add_argument(
        "--consumer-property",
        "--command-property",
        dest="consumer_properties",
        action="append",
        type=options.key_value,
        default=[],
        metavar="KEY=VALUE",
        help="A consumer config (Kafka's property names), e.g. group.id=g (repeatable).",
    )
    options.add_command_config(parser, "--consumer.config", what="consumer")
    parser.add_argument(
        "--isolation-level",
        choices=("read_committed", "read_uncommitted"),
        help="read_committed hides records of aborted transactions (default: read_uncommitted).",
    )
    parser.add_argument(
        "--skip-message-on-error",
        action="store_true",
        help="Skip a record that cannot be printed instead of stopping.",
    )
    parser.add_argument("--key-deserializer", help=argparse.SUPPRESS)
    parser.add_argument("--value-deserializer", help=argparse.SUPPRESS)
    parser.add_argument("--formatter", help=argparse.SUPPRESS)
    return parser


@dataclasses.dataclass(frozen=True)
class FormatOptions:
    """DefaultMessageFormatter's properties."""

    print_timestamp: bool = False
    print_key: bool = False
    print_offset: bool = False
    print_partition: bool = False
    print_headers: bool = False
    print_value: bool = True
    print_epoch: bool = False
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> FormatOptions:
        def flag(name: str, default: bool) -> bool:
            if name not in properties:
                return default
            return properties[name].strip().lower() == "true"

        def text(name: str, default: bytes) -> bytes:
            if name not in properties:
                return default
            return properties[name].encode("utf-8")

        for name in ("key.deserializer", "value.deserializer", "header.deserializer"):
            if name in properties and properties[name] not in STRING_DESERIALIZERS:
                raise UsageError(
                    f"{name}={properties[name]} is not supported (records are printed as they are)"
                )
        return cls(
            print_timestamp=flag("print.timestamp", False),
            print_key=flag("print.key", False),
            print_offset=flag("print.offset", False),
            print_partition=flag("print.partition", False),
            print_headers=flag("print.headers", False),
            print_value=flag("print.value", True),
            print_epoch=flag("print.epoch", False),
            key_separator=text("key.separator", b"\t"),
            line_separator=text("line.separator", b"\n"),
            headers_separator=text("headers.separator", b","),
            null_literal=text("null.literal", b"null"),
        )


@dataclasses.dataclass(frozen=True)
class Printed:
    """What the formatter needs of a record."""

    timestamp_type: str | None  # "CreateTime", "LogAppendTime", or None
    timestamp: int
    partition: int
    offset: int
    leader_epoch: int | None
    headers: tuple[tuple[str, bytes | None], ...]
    key: bytes | None
    value: bytes | None


def format_record(record: Printed, fmt: FormatOptions) -> bytes:
    """One record as DefaultMessageFormatter writes it: the fields asked for, separated by
    key.separator, the last one followed by line.separator."""
    fields: list[bytes] = []
    if fmt.print_timestamp:
        if record.timestamp_type is None:
            fields.append(b"NO_TIMESTAMP")
        else:
            fields.append(f"{record.timestamp_type}:{record.timestamp}".encode())
    if fmt.print_partition:
        fields.append(b"Partition:%d" % record.partition)
    if fmt.print_offset:
        fields.append(b"Offset:%d" % record.offset)
    if fmt.print_epoch:
        epoch = "NOT_PRESENT" if record.leader_epoch is None else str(record.leader_epoch)
        fields.append(f"Epoch:{epoch}".encode())
    if fmt.print_headers:
        if not record.headers:
            fields.append(b"NO_HEADERS")
        else:
            fields.append(
                fmt.headers_separator.join(
                    name.encode() + b":" + (fmt.null_literal if value is None else value)
                    for name, value in record.headers
                )
            )
    if fmt.print_key:
        fields.append(fmt.null_literal if record.key is None else record.key)
    if fmt.print_value:
        fields.append(fmt.null_literal if record.value is None else record.value)
    if not fields:
        return b""
    return fmt.key_separator.join(fields) + fmt.line_separator


def printed(message: Any) -> Printed:
    """A confluent-kafka Message as the formatter's input."""
    kind, timestamp = message.timestamp()
    headers = tuple((name, value) for name, value in (message.headers() or []))
    return Printed(
        timestamp_type=TIMESTAMP_TYPES.get(kind),
        timestamp=int(timestamp),
        partition=int(message.partition()),
        offset=int(message.offset()),
        leader_epoch=message.leader_epoch(),
        headers=headers,
        key=message.key(),
        value=message.value(),
    )


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to read and how: the consumer's properties, and either a subscription
    (topics or a regex) or one partition at an offset."""

    properties: dict[str, str]
    subscription: list[str] | None
    assignment: tuple[str, int, int] | None  # topic, partition, offset (or -2/-1)
    max_messages: int | None
    timeout_ms: int | None


def plan(args: argparse.Namespace) -> Plan:
    """Check the command line as ConsoleConsumerOptions does, and decide what to read."""
    if bool(args.topic) == bool(args.include):
        raise UsageError("Exactly one of --include/--topic is required.")
    if args.partition is not None and not args.topic:
        raise UsageError("The topic is required when partition is specified.")
    if args.offset is not None and args.partition is None:
        raise UsageError("The partition is required when offset is specified.")
    if args.offset is not None and args.from_beginning:
        raise UsageError("Options from-beginning and offset cannot be specified together.")
    if args.group and args.partition is not None:
        raise UsageError("Options group and partition cannot be specified together.")
    for name in ("key_deserializer", "value_deserializer"):
        value = getattr(args, name)
        if value and value not in STRING_DESERIALIZERS:
            raise UsageError(f"--{name.replace('_', '-')} {value} is not supported")
    if args.formatter and not args.formatter.endswith("DefaultMessageFormatter"):
        raise UsageError(f"--formatter {args.formatter} is not supported")
    if args.max_messages is not None and args.max_messages < 0:
        raise UsageError("--max-messages must not be negative")

    props = options.merged(args.command_config, args.consumer_properties)
    group_ids = {g for g in (args.group, props.get("group.id")) if g}
    if len(group_ids) > 1:
        raise UsageError(
            "The group ids provided in different places (directly using '--group', via "
            "'--consumer-property', or via '--consumer.config') do not match. Detected group "
            f"ids: {', '.join(sorted(repr(g) for g in group_ids))}"
        )
    group_given = bool(group_ids)
    if args.group:
        props["group.id"] = args.group
    if not group_given:
        props["group.id"] = f"console-consumer-{random.randrange(100_000)}"
        props.setdefault("enable.auto.commit", "false")  # nobody will use this group again
    reset = "earliest" if args.from_beginning else "latest"
    if args.from_beginning and props.get("auto.offset.reset", reset) != reset:
        raise UsageError(
            f"Can't simultaneously specify --from-beginning and 'auto.offset.reset="
            f"{props['auto.offset.reset']}', please remove one option"
        )
    props.setdefault("auto.offset.reset", reset)
    props.setdefault("client.id", "console-consumer")
    props["isolation.level"] = args.isolation_level or props.get(
        "isolation.level", "read_uncommitted"
    )
    props.setdefault("allow.auto.create.topics", "true")  # as the Java consumer

    assignment = None
    subscription = None
    if args.partition is not None:
        assignment = (args.topic, args.partition, _start_offset(args.offset, args.from_beginning))
    elif args.topic:
        subscription = [args.topic]
    else:
        try:
            re.compile(args.include)
        except re.error as e:
            raise UsageError(
                f"--include {args.include!r} is not a valid regular expression: {e}"
            ) from None
        # librdkafka subscribes to topics matching a regex when the name starts with ^;
        # anchored at both ends as Java's Pattern.matches() is.
        subscription = [f"^({args.include.strip()})$"]
    return Plan(props, subscription, assignment, args.max_messages, args.timeout_ms)


def _start_offset(text: str | None, from_beginning: bool) -> int:
    if text is None:
        return confluent_kafka.OFFSET_BEGINNING if from_beginning else confluent_kafka.OFFSET_END
    lowered = text.strip().lower()
    if lowered == "earliest":
        return confluent_kafka.OFFSET_BEGINNING
    if lowered == "latest":
        return confluent_kafka.OFFSET_END
    try:
        offset = int(lowered)
    except ValueError:
        offset = -1
    if offset < 0:
        raise UsageError(
            f"The provided offset value '{text}' is incorrect. Valid values are 'earliest', "
            "'latest', or a non-negative long."
        )
    return offset


class _Stop(Exception):
    """SIGTERM: stop consuming as on Ctrl-C."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Stop


class Reader:
    """The consumer loop; `count` is what was printed, also after an error."""

    def __init__(self, plan: Plan, bootstrap: str, fmt: FormatOptions, *, skip_errors: bool):
        self.plan = plan
        self.fmt = fmt
        self.skip_errors = skip_errors
        self.count = 0
        config: dict[str, Any] = dict(settings.librdkafka_settings(bootstrap, plan.properties))
        self.watch = connection.Watch(config["bootstrap.servers"])
        config["error_cb"] = self.watch
        config["logger"] = settings.quiet_logger()
        try:
            self.consumer = confluent_kafka.Consumer(config)
        except (confluent_kafka.KafkaException, ValueError) as e:
            error = errors.kafka_error(e)
            raise errors.ConfigurationError(errors.describe(error) if error else str(e)) from None

    def run(self, out: BinaryIO) -> None:
        """Read and print until a stop condition (always closing the consumer, which
        commits what was printed when auto-commit is on)."""
        try:
            self._loop(out)
        except (KeyboardInterrupt, _Stop):
            pass
        except confluent_kafka.KafkaException as e:
            error = errors.kafka_error(e)
            raise errors.ClientError(errors.describe(error) if error else str(e)) from None
        finally:
            with contextlib.suppress(RuntimeError, confluent_kafka.KafkaException):
                self.consumer.close()

    def _check_partition(self, topic: str, partition: int) -> None:
        """A partition that does not exist is an error at once: librdkafka would wait for
        it (and Kafka's tool waits out --timeout-ms, then prints 0 messages)."""
        described = self.consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
        if described is None or described.error is not None:
            raise errors.NotFoundError(f"Topic '{topic}' does not exist")
        if partition not in described.partitions:
            raise errors.NotFoundError(
                f"Partition {partition} of topic '{topic}' does not exist (it has "
                f"{len(described.partitions)} partition(s))"
            )

    def _loop(self, out: BinaryIO) -> None:
        plan = self.plan
        if plan.assignment is not None:
            topic, partition, offset = plan.assignment
            self._check_partition(topic, partition)
            self.consumer.assign([confluent_kafka.TopicPartition(topic, partition, offset)])
        else:
            self.consumer.subscribe(plan.subscription or [])
        last_record = time.monotonic()
        while plan.max_messages is None or self.count < plan.max_messages:
            wanted = (
                BATCH if plan.max_messages is None else min(BATCH, plan.max_messages - self.count)
            )
            messages = self.consumer.consume(num_messages=wanted, timeout=POLL_SLICE_S)
            self.watch.check()
            for message in messages:
                error = message.error()
                if error is not None:
                    _consumer_error(error, message)
                    continue
                self.watch.connected()
                try:
                    out.write(format_record(printed(message), self.fmt))
                except (UnicodeError, ValueError) as e:
                    if not self.skip_errors:
                        raise errors.ClientError(f"Error processing message: {e}") from None
                    print(f"Error processing message, skipping this message: {e}", file=sys.stderr)
                self.count += 1
            if messages:
                out.flush()
                last_record = time.monotonic()
            elif plan.timeout_ms is not None:
                if (time.monotonic() - last_record) * 1000 >= plan.timeout_ms:
                    break


def _consumer_error(error: confluent_kafka.KafkaError, message: Any) -> None:
    code = error.code()
    if code == confluent_kafka.KafkaError._PARTITION_EOF:
        return
    if code in (
        confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART,
        confluent_kafka.KafkaError._UNKNOWN_TOPIC,
    ):
        topic = message.topic()
        raise errors.NotFoundError(
            f"Topic '{topic}' does not exist" if topic else errors.describe(error)
        )
    if code == confluent_kafka.KafkaError._UNKNOWN_PARTITION:
        raise errors.NotFoundError(
            f"Partition {message.partition()} of topic '{message.topic()}' does not exist"
        )
    if error.fatal() or code in _FATAL_CODES:
        topic = message.topic()
        where = f" (topic '{topic}')" if topic else ""
        raise errors.ClientError(f"{errors.describe(error)}{where}")
    print(f"WARN {errors.describe(error)}", file=sys.stderr)


def _body(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    bootstrap = options.require_bootstrap(args)
    what = plan(args)
    fmt = FormatOptions.from_properties(
        options.merged(args.formatter_config, args.formatter_properties)
    )
    reader = Reader(what, bootstrap, fmt, skip_errors=args.skip_message_on_error)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        reader.run(sys.stdout.buffer)
    finally:
        signal.signal(signal.SIGTERM, previous)
        print(f"Processed a total of {reader.count} messages", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return options.run(lambda: _body(argv))


if __name__ == "__main__":
    sys.exit(main())
