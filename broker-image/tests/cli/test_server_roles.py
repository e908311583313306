"""strom-server runs combined-mode nodes and broker-only nodes that know the static quorum
(controller.quorum.voters); a controller-only node, or a broker-only node with only
controller.quorum.bootstrap.servers, is refused at start with a message naming the keys,
before it touches any directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from strom.cli import server

KAFKA_CONFIGS = Path(__file__).resolve().parents[1] / "config" / "kafka_configs"


@pytest.mark.parametrize(
    ("file_name", "role", "what_works"),
    [
        ("kraft-broker.properties", "broker", "controller.quorum.voters"),
        ("kraft-controller.properties", "controller", "process.roles=broker,controller"),
    ],
)
def test_kafkas_split_mode_files_are_refused_naming_the_key(
    file_name: str, role: str, what_works: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_dirs = tmp_path / "logs"
    argv = [str(KAFKA_CONFIGS / file_name), "--override", f"log.dirs={log_dirs}"]
    assert server.main(argv) == server.EXIT_CONFIG_ERROR
    error = capsys.readouterr().err
    assert f"process.roles={role}: a {role}-only node" in error
    assert what_works in error
    assert not log_dirs.exists()
