"""strom-spark-submit: the connector jars reach spark-submit's --jars, a user's --jars is
kept, and a wrong STROM_SPARK_JARS is refused with a message naming it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from strom_spark import connector, submit


def test_connector_jars_come_from_the_source_tree_when_resolved() -> None:
    if not connector.SOURCE_TREE_JARS.is_dir():
        pytest.skip("make spark-jars has not resolved spark-on-k8s/lib/")
    names = [jar.name for jar in connector.connector_jars({})]
    assert any(name.startswith("spark-sql-kafka-0-10_2.13-") for name in names)
    assert any(name.startswith("kafka-clients-") for name in names)


def test_a_folder_or_a_list_in_the_environment_wins(tmp_path: Path) -> None:
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"PK")
    assert connector.connector_jars({connector.JARS_ENV: str(tmp_path)}) == [jar]
    assert connector.connector_jars({connector.JARS_ENV: f"{jar},"}) == [jar]


def test_a_missing_jar_is_refused_by_name(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jar"
    with pytest.raises(connector.ConnectorMissing, match=r"nope\.jar"):
        connector.connector_jars({connector.JARS_ENV: f"{missing},{missing}"})
    with pytest.raises(connector.ConnectorMissing, match="make spark-jars"):
        connector.connector_jars({connector.JARS_ENV: str(tmp_path)})


def test_jars_are_added_to_a_users_own_jars() -> None:
    jars = [Path("/j/connector.jar")]
    argv = submit.submit_argv(["--jars", "/u/mine.jar", "app.py"], jars)
    assert argv[0].endswith("/bin/spark-submit")
    assert argv[1:] == ["--jars", "/j/connector.jar,/u/mine.jar", "app.py"]
    argv = submit.submit_argv(["--jars=/u/mine.jar", "app.py"], jars)
    assert argv[1:] == ["--jars=/j/connector.jar,/u/mine.jar", "app.py"]
    assert submit.submit_argv(["app.py", "--x"], jars)[1:] == [
        "--jars",
        "/j/connector.jar",
        "app.py",
        "--x",
    ]
    # in the image Spark has the jars already: nothing is added
    assert submit.submit_argv(["app.py"], [])[1:] == ["app.py"]


def test_the_launcher_runs_pysparks_spark_submit() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from strom_spark.submit import main; main(['--version'])"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "version 4.1.1" in done.stdout + done.stderr
