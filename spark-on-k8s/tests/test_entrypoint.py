"""strom-spark-entrypoint: the command lines it builds from the args and environment Spark
gives its driver and executor pods (no Spark is run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from strom_spark import entrypoint, submit

CONNECTOR = [Path("/lib/spark-sql-kafka.jar"), Path("/lib/kafka-clients.jar")]
EXECUTOR_ENV = {
    "SPARK_EXECUTOR_MEMORY": "1024m",
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.213.1.5:7078",
    "SPARK_EXECUTOR_ID": "1",
    "SPARK_EXECUTOR_CORES": "1",
    "SPARK_APPLICATION_ID": "spark-0123",
    "SPARK_EXECUTOR_POD_IP": "10.213.1.6",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_EXECUTOR_POD_NAME": "clickstream-exec-1",
    "SPARK_JAVA_OPT_10": "-Dlast",
    "SPARK_JAVA_OPT_2": "-Dsecond",
    "SPARK_JAVA_OPT_0": "-Dfirst",
    "JAVA_HOME": "/jvm",
}
DRIVER_ARGS = [
    "--properties-file",
    "/opt/spark/conf/spark.properties",
    "--class",
    "org.apache.spark.deploy.PythonRunner",
    "local:///opt/strom/spark/jobs/clickstream.py",
    "--trigger",
    "available-now",
]


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_the_driver_runs_spark_submit_in_client_mode_advertising_its_pod_ip() -> None:
    argv = entrypoint.driver_argv(DRIVER_ARGS, {"SPARK_DRIVER_BIND_ADDRESS": "10.213.1.5"}, [])
    assert argv[0] == str(submit.spark_home() / "bin" / "spark-submit")
    assert flag(argv, "--deploy-mode") == "client"
    confs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--conf"]
    assert "spark.driver.bindAddress=10.213.1.5" in confs
    assert "spark.driver.host=10.213.1.5" in confs
    # Spark's own args last and unchanged: the properties file, the class, the app, its args
    assert argv[-len(DRIVER_ARGS) :] == DRIVER_ARGS
    assert "--jars" not in argv


def test_the_driver_adds_the_connector_to_the_jars_of_its_properties_file(
    tmp_path: Path,
) -> None:
    properties = tmp_path / "spark.properties"
    # as Properties.store writes it: ':' escaped
    properties.write_text(
        "#Java properties\nspark.jars=file\\:/up/mine.jar\nspark.app.name=clickstream\n"
    )
    args = ["--properties-file", str(properties), *DRIVER_ARGS[2:]]
    argv = entrypoint.driver_argv(args, {"SPARK_DRIVER_BIND_ADDRESS": "10.0.0.1"}, CONNECTOR)
    assert (
        flag(argv, "--jars") == "/lib/spark-sql-kafka.jar,/lib/kafka-clients.jar,file:/up/mine.jar"
    )
    uploaded = tmp_path / "uploaded.properties"
    uploaded.write_text("spark.jars=file\\:/up/u-1/kafka-clients.jar\n")
    args = ["--properties-file", str(uploaded), *DRIVER_ARGS[2:]]
    argv = entrypoint.driver_argv(args, {"SPARK_DRIVER_BIND_ADDRESS": "10.0.0.1"}, CONNECTOR)
    assert flag(argv, "--jars") == "/lib/spark-sql-kafka.jar,file:/up/u-1/kafka-clients.jar"
    without = entrypoint.driver_argv(
        DRIVER_ARGS, {"SPARK_DRIVER_BIND_ADDRESS": "10.0.0.1"}, CONNECTOR
    )
    assert flag(without, "--jars") == "/lib/spark-sql-kafka.jar,/lib/kafka-clients.jar"


def test_the_executor_runs_the_kubernetes_executor_backend() -> None:
    home = Path("/spark")
    argv = entrypoint.executor_argv(EXECUTOR_ENV, home, CONNECTOR)
    assert argv[:6] == ["/jvm/bin/java", "-Dfirst", "-Dsecond", "-Dlast", "-Xms1024m", "-Xmx1024m"]
    assert flag(argv, "-cp") == (
        "/spark/conf:/spark/jars/*:/lib/spark-sql-kafka.jar:/lib/kafka-clients.jar"
    )
    backend = argv.index(entrypoint.EXECUTOR_BACKEND)
    assert argv[backend + 1 :] == [
        "--driver-url",
        "spark://CoarseGrainedScheduler@10.213.1.5:7078",
        "--executor-id",
        "1",
        "--cores",
        "1",
        "--app-id",
        "spark-0123",
        "--hostname",
        "10.213.1.6",
        "--resourceProfileId",
        "0",
        "--podName",
        "clickstream-exec-1",
    ]


def test_the_executor_classpath_takes_spark_s_conf_dir_and_extra_paths() -> None:
    env = {
        **EXECUTOR_ENV,
        "SPARK_CONF_DIR": "/opt/spark/conf",
        "HADOOP_CONF_DIR": "/etc/hadoop",
        "SPARK_EXTRA_CLASSPATH": "/extra/*",
    }
    argv = entrypoint.executor_argv(env, Path("/spark"), [])
    assert flag(argv, "-cp") == "/etc/hadoop:/opt/spark/conf:/spark/jars/*:/extra/*"


def test_a_missing_spark_variable_is_named() -> None:
    env = {k: v for k, v in EXECUTOR_ENV.items() if k != "SPARK_DRIVER_URL"}
    with pytest.raises(entrypoint.MissingEnvironment, match=r"\$SPARK_DRIVER_URL"):
        entrypoint.executor_argv(env, Path("/spark"), [])
    with pytest.raises(entrypoint.MissingEnvironment, match=r"\$SPARK_DRIVER_BIND_ADDRESS"):
        entrypoint.driver_argv(DRIVER_ARGS, {}, [])


def test_any_other_command_passes_through() -> None:
    assert entrypoint.command(["python", "-V"], {}) == ["python", "-V"]


def test_the_script_refuses_an_executor_without_its_environment() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from strom_spark.entrypoint import main; main()", "executor"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "strom-spark-entrypoint: executor: $SPARK_EXECUTOR_MEMORY is not set" in done.stderr
