"""strom-server runs combined-mode nodes only, for now: a split-mode node is refused at
start with a message naming process.roles, before it touches any directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from strom.cli import server

KAFKA_CONFIGS = Path(__file__).resolve().parents[1] / "config" / "kafka_configs"


@pytest.mark.parametrize(
    ("file_name", "role"),
    [("kraft-broker.properties", "broker"), ("kraft-controller.properties", "controller")],
)
def test_kafkas_split_mode_files_are_refused_naming_the_key(
    file_name: str, role: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_dirs = tmp_path / "logs"
    argv = [str(KAFKA_CONFIGS / file_name), "--override", f"log.dirs={log_dirs}"]
    assert server.main(argv) == server.EXIT_CONFIG_ERROR
    error = capsys.readouterr().err
    assert f"process.roles={role}: a {role}-only node" in error
    assert "process.roles=broker,controller" in error
    assert not log_dirs.exists()
