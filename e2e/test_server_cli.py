"""strom-server as a user starts it: defaults, a properties file, STROM_* variables,
refusals of bad configuration that name the key, and graceful SIGINT/SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from strom_process import StromProcess, free_port, server_command


def run_to_exit(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    completed = subprocess.run(
        server_command() + args,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return completed.returncode, completed.stderr


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--override", "log.segment.bytes=3"], {}, "log.segment.bytes"),
        (["--override", "log.segmnt.bytes=100"], {}, "log.segment.bytes"),  # did you mean
        (["--override", "num.partitions=many"], {}, "num.partitions"),
        (["--override", "listeners=SSL://:9093"], {}, "listeners"),
        ([], {"STROM_AUTO_CREATE_TOPICS_ENABLE": "perhaps"}, "auto.create.topics.enable"),
        (["no-such-file.properties"], {}, "no-such-file.properties"),
    ],
    ids=["too-small", "misspelt", "not-a-number", "ssl", "env", "missing-file"],
)
def test_bad_configuration_is_refused_naming_the_key(
    tmp_path: Path, args: list[str], env: dict[str, str], expected: str
) -> None:
    code, stderr = run_to_exit(args, tmp_path, env)
    assert code == 2, stderr
    assert expected in stderr
    assert not (tmp_path / ".strom-data").exists(), "nothing is written before config is valid"


KAFKA_CONFIGS = Path(__file__).parents[1] / "broker-image" / "tests" / "config" / "kafka_configs"


@pytest.mark.parametrize(
    ("text", "overrides", "key", "expected"),
    [
        (
            "node.id=4\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\n"
            "controller.listener.names=CONTROLLER\n"
            "controller.quorum.voters=1@localhost:9093,2@localhost:9095,3@localhost:9097\n",
            [],
            "controller.quorum.voters",
            "this node (node.id=4) has the controller role but is not a voter",
        ),
        (
            "process.roles=broker\nnode.id=2\ncontroller.quorum.voters=1@localhost:9093\n"
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n",
            [],
            "controller.listener.names",
            "must not be in listeners on a broker-only node",
        ),
        (
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n"
            "controller.quorum.bootstrap.servers=localhost:9093,localhost:9095,localhost:9097\n",
            [],
            "controller.quorum.bootstrap.servers",
            "without controller.quorum.voters a controller starts as a quorum of one",
        ),
        ("node.id=1\n", ["--override", "broker.id=2"], "node.id", "must be the same as broker.id"),
    ],
    ids=["not-a-voter", "broker-with-controller-listener", "bootstrap-without-voters", "broker-id"],
)
def test_a_contradictory_quorum_file_is_refused_in_one_line_naming_the_key(
    tmp_path: Path, text: str, overrides: list[str], key: str, expected: str
) -> None:
    path = tmp_path / "cluster.properties"
    path.write_text(text)
    code, stderr = run_to_exit([str(path), *overrides], tmp_path)
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"strom-server: configuration error: {key}: "), stderr
    assert expected in lines[0] and f"set in {path}" in lines[0], stderr
    assert not (tmp_path / ".strom-data").exists(), "nothing is written before config is valid"


def test_kafkas_combined_mode_server_properties_runs_as_a_quorum_of_one(tmp_path: Path) -> None:
    # Kafka 4's config/server.properties, verbatim; only the ports and the data directory
    # are moved (the same keys a Kafka user would change to run two on one machine).
    port, controller_port = free_port(), free_port()
    endpoints = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"
    broker = StromProcess(
        tmp_path,
        port=port,
        command=[*server_command(), str(KAFKA_CONFIGS / "kraft-reconfig-server.properties")],
        overrides={
            "listeners": endpoints,
            "advertised.listeners": endpoints,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        },
    )
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        metadata = admin.list_topics("made-by-kafkas-file", timeout=10)
        assert len(metadata.topics["made-by-kafkas-file"].partitions) == 1
        assert [b.port for b in metadata.brokers.values()] == [port]  # not the controller's
    finally:
        broker.stop()


def test_properties_file_and_environment_configure_the_broker(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("# a Kafka-style file\nnum.partitions=2\nlog.retention.hours=12\n")
    broker = StromProcess(tmp_path / "run", command=[*server_command(), str(properties)])
    os.environ["STROM_NUM_PARTITIONS"] = "5"  # the environment wins over the file
    try:
        broker.start()
    finally:
        del os.environ["STROM_NUM_PARTITIONS"]
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        metadata = admin.list_topics("created-by-metadata", timeout=10)
        assert len(metadata.topics["created-by-metadata"].partitions) == 5
    finally:
        broker.stop()


def test_sigint_shuts_down_gracefully_and_restart_needs_no_recovery(tmp_path: Path) -> None:
    broker = StromProcess(tmp_path)
    broker.start()
    AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics("t", timeout=10)
    assert broker.proc is not None
    broker.proc.send_signal(signal.SIGINT)
    assert broker.proc.wait(20) == 0
    assert "stopped cleanly" in broker.log_tail()
    broker.start()
    assert "unclean shutdown" not in broker.log_tail()
    broker.kill()
    broker.start()
    assert "t-0: unclean shutdown, recovering segments from offset 0" in broker.log_tail()
    broker.stop()


def test_sigterm_repeated_while_stopping_still_ends_in_a_clean_exit(tmp_path: Path) -> None:
    """Scripts and supervisors send SIGTERM more than once; the broker's exit status stays
    0 however late the repeat lands (it once died with -15 after "stopped cleanly")."""
    broker = StromProcess(tmp_path)
    broker.start()
    assert broker.proc is not None
    proc = broker.proc
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 20
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.002)
    assert proc.wait(5) == 0, broker.log_tail()
    assert "stopped cleanly" in broker.log_tail()
    broker.stop()


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_no_arguments_serves_localhost_9092_with_data_in_the_working_directory(
    tmp_path: Path,
) -> None:
    if not (port_is_free(9092) and port_is_free(9404)):
        pytest.skip("9092 or 9404 is in use on this machine")
    process = subprocess.Popen(
        server_command(), cwd=tmp_path, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                with urllib.request.urlopen("http://127.0.0.1:9404/readyz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "not ready in 30s"
            time.sleep(0.05)
        admin = AdminClient({"bootstrap.servers": "localhost:9092"})
        assert admin.list_topics(timeout=10).brokers[1].port == 9092
        assert (tmp_path / ".strom-data" / "meta.properties").exists()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0


def test_a_taken_port_is_a_clear_startup_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, stderr = run_to_exit(
            [
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override",
                f"metrics.listener=http://127.0.0.1:{free_port()}",
            ],
            tmp_path,
        )
    assert code == 1
    assert "failed to start" in stderr and str(port) in stderr and "listeners" in stderr
    assert "Traceback" not in stderr


def test_a_second_broker_on_a_data_directory_in_use_is_refused_before_recovery(
    tmp_path: Path,
) -> None:
    first = StromProcess(tmp_path / "first")
    first.start()
    try:
        admin = AdminClient({"bootstrap.servers": first.bootstrap})
        admin.list_topics("in-use", timeout=10)  # auto-creates a partition to recover
        # The same ports too, as when a second copy is started by mistake.
        code, stderr = run_to_exit(first.argv()[len(first.command) :], tmp_path)
        assert code == 1, stderr
        assert "log.dirs" in stderr and str(first.log_dir) in stderr and "in use" in stderr
        assert "recovering" not in stderr and "Traceback" not in stderr
        assert first.running
        assert "in-use" in admin.list_topics(timeout=10).topics
    finally:
        first.stop()
    first.start()  # the lock went with the first process


def _refusal(tmp_path: Path, log_dirs: str) -> str:
    code, stderr = run_to_exit(
        [
            "--override",
            f"log.dirs={log_dirs}",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
            "--override",
            f"metrics.listener=http://127.0.0.1:{free_port()}",
        ],
        tmp_path,
    )
    assert code != 0, stderr
    assert "Traceback" not in stderr, stderr
    assert "log.dirs" in stderr and log_dirs in stderr, stderr
    return stderr


def test_a_data_directory_that_is_a_file_is_refused_naming_log_dirs(tmp_path: Path) -> None:
    a_file = tmp_path / "data"
    a_file.write_text("not a directory\n")
    assert "not a directory" in _refusal(tmp_path, str(a_file))


def test_a_data_directory_that_cannot_be_created_is_refused_naming_log_dirs(
    tmp_path: Path,
) -> None:
    _refusal(tmp_path, "/proc/strom-no-such-dir/data")  # not even root creates it
    a_file = tmp_path / "file"
    a_file.write_text("")
    _refusal(tmp_path, str(a_file / "data"))  # the parent is a file


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_data_directory_without_permission_is_refused_naming_log_dirs(
    tmp_path: Path,
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert "ermission" in _refusal(tmp_path, str(locked))
    finally:
        locked.chmod(0o700)


def test_a_taken_metrics_port_is_a_clear_startup_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, stderr = run_to_exit(
            [
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                "--override",
                f"metrics.listener=http://127.0.0.1:{port}",
            ],
            tmp_path,
        )
    assert code == 1, stderr
    assert "metrics.listener" in stderr and str(port) in stderr
    assert "Traceback" not in stderr
