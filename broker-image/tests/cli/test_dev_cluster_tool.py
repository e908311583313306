"""strom-dev-cluster's arguments, files and supervisor, without brokers: the files it writes
and keeps, the errors it gives, and a supervisor over small real processes that crash or
ignore SIGTERM. (e2e/test_dev_cluster.py runs it with real brokers.)"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from strom.cli import dev_cluster as cli
from strom.config import dev_cluster as rendering
from strom.config import loading
from strom.devtools import dev_cluster as supervisor

DEADLINE_S = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def render(data_dir: Path, brokers: int = 3, **kwargs: object) -> list[rendering.DevNode]:
    return rendering.render_dev_cluster(
        brokers,
        data_dir,
        19092,
        cluster_id="vvs1Jws4TsmeVfSExpQQow",
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--brokers", "0"], "--brokers must be at least 1"),
        (["--data-dir", "x"], "the following arguments are required: --brokers"),
        (["--brokers", "2", "--no-metrics", "--metrics-base-port", "9"], "not allowed with"),
        (["--brokers", "2", "--ready-timeout", "0"], "must be positive"),
    ],
)
def test_bad_arguments_exit_2_with_a_usage_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_ports_that_cannot_be_rendered_are_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "d"
    argv = ["--brokers", "3", "--data-dir", str(data_dir), "--base-port", "19092"]
    assert cli.main([*argv, "--controller-base-port", "19093"]) == cli.EXIT_USAGE
    assert "port ranges overlap" in capsys.readouterr().err
    assert not data_dir.exists() or not list(data_dir.iterdir())


def test_a_port_in_use_is_named_with_its_node_and_listener(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        argv = ["--brokers", "1", "--data-dir", str(tmp_path), "--base-port", str(port)]
        assert cli.main([*argv, "--no-metrics"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert f"port {port} (node 1's client listener) is in use" in err
    assert not list(tmp_path.glob("*.properties"))


def test_netns_is_refused_without_root(tmp_path: Path) -> None:
    """A real process without root: this one, or as root a child switched to nobody
    (skipped when nobody cannot run this interpreter, e.g. one under /root)."""
    script = "import sys; from strom.cli import dev_cluster; sys.exit(dev_cluster.main())"
    argv = [sys.executable, "-c", script, "--brokers", "1", "--data-dir", str(tmp_path), "--netns"]
    user = 65534 if os.geteuid() == 0 else None
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=DEADLINE_S, check=False, user=user
        )
    except PermissionError as error:
        pytest.skip(f"nobody cannot run {sys.executable}: {error}")
    if "Permission denied" in proc.stderr:
        pytest.skip(f"nobody cannot run this interpreter here: {proc.stderr[-300:]}")
    assert proc.returncode == cli.EXIT_USAGE, proc.stderr
    assert "--netns needs root" in proc.stderr


def test_files_are_written_then_kept_with_their_cluster_id(tmp_path: Path) -> None:
    assert supervisor.existing_cluster_id(tmp_path) is None
    nodes = render(tmp_path)
    lines = supervisor.write_property_files(nodes, tmp_path, rewrite=False)
    assert lines == [f"{tmp_path / f'node-{i}.properties'} (written)" for i in (1, 2, 3)]
    assert supervisor.existing_cluster_id(tmp_path) == "vvs1Jws4TsmeVfSExpQQow"
    for node in nodes:
        written = loading.parse_properties((tmp_path / node.file_name).read_text())
        assert written == node.settings

    # a line added by hand is not a disagreement: the file is kept as it is
    edited = tmp_path / "node-2.properties"
    edited.write_text(edited.read_text() + "log.retention.ms=-1\n")
    lines = supervisor.write_property_files(render(tmp_path), tmp_path, rewrite=False)
    assert all(line.endswith("(kept)") for line in lines)
    assert "log.retention.ms=-1" in edited.read_text()


def test_a_file_that_disagrees_is_refused_unless_rewrite(tmp_path: Path) -> None:
    supervisor.write_property_files(render(tmp_path), tmp_path, rewrite=False)
    moved = render(tmp_path, metrics_base_port=29404)
    with pytest.raises(supervisor.DevClusterError, match=r"metrics.listener=http://localhost:9404"):
        supervisor.write_property_files(moved, tmp_path, rewrite=False)
    lines = supervisor.write_property_files(moved, tmp_path, rewrite=True)
    assert all(line.endswith("(rewritten)") for line in lines)
    assert "29404" in (tmp_path / "node-1.properties").read_text()


def test_the_cluster_id_of_formatted_log_dirs_counts_and_must_agree(tmp_path: Path) -> None:
    (tmp_path / "node-1").mkdir()
    (tmp_path / "node-1" / "meta.properties").write_text(
        "version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n"
    )
    assert supervisor.existing_cluster_id(tmp_path) == "AAAAAAAAAAAAAAAAAAAAAA"
    supervisor.write_property_files(render(tmp_path), tmp_path, rewrite=False)
    with pytest.raises(supervisor.DevClusterError, match="more than one cluster id"):
        supervisor.existing_cluster_id(tmp_path)


def test_a_second_run_renders_with_the_kept_cluster_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through main: files from a first run, then different options are refused (exit 2)
    without touching them, and nothing is started."""
    supervisor.write_property_files(render(tmp_path), tmp_path, rewrite=False)
    before = (tmp_path / "node-1.properties").read_text()
    argv = ["--brokers", "3", "--data-dir", str(tmp_path), "--base-port", str(free_port())]
    assert cli.main([*argv, "--no-metrics"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "--rewrite" in err and "node-1.properties" in err
    assert (tmp_path / "node-1.properties").read_text() == before
    assert not list(tmp_path.glob("*.log"))


# A stand-in node: listens on the client port of its property file, then does what it is
# told (exit with a status after printing, or ignore SIGTERM).
NODE = """
import re, signal, socket, sys, time
port = int(re.search(r"PLAINTEXT://[^:]+:(\\d+)", open(sys.argv[-1]).read()).group(1))
mode = sys.argv[1]
if mode == "crash":
    print("about to fail: disk on fire", flush=True)
    sys.exit(3)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
server = socket.create_server(("localhost", port))
print("listening", flush=True)
time.sleep(60)
"""


def one_node(tmp_path: Path) -> list[rendering.DevNode]:
    nodes = rendering.render_dev_cluster(
        1,
        tmp_path,
        free_port(),
        cluster_id="vvs1Jws4TsmeVfSExpQQow",
        controller_base_port=free_port(),
        metrics_base_port=None,
    )
    supervisor.write_property_files(nodes, tmp_path, rewrite=False)
    return nodes


def test_a_node_that_exits_is_reported_with_its_log_and_restart_command(tmp_path: Path) -> None:
    out = io.StringIO()
    cluster = supervisor.DevCluster(
        one_node(tmp_path), tmp_path, command=[sys.executable, "-c", NODE, "crash"], out=out
    )
    cluster.start()
    cluster.supervise(ready_timeout=DEADLINE_S)  # returns once no node is left
    text = out.getvalue()
    assert "node 1 exited unexpectedly with status 3" in text
    assert "about to fail: disk on fire" in text
    assert f"{tmp_path / 'node-1.properties'} >> {tmp_path / 'node-1.log'} 2>&1" in text
    assert "every node has exited" in text
    assert cluster.unexpected_exits == 1
    assert cluster.stop(timeout=1) == {1: 3}


def test_a_node_that_ignores_sigterm_is_killed_at_the_deadline(tmp_path: Path) -> None:
    out = io.StringIO()
    cluster = supervisor.DevCluster(
        one_node(tmp_path), tmp_path, command=[sys.executable, "-c", NODE, "stubborn"], out=out
    )
    cluster.start()
    watcher = threading.Thread(target=cluster.supervise, args=(DEADLINE_S,))
    watcher.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while "cluster ready" not in out.getvalue():
            assert time.monotonic() < deadline, out.getvalue()
            time.sleep(0.05)
    finally:
        cluster.request_stop(signal.SIGINT)
        watcher.join(DEADLINE_S)
    statuses = cluster.stop(timeout=0.5)
    assert statuses == {1: -signal.SIGKILL}
    text = out.getvalue()
    assert "SIGKILL after 0 s: node 1" in text or "SIGKILL after 1 s: node 1" in text
    assert "node 1: exited with signal SIGKILL (killed)" in text
    log = (tmp_path / "node-1.log").read_text()
    assert log.startswith(supervisor.START_HEADER) and "listening" in log
