"""kafka-server-start.sh and kafka-server-stop.sh as Strom's entry points: the same
arguments as Kafka's scripts (-daemon, a properties file, --override)."""

from __future__ import annotations

import os
import sys
import time
import tomllib
from pathlib import Path

import pytest
from strom.cli import kafka_server_scripts

ROOT = Path(__file__).resolve().parents[3]


def test_the_scripts_are_installed_under_kafkas_names() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kafka-server-start.sh"] == "strom.cli.kafka_server_scripts:start"
    assert scripts["kafka-server-stop.sh"] == "strom.cli.kafka_server_scripts:stop"


@pytest.mark.parametrize("argv", [[], ["-daemon"], ["--override", "a=b"]])
def test_start_without_a_properties_file_prints_kafkas_usage(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert kafka_server_scripts.start(argv) == 1
    assert "USAGE: kafka-server-start.sh [-daemon] server.properties" in capsys.readouterr().err


def test_start_runs_strom_server_with_the_same_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions=0\n")
    assert kafka_server_scripts.start([str(properties)]) == 2  # strom-server's config error
    assert "num.partitions: must be at least 1" in capsys.readouterr().err


def test_daemon_runs_in_the_background_with_its_output_in_log_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    properties = tmp_path / "server-1.properties"
    properties.write_text("num.partitions=0\n")  # exits at once: nothing left running
    monkeypatch.setenv("LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    assert kafka_server_scripts.start(["-daemon", str(properties)]) == 0
    assert "runs in the background (pid " in capsys.readouterr().out
    out = tmp_path / "logs" / "server-1.out"
    deadline = time.monotonic() + 30
    while "num.partitions" not in (out.read_text() if out.exists() else ""):
        assert time.monotonic() < deadline, "no output from the background strom-server"
        time.sleep(0.05)
    assert "configuration error: num.partitions: must be at least 1" in out.read_text()


@pytest.mark.parametrize(
    ("command_line", "is_server"),
    [
        (["/v/bin/python", "/v/bin/strom-server", "config/server-1.properties"], True),
        (["/v/bin/python", "/v/bin/kafka-server-start.sh", "config/server.properties"], True),
        (["/v/bin/python", "-m", "strom.cli.server", "server.properties"], True),
        (["/v/bin/python", "/v/bin/strom-topics", "--list"], False),
        (["/v/bin/python", "/v/bin/kafka-server-stop.sh"], False),
        (["grep", "strom-server"], False),
    ],
)
def test_stop_finds_strom_servers_by_their_command_line(
    command_line: list[str], is_server: bool
) -> None:
    assert kafka_server_scripts._is_strom_server(command_line) is is_server
