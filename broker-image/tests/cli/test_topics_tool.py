"""strom-topics without a broker: argument checks, --topic patterns, and the --describe
lines, which must be Kafka's TopicCommand output character for character."""

from __future__ import annotations

import pytest
from strom.cli import options, topics
from strom.client import results

BOOTSTRAP = ["--bootstrap-server", "localhost:9092"]


def entry(name: str, value: str, source: str = "DYNAMIC_TOPIC_CONFIG") -> results.ConfigEntry:
    return results.ConfigEntry(name, value, source, False, False, ())


def partition(n: int, leader: int | None = 1, replicas=(1,), isr=(1,)) -> results.PartitionInfo:
    return results.PartitionInfo(n, leader, tuple(replicas), tuple(isr))


def topic(name: str, *parts: results.PartitionInfo) -> results.TopicInfo:
    return results.TopicInfo(name, "wgv9XqAYT-6fsxg1KLm6qw", False, parts)


def test_parse_a_tutorial_create() -> None:
    args = topics.parse(
        [*BOOTSTRAP, "--create", "--replication-factor", "1", "--partitions", "1", "--topic", "t"]
    )
    assert (args.action, args.topic, args.partitions, args.replication_factor) == (
        "create",
        "t",
        1,
        1,
    )
    assert args.bootstrap == "localhost:9092"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--list", "--describe"], "exactly one action"),
        ([], "exactly one action"),
        (["--create"], "--topic is required with --create"),
        (
            ["--create", "--topic", "t", "--partitions", "0"],
            "The partitions must be greater than 0",
        ),
        (
            ["--create", "--topic", "t", "--replication-factor", "0"],
            "The replication factor must be between 1 and 32767 inclusive",
        ),
        (["--create", "--topic", "a b"], "contains a character other than ASCII alphanumerics"),
        (["--create", "--topic", ".."], 'Topic name cannot be "." or ".."'),
        (["--create", "--topic", "x" * 250], "can't be longer than 249 characters"),
        (["--create", "--topic", "t", "--config", "novalue"], 'in the format "key=val"'),
        (["--describe", "--config", "a=b"], "--config is only supported with --create"),
        (["--alter", "--topic", "t"], "--alter needs --partitions"),
        (["--list", "--if-not-exists"], "--if-not-exists is only supported with --create"),
        (["--list", "--under-replicated-partitions"], "only supported with --describe"),
    ],
)
def test_misuse_is_refused_with_kafkas_words(argv: list[str], message: str) -> None:
    with pytest.raises(options.UsageError, match=None) as caught:
        topics.parse([*BOOTSTRAP, *argv])
    assert message in str(caught.value)


def test_zookeeper_gets_a_hint_and_bootstrap_is_required() -> None:
    with pytest.raises(options.UsageError, match="use --bootstrap-server"):
        topics.parse(["--zookeeper", "localhost:2181", "--list"])
    with pytest.raises(options.UsageError, match="--bootstrap-server"):
        topics.parse(["--list"])


def test_help_shows_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        topics.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "usage: strom-topics" in out and "--replication-factor" in out


def test_usage_errors_exit_non_zero_with_topic_command_prefix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert topics.main([*BOOTSTRAP, "--create"]) == options.EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "Error while executing topic command : --topic is required with --create\n"


def test_topic_is_a_full_match_regular_expression() -> None:
    names = ["testABC", "testABCD", "other", "__consumer_offsets"]
    assert topics.matching(names, "testABC", exclude_internal=False) == ["testABC"]
    assert topics.matching(names, "test.*", exclude_internal=False) == ["testABC", "testABCD"]
    assert topics.matching(names, "other,testABC", exclude_internal=False) == ["other", "testABC"]
    assert topics.matching(names, None, exclude_internal=True) == ["other", "testABC", "testABCD"]
    with pytest.raises(options.UsageError, match="not a valid regular expression"):
        topics.matching(names, "(", exclude_internal=False)


def test_replica_assignment() -> None:
    assert topics.replica_assignment("1:2,2:3") == [[1, 2], [2, 3]]
    with pytest.raises(options.UsageError, match="duplicate entries"):
        topics.replica_assignment("1:1")
    with pytest.raises(options.UsageError, match="different replication factor"):
        topics.replica_assignment("1:2,3")


def test_describe_lines_are_kafkas() -> None:
    t = topic("cfg", partition(0), partition(1))
    configs = {
        "cfg": [
            entry("cleanup.policy", "compact"),
            entry("compression.type", "producer", "DEFAULT_CONFIG"),
            entry("retention.ms", "1000"),
        ]
    }
    lines = topics.describe_lines([t], configs, {}, [1])
    assert lines == [
        "Topic: cfg\tTopicId: wgv9XqAYT-6fsxg1KLm6qw\tPartitionCount: 2\tReplicationFactor: 1\t"
        "Configs: cleanup.policy=compact,retention.ms=1000",
        "\tTopic: cfg\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: ",
        "\tTopic: cfg\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: ",
    ]


def test_describe_without_overrides_ends_with_an_empty_configs_field() -> None:
    [head, _] = topics.describe_lines([topic("t", partition(0))], {"t": []}, {}, [1])
    assert head.endswith("\tReplicationFactor: 1\tConfigs: ")


def test_partition_filters_print_only_matching_partitions_and_no_topic_line() -> None:
    t = topic(
        "t",
        partition(0, 1, (1, 2, 3), (1, 2, 3)),
        partition(1, 2, (2, 3, 1), (2,)),
        partition(2, None, (3, 1, 2), ()),
        partition(3, 3, (3, 1, 2), (3, 1)),
    )
    configs = {"t": [entry("min.insync.replicas", "2")]}

    def shown(**reports: bool) -> list[str]:
        lines = topics.describe_lines([t], configs, reports, live_brokers=[1, 2])
        return [line.split("\t")[2] for line in lines]

    assert shown(under_replicated=True) == ["Partition: 1", "Partition: 2", "Partition: 3"]
    # partition 3's leader (3) is not a live broker
    assert shown(unavailable=True) == ["Partition: 2", "Partition: 3"]
    assert shown(under_min_isr=True) == ["Partition: 1", "Partition: 2", "Partition: 3"]
    assert shown(at_min_isr=True) == ["Partition: 3"]
    with_leaderless = topics.partition_line("t", t.partitions[2])
    assert "\tLeader: none\tReplicas: 3,1,2\tIsr: \t" in with_leaderless


def test_topics_with_overrides_prints_topic_lines_only() -> None:
    plain, tuned = topic("plain", partition(0)), topic("tuned", partition(0))
    configs = {"plain": [], "tuned": [entry("retention.ms", "5")]}
    lines = topics.describe_lines([plain, tuned], configs, {"overrides": True}, [1])
    assert lines == [
        "Topic: tuned\tTopicId: wgv9XqAYT-6fsxg1KLm6qw\tPartitionCount: 1\tReplicationFactor: 1\t"
        "Configs: retention.ms=5"
    ]
