"""`make run` installs the broker's runtime only: requirements-runtime.lock pins exactly the
base dependencies and what they need, at requirements.lock's versions; no client, no test
tools."""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.split("#")[0].strip())
        if match:
            out[_normal(match.group(1))] = match.group(2)
    return out


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(requirements: list[str]) -> set[str]:
    """The distributions these requirements pull in on this Python (from the installed
    packages' metadata), extras and markers for other Pythons left out."""
    seen: set[str] = set()
    todo = [Requirement(text) for text in requirements]
    while todo:
        requirement = todo.pop()
        name = _normal(requirement.name)
        if name in seen or (requirement.marker and not requirement.marker.evaluate()):
            continue
        seen.add(name)
        todo += [Requirement(text) for text in importlib.metadata.requires(name) or []]
    return seen


def test_the_runtime_lock_is_the_base_dependencies_at_the_full_locks_versions() -> None:
    runtime = _pins(ROOT / "requirements-runtime.lock")
    full = _pins(ROOT / "requirements.lock")
    assert {name: full.get(name) for name in runtime} == runtime
    base = PYPROJECT["project"]["dependencies"]
    assert set(runtime) == _closure(base), sys.version


def test_the_runtime_lock_has_no_client_and_no_test_tools() -> None:
    runtime = _pins(ROOT / "requirements-runtime.lock")
    for tool in ("confluent-kafka", "pytest", "mypy", "ruff", "kafka-python", "aiokafka"):
        assert tool not in runtime


def test_make_run_installs_the_runtime_lock_and_starts_the_shipped_config() -> None:
    makefile = (ROOT / "Makefile").read_text()
    run = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert run.startswith(" install-runtime\n")
    assert "$(BIN)/strom-server config/server.properties" in run
    runtime_rule = makefile.split("\n$(RUNTIME_STAMP):", 1)[1].split("\n\n", 1)[0]
    assert "-r requirements-runtime.lock" in runtime_rule
    assert "--no-deps -e .\n" in runtime_rule
