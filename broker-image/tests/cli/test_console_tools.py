"""The console producer's line reader and the console consumer's formatter, without a
broker: they must split lines and print records exactly as Kafka's LineMessageReader and
DefaultMessageFormatter do (the expected strings are Kafka 4.3's own output)."""

from __future__ import annotations

import io
from pathlib import Path

import confluent_kafka
import pytest
from strom.cli import console_consumer, console_producer, options

BOOTSTRAP = ["--bootstrap-server", "localhost:9092"]


def reader(**properties: str) -> console_producer.ReaderOptions:
    return console_producer.ReaderOptions.from_properties(
        {k.replace("_", "."): v for k, v in properties.items()}
    )


# --- console producer -------------------------------------------------------------------


def test_a_plain_line_is_the_value() -> None:
    record = console_producer.parse_line("hello world", 1, reader())
    assert record == console_producer.Record(key=None, value=b"hello world")


def test_parse_key_splits_at_the_first_separator() -> None:
    record = console_producer.parse_line("k1:v:1", 1, reader(parse_key="true", key_separator=":"))
    assert (record.key, record.value) == (b"k1", b"v:1")


def test_a_line_without_the_key_separator_is_an_error_unless_ignored() -> None:
    with pytest.raises(console_producer.LineError) as caught:
        console_producer.parse_line("novalue", 3, reader(parse_key="true", key_separator=":"))
    assert str(caught.value) == "No key separator found on line number 3: 'novalue'"
    lenient = reader(parse_key="true", key_separator=":", ignore_error="true")
    record = console_producer.parse_line("novalue", 3, lenient)
    assert (record.key, record.value) == (None, b"novalue")


def test_headers_key_and_value() -> None:
    options_ = reader(parse_key="true", parse_headers="true")
    record = console_producer.parse_line("h1:v1,h2:\tk\tval", 1, options_)
    assert record.headers == (("h1", b"v1"), ("h2", b""))
    assert (record.key, record.value) == (b"k", b"val")
    with pytest.raises(console_producer.LineError, match="No header key separator found"):
        console_producer.parse_line("h1\tk\tv", 2, options_)


def test_null_marker_makes_fields_null() -> None:
    options_ = reader(parse_key="true", key_separator=":", null_marker="NULL")
    record = console_producer.parse_line("NULL:NULL", 1, options_)
    assert (record.key, record.value) == (None, None)


def test_ambiguous_separators_are_refused() -> None:
    with pytest.raises(options.UsageError, match=r"headers\.delimiter and headers\.separator"):
        reader(parse_headers="true", headers_delimiter=",")
    with pytest.raises(options.UsageError, match=r"null\.marker and key\.separator"):
        reader(parse_key="true", key_separator=":", null_marker=":")


def test_lines_end_as_javas_readline_ends_them() -> None:
    data = io.BytesIO(b"a\nb\r\nc\rd\n\nlast")
    assert list(console_producer.lines(data)) == ["a", "b", "c", "d", "", "last"]


def test_producer_properties_precedence(tmp_path: Path) -> None:
    config = tmp_path / "producer.properties"
    config.write_text("acks=1\nlinger.ms=7\nclient.id=from-file\n")
    args = console_producer.build_parser().parse_args(
        [
            *BOOTSTRAP,
            "--topic",
            "t",
            "--producer.config",
            str(config),
            "--producer-property",
            "client.id=from-property",
            "--request-required-acks",
            "all",
            "--compression-codec",
        ]
    )
    props = console_producer.producer_properties(args)
    assert props["acks"] == "all"  # the flag beats the file
    assert props["linger.ms"] == "7"  # the file beats the tool's default (1000)
    assert props["client.id"] == "from-property"
    assert props["compression.type"] == "gzip"  # --compression-codec without a value
    args = console_producer.build_parser().parse_args([*BOOTSTRAP, "--topic", "t"])
    assert console_producer.producer_properties(args) == {
        "acks": "-1",
        "linger.ms": "1000",
        "client.id": "console-producer",
    }


def test_broker_list_is_accepted_for_old_tutorials() -> None:
    args = console_producer.build_parser().parse_args(["--broker-list", "h:1", "--topic", "t"])
    assert options.require_bootstrap(args, "broker_list") == "h:1"


# --- console consumer -------------------------------------------------------------------


def record(**fields: object) -> console_consumer.Printed:
    base: dict[str, object] = {
        "timestamp_type": "CreateTime",
        "timestamp": 1795319524117,
        "partition": 0,
        "offset": 1,
        "leader_epoch": None,
        "headers": (),
        "key": None,
        "value": b"hello",
    }
    base.update(fields)
    return console_consumer.Printed(**base)  # type: ignore[arg-type]


def fmt(**properties: str) -> console_consumer.FormatOptions:
    return console_consumer.FormatOptions.from_properties(
        {k.replace("_", "."): v for k, v in properties.items()}
    )


def test_the_default_prints_values_only() -> None:
    assert console_consumer.format_record(record(), fmt()) == b"hello\n"
    assert console_consumer.format_record(record(value=None), fmt()) == b"null\n"


def test_every_field_in_kafkas_order() -> None:
    everything = fmt(
        print_timestamp="true",
        print_partition="true",
        print_offset="true",
        print_epoch="true",
        print_headers="true",
        print_key="true",
    )
    out = console_consumer.format_record(
        record(headers=(("h1", b"v1"), ("h2", b"v2")), key=b"k"), everything
    )
    assert out == (
        b"CreateTime:1795319524117\tPartition:0\tOffset:1\tEpoch:NOT_PRESENT\th1:v1,h2:v2\tk\thello\n"
    )


def test_without_the_value_the_last_field_ends_the_line() -> None:
    out = console_consumer.format_record(
        record(headers=(("h3", b""),), key=b"k2"),
        fmt(print_timestamp="true", print_headers="true", print_key="true", print_value="false"),
    )
    assert out == b"CreateTime:1795319524117\th3:\tk2\n"


def test_separators_and_null_literal() -> None:
    out = console_consumer.format_record(
        record(offset=1, headers=(), key=None),
        fmt(
            print_offset="true",
            print_key="true",
            print_headers="true",
            key_separator=" | ",
            null_literal="NIL",
        ),
    )
    assert out == b"Offset:1 | NO_HEADERS | NIL | hello\n"
    assert (
        console_consumer.format_record(record(timestamp_type=None), fmt(print_timestamp="true"))
        == b"NO_TIMESTAMP\thello\n"
    )


def plan(*argv: str) -> console_consumer.Plan:
    return console_consumer.plan(console_consumer.build_parser().parse_args([*BOOTSTRAP, *argv]))


def test_without_a_group_a_throwaway_group_that_commits_nothing() -> None:
    p = plan("--topic", "t", "--from-beginning")
    assert p.properties["group.id"].startswith("console-consumer-")
    assert p.properties["enable.auto.commit"] == "false"
    assert p.properties["auto.offset.reset"] == "earliest"
    assert p.properties["isolation.level"] == "read_uncommitted"
    assert p.subscription == ["t"]


def test_a_group_commits_and_starts_at_the_latest_offset_by_default() -> None:
    p = plan("--topic", "t", "--group", "g")
    assert p.properties["group.id"] == "g"
    assert "enable.auto.commit" not in p.properties
    assert p.properties["auto.offset.reset"] == "latest"
    assert plan("--topic", "t", "--consumer-property", "group.id=g").properties["group.id"] == "g"


def test_partition_and_offset() -> None:
    assert plan("--topic", "t", "--partition", "2", "--offset", "5").assignment == ("t", 2, 5)
    assert plan("--topic", "t", "--partition", "0").assignment == (
        "t",
        0,
        confluent_kafka.OFFSET_END,
    )
    assert plan("--topic", "t", "--partition", "0", "--from-beginning").assignment == (
        "t",
        0,
        confluent_kafka.OFFSET_BEGINNING,
    )


def test_include_is_an_anchored_regex_subscription() -> None:
    assert plan("--include", "test|test-2").subscription == ["^(test|test-2)$"]
    assert plan("--whitelist", "a.*").subscription == ["^(a.*)$"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "Exactly one of --include/--topic is required."),
        (["--topic", "t", "--include", "x"], "Exactly one of --include/--topic is required."),
        (["--include", "x", "--partition", "0"], "The topic is required when partition"),
        (["--topic", "t", "--offset", "3"], "The partition is required when offset"),
        (
            ["--topic", "t", "--partition", "0", "--offset", "3", "--from-beginning"],
            "Options from-beginning and offset cannot be specified together.",
        ),
        (
            ["--topic", "t", "--group", "g", "--partition", "0"],
            "Options group and partition cannot be specified together.",
        ),
        (["--topic", "t", "--partition", "0", "--offset", "-4"], "is incorrect"),
        (
            ["--topic", "t", "--group", "a", "--consumer-property", "group.id=b"],
            "do not match",
        ),
        (
            ["--topic", "t", "--from-beginning", "--consumer-property", "auto.offset.reset=latest"],
            "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest'",
        ),
    ],
)
def test_consumer_misuse(argv: list[str], message: str) -> None:
    with pytest.raises(options.UsageError) as caught:
        plan(*argv)
    assert message in str(caught.value)
