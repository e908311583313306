"""strom-consumer-groups without a broker: argument checks, reset plans' inputs, and the
tables, padded exactly as Kafka's ConsumerGroupCommand pads them (expected strings are
Kafka 4.3's output against the same groups)."""

from __future__ import annotations

import datetime

import pytest
from strom.cli import consumer_groups as cg
from strom.cli import group_tables, offset_resets, options
from strom.client import results

BOOTSTRAP = ["--bootstrap-server", "localhost:9092"]
TP = results.TopicPartition
COORDINATOR = results.Node(1, "127.0.0.1", 19092)


def member(member_id: str, client_id: str, *partitions: int) -> results.MemberInfo:
    return results.MemberInfo(
        member_id, None, client_id, "/127.0.0.1", tuple(TP("p1", p) for p in partitions)
    )


def group(state: str, *members: results.MemberInfo, assignor: str = "range") -> results.GroupInfo:
    return results.GroupInfo("G4", state, "Classic", assignor, COORDINATOR, members, False)


LONG = "console-consumer-24ff7d31-4580-406d-90fe-5bdbc3276068"
SECOND = "second-08562ffb-767e-4875-872d-ea9d26506929"
STABLE = group("Stable", member(SECOND, "second", 2), member(LONG, "console-consumer", 0, 1))


def test_offsets_table_of_a_stable_group() -> None:
    committed: dict[results.TopicPartition, int] = {}
    log_end = {TP("p1", 0): 3, TP("p1", 1): 2, TP("p1", 2): 5}
    lines = group_tables.offsets_table(group_tables.offset_rows(STABLE, committed, log_end))
    assert lines == [
        "",
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG        "
        "     CONSUMER-ID                                           HOST            CLIENT-ID",
        f"G4              p1              0          -               3               -          "
        f"     {LONG} /127.0.0.1      console-consumer",
        f"G4              p1              1          -               2               -          "
        f"     {LONG} /127.0.0.1      console-consumer",
        f"G4              p1              2          -               5               -          "
        f"     {SECOND}           /127.0.0.1      second",
    ]


def test_offsets_of_a_group_without_members_show_lag() -> None:
    empty = group("Empty", assignor="")
    committed = {TP("p1", 2): 1, TP("p1", 0): 3, TP("p1", 1): 2}
    log_end = {TP("p1", 0): 3, TP("p1", 1): 2, TP("p1", 2): 5}
    lines = group_tables.offsets_table(group_tables.offset_rows(empty, committed, log_end))
    assert lines[2:] == [
        "G4              p1              0          3               3               0          "
        "     -               -               -",
        "G4              p1              1          2               2               0          "
        "     -               -               -",
        "G4              p1              2          1               5               4          "
        "     -               -               -",
    ]


def test_members_table_plain_and_verbose() -> None:
    assert group_tables.members_table(STABLE, verbose=False) == [
        "",
        "GROUP           CONSUMER-ID                                           HOST            "
        "CLIENT-ID        #PARTITIONS     ",
        f"G4              {SECOND}           /127.0.0.1      second           1               ",
        f"G4              {LONG} /127.0.0.1      console-consumer 2               ",
    ]
    verbose = group_tables.members_table(STABLE, verbose=True)
    assert verbose[1].endswith(
        "#PARTITIONS     CURRENT-EPOCH   CURRENT-ASSIGNMENT   TARGET-EPOCH    TARGET-ASSIGNMENT   "
    )
    assert verbose[3].endswith(
        "console-consumer 2               -               p1:0,1               -               -"
        "                   "
    )


def test_members_table_with_static_members_has_an_instance_column() -> None:
    static = results.MemberInfo("m-1", "instance-a", "c", "/h", (TP("t", 0), TP("u", 1)))
    lines = group_tables.members_table(group("Stable", static), verbose=True)
    assert "GROUP-INSTANCE-ID" in lines[1]
    assert "instance-a" in lines[2] and "t:0;u:1" in lines[2]


def test_state_table() -> None:
    assert group_tables.state_table(STABLE) == [
        "",
        "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                "
        "#MEMBERS",
        "G4              127.0.0.1:19092  (1)      range                Stable               2",
    ]
    assert group_tables.state_table(group("Empty", assignor=""))[2].split() == [
        "G4",
        "127.0.0.1:19092",
        "(1)",
        "-",
        "Empty",
        "0",
    ]


def test_list_tables() -> None:
    groups = [
        results.GroupListing("G1", "Empty", "Classic", False),
        results.GroupListing("console-consumer-25389", "Stable", "Classic", False),
    ]
    assert group_tables.list_table(groups, with_type=False, with_state=False) == [
        "G1",
        "console-consumer-25389",
    ]
    assert group_tables.list_table(groups, with_type=True, with_state=True) == [
        "GROUP                            TYPE                 STATE               ",
        "G1                               Classic              Empty               ",
        "console-consumer-25389           Classic              Stable              ",
    ]
    assert group_tables.list_table([], with_type=False, with_state=True) == [
        "GROUP                     STATE               "
    ]


def test_reset_table_and_csv_round_trip() -> None:
    plan = {"G1": {TP("testABC", 1): 0, TP("testABC", 0): 3}}
    assert group_tables.reset_table(plan) == [
        "",
        "GROUP           TOPIC           PARTITION  NEW-OFFSET",
        "G1              testABC         0          3",
        "G1              testABC         1          0",
    ]
    exported = offset_resets.export_csv(plan)
    assert exported == "testABC,0,3\ntestABC,1,0\n"
    assert offset_resets.read_csv(exported, ["G1"]) == plan
    two = {"a": {TP("t", 0): 1}, "b": {TP("t", 0): 2}}
    assert offset_resets.read_csv(offset_resets.export_csv(two), ["a", "b"]) == two


def test_topic_scopes() -> None:
    assert offset_resets.topic_scope("t") == offset_resets.TopicScope("t", None)
    assert offset_resets.topic_scope("t:0,2") == offset_resets.TopicScope("t", (0, 2))
    with pytest.raises(options.UsageError, match="Invalid partition 'x'"):
        offset_resets.topic_scope("t:x")


def test_datetimes_and_durations() -> None:
    utc = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    assert offset_resets.datetime_ms("2020-01-01T00:00:00.000Z") == int(utc.timestamp() * 1000)
    assert offset_resets.datetime_ms("2020-01-01T01:00:00.000+01:00") == int(utc.timestamp() * 1000)
    local = datetime.datetime(2020, 1, 1, 0, 0, 0, 500_000).astimezone()
    assert offset_resets.datetime_ms("2020-01-01T00:00:00.5") == int(local.timestamp() * 1000)
    assert offset_resets.duration_ms("PT1H") == 3_600_000
    assert offset_resets.duration_ms("P1DT2M3.5S") == 86_400_000 + 120_000 + 3_500
    for bad in ("yesterday", "2020-01-01"):
        with pytest.raises(options.UsageError):
            offset_resets.datetime_ms(bad)
    with pytest.raises(options.UsageError):
        offset_resets.duration_ms("PT")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--describe"], "--describe needs --group or --all-groups"),
        (["--reset-offsets", "--group", "g", "--topic", "t"], "reset specifications"),
        (["--reset-offsets", "--group", "g", "--to-earliest"], "One of the reset scopes"),
        (
            [
                "--reset-offsets",
                "--group",
                "g",
                "--all-topics",
                "--to-latest",
                "--dry-run",
                "--execute",
            ],
            "--dry-run cannot be used with --execute",
        ),
        (["--describe", "--group", "g", "--members", "--state"], "at most one of"),
        (["--list", "--state", "bogus"], "Invalid state list 'bogus'"),
        (["--list", "--to-earliest"], "only supported with --reset-offsets"),
        (["--delete", "--group", "g", "--all-groups"], "cannot be used with --all-groups"),
    ],
)
def test_misuse(argv: list[str], message: str) -> None:
    with pytest.raises(options.UsageError) as caught:
        cg.parse([*BOOTSTRAP, *argv])
    assert message in str(caught.value)


def test_list_state_filter_is_case_insensitive() -> None:
    args = cg.parse([*BOOTSTRAP, "--list", "--state", "stable,EMPTY"])
    assert args.state_filter == {"Stable", "Empty"}
