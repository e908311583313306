"""strom.client is an extra: the broker never loads confluent-kafka, the tools say how to
install it when it is missing (the Spark tools name the `spark` extra they need too), and
the lock pins what the tools and tests need.

Each check runs in a fresh interpreter (sys.modules of this one is full of everything)."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SCRIPTS: dict[str, str] = PYPROJECT["project"]["scripts"]
# strom-dev-cluster runs strom-server processes, and Kafka's server scripts are
# strom-server under Kafka's names: like the broker, they need no client
BROKER_TOOLS = {
    "strom-server",
    "strom-dev-cluster",
    "kafka-server-start.sh",
    "kafka-server-stop.sh",
}
# the Kubernetes operator (operator/src/strom_operator, the `operator` extra: kopf over
# the client)
OPERATOR_TOOLS = {"strom-operator"}
# the Spark pipelines' tools (spark-on-k8s/src/strom_spark): pyspark (the `spark` extra);
# the demo producer also needs the client
SPARK_TOOLS = {
    "strom-spark-demo": ("confluent_kafka", "the Kafka client library", "client"),
    "strom-spark-submit": ("pyspark", "PySpark", "spark"),
    "strom-spark-entrypoint": ("pyspark", "PySpark", "spark"),
}
CLIENT_TOOLS = sorted(
    name for name in SCRIPTS if name not in BROKER_TOOLS | OPERATOR_TOOLS | set(SPARK_TOOLS)
)


def blocking(module: str) -> str:
    """Code that makes `import module` fail as it does where its extra is not installed."""
    return f"""
import importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == {module!r} or name.startswith({module + "."!r}):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Blocker())
"""


BLOCK_CONFLUENT_KAFKA = blocking("confluent_kafka")


def python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "broker-image" / "src")}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )


def test_the_broker_does_not_import_the_client_library() -> None:
    done = python(
        "import sys\n"
        "import strom.cli.server, strom.server.broker\n"
        "prefixes = ('confluent_kafka', 'strom.client')\n"
        "print(sorted(m for m in sys.modules if m.startswith(prefixes)))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_broker_starts_its_cli_without_the_client_library() -> None:
    done = python(BLOCK_CONFLUENT_KAFKA + "import strom.cli.server\nstrom.cli.server._parser()\n")
    assert done.returncode == 0, done.stderr


def test_the_dev_cluster_runs_without_the_client_library() -> None:
    done = python(
        BLOCK_CONFLUENT_KAFKA + "import sys, strom.cli.dev_cluster\n"
        "sys.argv = ['strom-dev-cluster', '--help']\n"
        "strom.cli.dev_cluster.main()\n"
    )
    assert done.returncode == 0, done.stderr
    assert "--brokers" in done.stdout


def test_kafkas_server_scripts_run_without_the_client_library() -> None:
    done = python(
        BLOCK_CONFLUENT_KAFKA + "import sys, strom.cli.kafka_server_scripts as scripts\n"
        "sys.exit(scripts.start([]))\n"
    )
    assert done.returncode == 1, done.stderr
    assert "USAGE: kafka-server-start.sh" in done.stderr


# what each tool needs beyond the base install, as it names it when missing
NEEDS = {
    **{tool: ("confluent_kafka", "the Kafka client library", "client") for tool in CLIENT_TOOLS},
    **SPARK_TOOLS,
}


@pytest.mark.parametrize("tool", sorted(NEEDS))
def test_a_tool_without_its_extra_says_how_to_install_it(tool: str) -> None:
    module, what, extra = NEEDS[tool]
    entry, _, function = SCRIPTS[tool].partition(":")
    done = python(
        blocking(module)
        + f"import sys, {entry}\nsys.argv = [{tool!r}, '--help']\n"
        + f"sys.exit({entry}.{function}())\n"
    )
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        f"{tool}: {what} is not installed ({module.replace('_', '-')}): "
        f"pip install 'strom[{extra}]'"
    )


def test_importing_the_client_without_its_extra_names_the_extra() -> None:
    done = python(BLOCK_CONFLUENT_KAFKA + "import strom.client.admin\n")
    assert done.returncode == 1
    assert "ModuleNotFoundError: strom.client needs confluent-kafka" in done.stderr
    assert "pip install 'strom[client]'" in done.stderr


@pytest.mark.parametrize("tool", CLIENT_TOOLS)
def test_each_tool_entry_point_runs_its_tool(tool: str) -> None:
    module, _, function = SCRIPTS[tool].partition(":")
    assert callable(getattr(importlib.import_module(module), function))
    name = tool.removeprefix("strom-").replace("-", "_")
    assert callable(importlib.import_module(f"strom.cli.{name}").main)


@pytest.mark.parametrize("tool", sorted(SPARK_TOOLS))
def test_each_spark_tool_entry_point_is_a_strom_spark_main(tool: str) -> None:
    module, _, function = SCRIPTS[tool].partition(":")
    assert module == "strom_spark." + tool.removeprefix("strom-spark-")
    assert function == "main"
    assert callable(getattr(importlib.import_module(module), function))


def test_the_operator_entry_point_is_the_operators_main() -> None:
    assert SCRIPTS["strom-operator"] == "strom_operator.main:main"
    assert callable(importlib.import_module("strom_operator.main").main)


def _pins(requirements: list[str]) -> dict[str, str]:
    out = {}
    for line in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.split("#")[0].strip())
        if match:
            out[match.group(1).lower().replace("_", "-")] = match.group(2)
    return out


def test_the_lock_pins_the_base_and_the_extras_as_pyproject_does() -> None:
    project = PYPROJECT["project"]
    assert not any(d.startswith("confluent-kafka") for d in project["dependencies"])
    assert project["optional-dependencies"]["client"] == ["confluent-kafka==2.16.1"]
    assert "strom[client]" in project["optional-dependencies"]["operator"]
    assert "strom[client,operator,spark]" in project["optional-dependencies"]["test"]
    wanted = _pins(
        project["dependencies"]
        + project["optional-dependencies"]["client"]
        + project["optional-dependencies"]["operator"]
        + project["optional-dependencies"]["spark"]
        + project["optional-dependencies"]["test"]
    )
    locked = _pins((ROOT / "requirements.lock").read_text().splitlines())
    assert {name: locked.get(name) for name in wanted} == wanted


def test_the_broker_image_installs_the_base_only() -> None:
    dockerfile = (ROOT / "broker-image" / "Dockerfile").read_text()
    installs = [line for line in dockerfile.splitlines() if "pip install" in line]
    assert installs, dockerfile
    assert not any("[client" in line or "confluent" in line for line in installs)
    assert "find_spec('confluent_kafka') is not None" in dockerfile
