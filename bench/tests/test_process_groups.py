import os
import time
from pathlib import Path

from strom_bench import process_groups


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0); it is gone if its state is Z
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split(") ")[1].startswith("Z")


def test_leaving_the_block_kills_the_whole_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    with process_groups.ProcessGroups() as groups:
        proc = groups.spawn(
            ["sh", "-c", f"sleep 30 & echo $! > {pid_file}; wait"], stdout=tmp_path / "out"
        )
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline, "the shell never started its child"
            time.sleep(0.01)
        child = int(pid_file.read_text())
    assert proc.returncode is not None
    deadline = time.monotonic() + 10
    while not _gone(child):
        assert time.monotonic() < deadline, "the grandchild outlived the group kill"
        time.sleep(0.01)


def test_wait_kills_on_timeout_and_returns_the_exit_code(tmp_path: Path) -> None:
    with process_groups.ProcessGroups() as groups:
        slow = groups.spawn(["sleep", "30"], stdout=tmp_path / "slow")
        assert groups.wait(slow, 0.2) is None
        assert slow.returncode is not None
        quick = groups.spawn(["sh", "-c", "exit 3"], stdout=tmp_path / "quick")
        assert groups.wait(quick, 10) == 3


def test_wait_gives_up_when_the_watched_process_dies(tmp_path: Path) -> None:
    with process_groups.ProcessGroups() as groups:
        broker = groups.spawn(["sh", "-c", "exit 0"], stdout=tmp_path / "broker")
        tool = groups.spawn(["sleep", "30"], stdout=tmp_path / "tool")
        try:
            groups.wait(tool, 20, alive=[broker])
        except process_groups.BrokerExited:
            pass
        else:
            raise AssertionError("expected BrokerExited")
        assert tool.returncode is not None


def test_free_port_is_bindable() -> None:
    import socket

    port = process_groups.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
