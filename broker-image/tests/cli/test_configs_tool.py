"""strom-configs argument handling: Kafka's --add-config syntax and the action rules."""

from __future__ import annotations

import pytest
from strom.cli import configs

B = ["--bootstrap-server", "localhost:9092"]


def test_add_config_keeps_bracketed_lists_whole() -> None:
    assert configs.parse_add_config("cleanup.policy=[compact,delete],retention.ms=1000") == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "1000",
    }
    assert configs.parse_add_config("a=1") == {"a": "1"}
    assert configs.parse_add_config("") == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--alter", "--topic", "t"], "--alter needs --add-config or --delete-config"),
        (["--describe", "--topic", "t", "--add-config", "a=1"], "go with --alter"),
        (["--describe", "--alter", "--topic", "t"], "exactly one action"),
        (["--alter", "--entity-type", "topics", "--add-config", "a=1"], "--entity-name"),
        (["--alter", "--topic", "t", "--add-config", "a=[1,2"], "unclosed ["),
        (["--alter", "--topic", "t", "--add-config", "novalue"], "expected key=value"),
    ],
)
def test_bad_alter_commands_are_usage_errors(args: list[str], message: str) -> None:
    with pytest.raises(configs.UsageError, match=message.replace("[", r"\[")):
        configs.parse([*B, *args])


def test_alter_parses_both_lists() -> None:
    parsed = configs.parse(
        [*B, "--alter", "--topic", "t", "--add-config", "x=1", "--delete-config", "y, z"]
    )
    assert (parsed.set_configs, parsed.delete_configs) == ({"x": "1"}, ["y", "z"])
