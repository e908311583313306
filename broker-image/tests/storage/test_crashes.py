"""Real process deaths and write failures, in child processes so limits and kills stay there."""

import subprocess
import sys
import textwrap

from strom.storage import log_config

APPEND_PRELUDE = """
import os, resource, signal, sys
from pathlib import Path
from strom.records import batches
from strom.storage import log_config, partition_log

log = partition_log.PartitionLog.open(Path(sys.argv[1]), log_config.LogConfig())

def append(value):
    data = bytearray(batches.build_batch([(None, value, [], 1)]))
    headers = batches.validate_produce_batches(memoryview(data), 1 << 30)
    return log.append(data, headers, 0, 1)
"""


def run_child(script: str, directory) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", APPEND_PRELUDE + textwrap.dedent(script), str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_appends_survive_sigkill(harness) -> None:
    child = run_child(
        """
        for number in range(50):
            append(b"%d" % number)
        os.kill(os.getpid(), signal.SIGKILL)
        """,
        harness.directory,
    )
    assert child.returncode == -9, child.stderr
    log = harness.open()
    assert log.log_end_offset == 50
    assert [r.value for r in harness.decoded(log.read(0, 1 << 20, 50))] == [
        b"%d" % n for n in range(50)
    ]


def test_a_failed_write_leaves_no_partial_batch(harness) -> None:
    child = run_child(
        """
        append(b"first")
        size = log.size_bytes
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, resource.RLIM_INFINITY))
        try:
            append(b"x" * 1000)
        except OSError as exc:
            print("refused", exc.errno)
        assert log.size_bytes == size, log.size_bytes
        assert os.path.getsize(sorted(Path(sys.argv[1]).glob("*.log"))[0]) == size
        assert log.log_end_offset == 1
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
        assert append(b"second").base_offset == 1
        log.close()
        """,
        harness.directory,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.startswith("refused")
    log = harness.open(log_config.LogConfig())
    assert [r.value for r in harness.decoded(log.read(0, 1 << 20, 2))] == [b"first", b"second"]
