"""``strom-spark-entrypoint``: the command of the Spark driver and executor containers, a
Python port of Spark's Kubernetes ``entrypoint.sh`` (resource-managers/kubernetes/docker/
src/main/dockerfiles/spark/entrypoint.sh) for the Strom Spark image.

Spark on Kubernetes sets only a container's args: ``driver --properties-file ... --class
... app.py args`` for the driver pod, ``executor`` (with ``SPARK_EXECUTOR_*`` in the
environment) for an executor pod. The SparkJob's pod templates make this the command
(the operator's ``spark_entrypoint`` setting). ``SPARK_HOME`` is pyspark's installation;
the connector jars (strom_spark.connector) join the driver's jars and the executors'
classpath when they are not in Spark's own ``jars/`` already (a source checkout). Any
other first argument runs as a command, as entrypoint.sh's pass-through mode does.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from strom_spark import connector, extras, submit

PROG = "strom-spark-entrypoint"
EXECUTOR_BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
# what Spark's executor pod step puts in the environment, with the flag each becomes
EXECUTOR_FLAGS = (
    ("--driver-url", "SPARK_DRIVER_URL"),
    ("--executor-id", "SPARK_EXECUTOR_ID"),
    ("--cores", "SPARK_EXECUTOR_CORES"),
    ("--app-id", "SPARK_APPLICATION_ID"),
    ("--hostname", "SPARK_EXECUTOR_POD_IP"),
    ("--resourceProfileId", "SPARK_RESOURCE_PROFILE_ID"),
    ("--podName", "SPARK_EXECUTOR_POD_NAME"),
)
_JAVA_OPT = re.compile(r"^SPARK_JAVA_OPT_(\d+)$")


class MissingEnvironment(RuntimeError):
    """A variable Spark sets in a driver or executor pod is not there."""


def _required(env: Mapping[str, str], name: str, role: str) -> str:
    value = env.get(name, "")
    if not value:
        raise MissingEnvironment(f"{role}: ${name} is not set (Spark sets it in its {role} pods)")
    return value


def spark_classpath(env: Mapping[str, str], spark_home: Path, jars: Sequence[Path]) -> str:
    """entrypoint.sh's SPARK_CLASSPATH: the conf folder, Spark's jars, the connector, then
    SPARK_EXTRA_CLASSPATH and SPARK_DIST_CLASSPATH (HADOOP_CONF_DIR first when set)."""
    conf_dir = env.get("SPARK_CONF_DIR") or str(spark_home / "conf")
    parts = [conf_dir, str(spark_home / "jars" / "*"), *(str(jar) for jar in jars)]
    if env.get("HADOOP_CONF_DIR"):
        parts.insert(0, env["HADOOP_CONF_DIR"])
    parts += [env.get("SPARK_EXTRA_CLASSPATH", ""), env.get("SPARK_DIST_CLASSPATH", "")]
    return ":".join(part for part in parts if part)


def executor_java_options(env: Mapping[str, str]) -> list[str]:
    """SPARK_JAVA_OPT_0, _1, ... in their numeric order (the executor's JVM options)."""
    numbered = [(int(m.group(1)), v) for k, v in env.items() if (m := _JAVA_OPT.match(k))]
    return [value for _, value in sorted(numbered)]


def java(env: Mapping[str, str]) -> str:
    if env.get("JAVA_HOME"):
        return str(Path(env["JAVA_HOME"]) / "bin" / "java")
    return shutil.which("java", path=env.get("PATH")) or "java"


def executor_argv(env: Mapping[str, str], spark_home: Path, jars: Sequence[Path]) -> list[str]:
    memory = _required(env, "SPARK_EXECUTOR_MEMORY", "executor")
    argv = [java(env), *executor_java_options(env), f"-Xms{memory}", f"-Xmx{memory}"]
    argv += ["-cp", spark_classpath(env, spark_home, jars), EXECUTOR_BACKEND]
    for flag, name in EXECUTOR_FLAGS:
        argv += [flag, _required(env, name, "executor")]
    return argv


def driver_argv(args: Sequence[str], env: Mapping[str, str], jars: Sequence[Path]) -> list[str]:
    """spark-submit in client mode inside the driver pod, as entrypoint.sh runs it, with the
    connector jars joined to the application's own (--jars, else spark.jars of the
    properties file Spark mounted: a --jars alone would replace that list)."""
    address = _required(env, "SPARK_DRIVER_BIND_ADDRESS", "driver")
    # Spark makes the driver advertise its headless Service's DNS name to the executors;
    # the test kubelet (e2e/k8s) gives pods no cluster DNS, so the driver advertises its
    # pod IP, which Spark injects as SPARK_DRIVER_BIND_ADDRESS and every pod can reach.
    # A --conf wins over the properties file's spark.driver.host.
    rest = [
        "--conf",
        f"spark.driver.bindAddress={address}",
        "--conf",
        f"spark.driver.host={address}",
        "--deploy-mode",
        "client",
        *args,
    ]
    given = _properties_jars(args)
    if given and jars and not any(a == "--jars" or a.startswith("--jars=") for a in args):
        rest = ["--jars", given, *rest]
        # a jar the submission uploaded already (spark-submit in cluster mode uploads the
        # --jars it had) is not added twice: Spark refuses a second jar of the same name
        names = {part.rstrip("/").rsplit("/", 1)[-1] for part in given.split(",")}
        jars = [jar for jar in jars if jar.name not in names]
    return submit.submit_argv(rest, jars)


def _properties_jars(args: Sequence[str]) -> str:
    """spark.jars of the --properties-file in args ("" when there is none)."""
    for index, arg in enumerate(args):
        if arg == "--properties-file" and index + 1 < len(args):
            path = Path(args[index + 1])
        elif arg.startswith("--properties-file="):
            path = Path(arg.removeprefix("--properties-file="))
        else:
            continue
        if path.is_file():
            return read_properties(path.read_text()).get("spark.jars", "")
    return ""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(text: str) -> dict[str, str]:
    """A Java .properties file (what Spark writes with Properties.store: ``\\:`` and ``\\=``
    escaped, ``#`` comments); continuation lines are not needed for Spark's."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.lstrip()
        if not line or line[0] in "#!":
            continue
        key: list[str] = []
        value: list[str] = []
        escaped, in_key = False, True
        for char in line:
            target = key if in_key else value
            if escaped:
                target.append(_ESCAPES.get(char, char))
                escaped = False
            elif char == "\\":
                escaped = True
            elif in_key and char in "=:":
                in_key = False
            else:
                target.append(char)
        found["".join(key).strip()] = "".join(value).strip()
    return found


def command(args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """What the container runs for Spark's args."""
    role, rest = (args[0], list(args[1:])) if args else ("", [])
    if role == "driver":
        return driver_argv(rest, env, connector.connector_jars(dict(env)))
    if role == "executor":
        jars = connector.connector_jars(dict(env))
        return executor_argv(env, submit.spark_home(), jars)
    if not args:
        raise MissingEnvironment("no arguments: expected driver, executor or a command")
    return list(args)  # pass-through, as entrypoint.sh


def main(argv: Sequence[str] | None = None) -> None:
    extras.require(PROG, "pyspark", "PySpark", "spark")
    args = list(sys.argv[1:] if argv is None else argv)
    env = submit.submit_environment(dict(os.environ))
    try:
        argv_run = command(args, env)
    except (MissingEnvironment, connector.ConnectorMissing) as exc:
        sys.exit(f"{PROG}: {exc}")
    print(f"{PROG}: {' '.join(argv_run)}", file=sys.stderr, flush=True)
    if "/" in argv_run[0]:
        os.execve(argv_run[0], argv_run, env)
    os.execvpe(argv_run[0], argv_run, env)
