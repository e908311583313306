"""``strom-spark-submit``: pyspark's own ``spark-submit`` with Spark's Kafka connector on
the classpath and this Python as the Python of the driver and the executors.

Every argument is passed to spark-submit unchanged, so anything its ``--help`` lists
works; ``--jars`` gains the connector jars (strom_spark.connector) unless Spark has them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from strom_spark import connector, extras


def spark_home() -> Path:
    """pyspark's installation is a Spark distribution (bin/, jars/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def submit_argv(args: Sequence[str], jars: Sequence[Path]) -> list[str]:
    """spark-submit's command line: the connector joined to any ``--jars`` given."""
    argv = [str(spark_home() / "bin" / "spark-submit")]
    rest = list(args)
    extra = ",".join(str(jar) for jar in jars)
    for index, arg in enumerate(rest):
        if arg == "--jars" and index + 1 < len(rest):
            rest[index + 1] = ",".join(part for part in (extra, rest[index + 1]) if part)
            return argv + rest
        if arg.startswith("--jars="):
            given = arg.removeprefix("--jars=")
            rest[index] = "--jars=" + ",".join(part for part in (extra, given) if part)
            return argv + rest
    return argv + (["--jars", extra] if extra else []) + rest


def submit_environment(environ: dict[str, str]) -> dict[str, str]:
    env = dict(environ)
    env.setdefault("SPARK_HOME", str(spark_home()))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def main(argv: Sequence[str] | None = None) -> None:
    extras.require("strom-spark-submit", "pyspark", "PySpark", "spark")
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        jars = connector.connector_jars()
    except connector.ConnectorMissing as exc:
        sys.exit(f"strom-spark-submit: {exc}")
    command = submit_argv(args, jars)
    os.execve(command[0], command, submit_environment(dict(os.environ)))
