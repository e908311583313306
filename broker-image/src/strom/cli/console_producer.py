"""strom-console-producer: kafka-console-producer.sh for Strom.

One record per line of stdin. Kafka's LineMessageReader properties split a line into
headers, key and value (`--property parse.key=true --property key.separator=:`); producer
properties come from `--producer-property k=v` and `--producer.config FILE` (also under
Kafka 4's names `--command-property` / `--command-config`). Keys are partitioned with
murmur2 as the Java producer does, so a key lands where kafka-console-producer puts it.
A failed send is reported on stderr and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, BinaryIO

import confluent_kafka

from strom.cli import options
from strom.client import connection, errors, settings

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
FLUSH_SLICE_S = 0.1
DEFAULT_FLUSH_TIMEOUT_S = 120.0
UsageError = options.UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = options.parser(
        "strom-console-producer",
        "This tool helps to read data from standard input and publish it to Kafka "
        "(Kafka's kafka-console-producer.sh, for Strom).",
    )
    options.add_bootstrap(parser)
    parser.add_argument(
        "--broker-list", help="Same as --bootstrap-server (the name older tutorials use)."
    )
    parser.add_argument("--topic", help="REQUIRED: the topic to produce to.")
    parser.add_argument(
        "--property",
        "--reader-property",
        dest="reader_properties",
        action="append",
        type=options.key_value,
        default=[],
        metavar="KEY=VALUE",
        help="Line reader properties: parse.key, key.separator (tab), parse.headers, "
        "headers.delimiter (tab), headers.separator (,), headers.key.separator (:), "
        "ignore.error, null.marker.",
    )
    parser.add_argument(
        "--reader-config", metavar="FILE", help="A properties file of line reader properties."
    )
    parser.add_argument(
        "--producer-property",
        "--command-property",
        dest="producer_properties",
        action="append",
        type=options.key_value,
        default=[],
        metavar="KEY=VALUE",
        help="A producer config (Kafka's property names), e.g. acks=all (repeatable).",
    )
    options.add_command_config(parser, "--producer.config", what="producer")
    parser.add_argument(
        "--request-required-acks", help="The producer's acks: 0, 1 or -1/all (default: -1)."
    )
    parser.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        choices=CODECS,
        help="none, gzip, snappy, lz4 or zstd (gzip when given without a value).",
    )
    parser.add_argument(
        "--sync", action="store_true", help="Send each record synchronously, as it arrives."
    )
    parser.add_argument(
        "--timeout", type=int, metavar="MS", help="linger.ms: how long a batch waits (1000)."
    )
    parser.add_argument("--batch-size", type=int, help="batch.size in bytes.")
    parser.add_argument("--message-send-max-retries", type=int, help="retries.")
    parser.add_argument("--retry-backoff-ms", type=int, help="retry.backoff.ms.")
    parser.add_argument("--request-timeout-ms", type=int, help="request.timeout.ms.")
    parser.add_argument("--metadata-expiry-ms", type=int, help="metadata.max.age.ms.")
    parser.add_argument("--max-memory-bytes", type=int, help="buffer.memory.")
    parser.add_argument("--socket-buffer-size", type=int, help="send.buffer.bytes.")
    parser.add_argument(
        "--max-block-ms",
        type=int,
        help="How long to wait for outstanding sends at the end (default 120000).",
    )
    parser.add_argument("--line-reader", help=argparse.SUPPRESS)
    return parser


@dataclasses.dataclass(frozen=True)
class ReaderOptions:
    """LineMessageReader's properties."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ReaderOptions:
        def flag(name: str) -> bool:
            return properties.get(name, "false").strip().lower() == "true"

        out = cls(
            parse_key=flag("parse.key"),
            key_separator=properties.get("key.separator", "\t"),
            parse_headers=flag("parse.headers"),
            headers_delimiter=properties.get("headers.delimiter", "\t"),
            headers_separator=properties.get("headers.separator", ","),
            headers_key_separator=properties.get("headers.key.separator", ":"),
            ignore_error=flag("ignore.error"),
            null_marker=properties.get("null.marker") or None,
        )
        out.check()
        return out

    def check(self) -> None:
        """Kafka's refusals of separators that would make lines ambiguous."""
        equal: list[tuple[str, str | None, str, str]] = []
        if self.parse_headers:
            equal += [
                (
                    "headers.delimiter",
                    self.headers_delimiter,
                    "headers.separator",
                    self.headers_separator,
                ),
                (
                    "headers.delimiter",
                    self.headers_delimiter,
                    "headers.key.separator",
                    self.headers_key_separator,
                ),
                (
                    "headers.separator",
                    self.headers_separator,
                    "headers.key.separator",
                    self.headers_key_separator,
                ),
            ]
        if self.parse_key:
            equal.append(("null.marker", self.null_marker, "key.separator", self.key_separator))
        if self.parse_headers:
            equal += [
                ("null.marker", self.null_marker, "headers.delimiter", self.headers_delimiter),
                ("null.marker", self.null_marker, "headers.separator", self.headers_separator),
                (
                    "null.marker",
                    self.null_marker,
                    "headers.key.separator",
                    self.headers_key_separator,
                ),
            ]
        for name_a, a, name_b, b in equal:
            if a == b:
                raise UsageError(f"{name_a} and {name_b} may not be equal")
        for name, value in (
            ("key.separator", self.key_separator),
            ("headers.delimiter", self.headers_delimiter),
            ("headers.separator", self.headers_separator),
            ("headers.key.separator", self.headers_key_separator),
        ):
            if not value:
                raise UsageError(f"{name} may not be empty")


@dataclasses.dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class LineError(Exception):
    """A line that the reader's properties cannot split."""


def parse_line(line: str, number: int, reader: ReaderOptions) -> Record:
    """One stdin line (without its newline) as a record, as LineMessageReader reads it."""
    rest = line
    headers: list[tuple[str, bytes | None]] = []
    if reader.parse_headers:
        head, sep, rest = rest.partition(reader.headers_delimiter)
        if not sep:
            if not reader.ignore_error:
                raise LineError(f"No headers delimiter found on line number {number}: '{line}'")
            head, rest = "", line
        for pair in head.split(reader.headers_separator) if head else []:
            name, sep, header_value = pair.partition(reader.headers_key_separator)
            if not sep:
                raise LineError(
                    f"No header key separator found in pair '{pair}' on line number {number}"
                )
            if reader.null_marker is not None and name == reader.null_marker:
                raise LineError(
                    f"Header keys should not be equal to the null marker '{reader.null_marker}' "
                    "as they can't be null"
                )
            headers.append((name, _field(header_value, reader)))
    key: bytes | None = None
    value: bytes | None
    if reader.parse_key:
        key_text, sep, value_text = rest.partition(reader.key_separator)
        if not sep:
            if not reader.ignore_error:
                raise LineError(f"No key separator found on line number {number}: '{line}'")
            key, value = None, _field(rest, reader)
        else:
            key, value = _field(key_text, reader), _field(value_text, reader)
    else:
        value = _field(rest, reader)
    return Record(key=key, value=value, headers=tuple(headers))


def _field(text: str, reader: ReaderOptions) -> bytes | None:
    if reader.null_marker is not None and text == reader.null_marker:
        return None
    return text.encode("utf-8", "surrogateescape")


def producer_properties(args: argparse.Namespace) -> dict[str, str]:
    """Kafka's precedence: the properties file, then --producer-property, then the tool's own
    flags when given; the tool's defaults fill only what is still unset."""
    props = options.merged(args.command_config, args.producer_properties)
    explicit = {
        "acks": args.request_required_acks,
        "compression.type": args.compression_codec,
        "linger.ms": args.timeout,
        "batch.size": args.batch_size,
        "retries": args.message_send_max_retries,
        "retry.backoff.ms": args.retry_backoff_ms,
        "request.timeout.ms": args.request_timeout_ms,
        "metadata.max.age.ms": args.metadata_expiry_ms,
        "buffer.memory": args.max_memory_bytes,
        "send.buffer.bytes": args.socket_buffer_size,
    }
    for key, value in explicit.items():
        if value is not None:
            props[key] = str(value)
    defaults = {"acks": "-1", "linger.ms": "1000", "client.id": "console-producer"}
    if args.sync:
        props["linger.ms"] = "0"
    for key, value in defaults.items():
        props.setdefault(key, value)
    return props


def lines(stream: BinaryIO) -> Iterable[str]:
    """stdin lines without their line ends (\\n, \\r\\n or \\r, as Java's readLine)."""
    for raw in stream:
        text = raw.decode("utf-8", "surrogateescape")
        text = text.removesuffix("\n").removesuffix("\r")
        yield from text.split("\r")


class Sender:
    """A librdkafka producer that remembers failed deliveries and stops at once when no
    bootstrap server answers."""

    def __init__(self, bootstrap: str, properties: Mapping[str, str], topic: str) -> None:
        config: dict[str, Any] = dict(settings.librdkafka_settings(bootstrap, properties))
        config.setdefault("partitioner", "murmur2_random")  # the Java producer's partitioner
        self.topic = topic
        self.watch = connection.Watch(config["bootstrap.servers"])
        config["error_cb"] = self.watch
        config["logger"] = settings.quiet_logger()
        try:
            self.producer = confluent_kafka.Producer(config)
        except confluent_kafka.KafkaException as e:
            error = errors.kafka_error(e)
            raise errors.ConfigurationError(
                errors.describe(error) if error is not None else str(e)
            ) from None
        self.sent = 0
        self.failed = 0

    def send(self, record: Record) -> None:
        def report(error: confluent_kafka.KafkaError | None, message: Any) -> None:
            if error is None:
                self.sent += 1
                self.watch.connected()
            else:
                self._failed(record, errors.describe(error))

        while True:
            try:
                self.producer.produce(
                    self.topic,
                    value=record.value,
                    key=record.key,
                    headers=list(record.headers) or None,
                    on_delivery=report,
                )
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(FLUSH_SLICE_S)
                self.watch.check()
            except confluent_kafka.KafkaException as e:  # refused before sending (too large)
                error = errors.kafka_error(e)
                self._failed(record, errors.describe(error) if error is not None else str(e))
                break
        self.producer.poll(0)
        self.watch.check()

    def _failed(self, record: Record, reason: str) -> None:
        """Kafka's ErrorLoggingCallback line; the tool goes on and exits 1 at the end."""
        self.failed += 1
        key = "null" if record.key is None else record.key.decode("utf-8", "replace")
        size = 0 if record.value is None else len(record.value)
        print(
            f"ERROR Error when sending message to topic {self.topic} with key: {key}, "
            f"value: {size} bytes with error: {reason}",
            file=sys.stderr,
        )

    def flush(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.producer.flush(FLUSH_SLICE_S) > 0:
            self.watch.check()
            if time.monotonic() >= deadline:
                left = len(self.producer)
                raise errors.ClientError(f"{left} record(s) not acknowledged within {timeout:g}s")


def _body(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    bootstrap = options.require_bootstrap(args, "broker_list")
    if not args.topic:
        raise UsageError("Missing required argument: --topic")
    if args.line_reader:
        raise UsageError("--line-reader is not supported: Strom's tool reads lines only")
    reader_props = options.merged(args.reader_config, args.reader_properties)
    reader = ReaderOptions.from_properties(reader_props)
    sender = Sender(bootstrap, producer_properties(args), args.topic)
    flush_timeout = (args.max_block_ms or DEFAULT_FLUSH_TIMEOUT_S * 1000) / 1000
    try:
        for number, line in enumerate(lines(sys.stdin.buffer), start=1):
            try:
                record = parse_line(line, number, reader)
            except LineError as e:
                sender.flush(flush_timeout)  # what was read before the bad line is sent
                raise errors.ClientError(str(e)) from None
            sender.send(record)
            if args.sync:
                sender.flush(flush_timeout)
    except KeyboardInterrupt:
        sender.flush(flush_timeout)  # Ctrl-C ends the input; what was typed is sent
        raise
    sender.flush(flush_timeout)
    return 1 if sender.failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    return options.run(lambda: _body(argv))


if __name__ == "__main__":
    sys.exit(main())
