"""`kafka-server-start.sh` and `kafka-server-stop.sh` for Strom: a walk-through pastes as is.

    kafka-server-start.sh [-daemon] config/server.properties [--override key=value ...]
    kafka-server-stop.sh

Start runs `strom-server` with the same arguments; `-daemon` runs it in the background as
Kafka's script does, its output appended to `$LOG_DIR/<file name>.out` (LOG_DIR defaults
to ./logs, Kafka's `logs` directory) and its process id printed. Stop sends SIGTERM to
every strom-server process of this user (Kafka's script stops every Kafka server on the
machine alike), or says there is none and exits 1. Kafka's own client tools
(kafka-topics.sh, ...) are another matter: `make kafka-tools`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from strom.cli import server

USAGE = "USAGE: kafka-server-start.sh [-daemon] server.properties [--override property=value]*"


def start(argv: list[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    daemon = "-daemon" in arguments
    if daemon:
        arguments.remove("-daemon")
    if not arguments or arguments[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 1
    if not daemon:
        return server.main(arguments)
    log_dir = Path(os.environ.get("LOG_DIR", "logs"))
    log_dir.mkdir(parents=True, exist_ok=True)
    out = log_dir / f"{Path(arguments[0]).stem}.out"
    with out.open("ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "strom.cli.server", *arguments],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            start_new_session=True,
        )
    print(f"strom-server {' '.join(arguments)} runs in the background (pid {process.pid});")
    print(f"its output goes to {out}; kafka-server-stop.sh stops it")
    return 0


def _is_strom_server(command_line: list[str]) -> bool:
    """[python, .../strom-server or .../kafka-server-start.sh, ...] (a script runs under
    its interpreter), or [python, -m, strom.cli.server, ...] (-daemon)."""
    if len(command_line) < 2 or not Path(command_line[0]).name.startswith("python"):
        return False
    return Path(command_line[1]).name in ("strom-server", "kafka-server-start.sh") or command_line[
        1:3
    ] == ["-m", "strom.cli.server"]


def strom_server_pids() -> list[int]:
    """This user's strom-server processes (started by strom-server, kafka-server-start.sh
    or python -m strom.cli.server), from /proc."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            command_line = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if _is_strom_server(command_line.split("\0")):
            pids.append(int(entry.name))
    return sorted(pids)


def stop(argv: list[str] | None = None) -> int:
    pids = strom_server_pids()
    if not pids:
        print("No kafka server to stop", file=sys.stderr)
        return 1
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        print(f"stopping strom-server (pid {pid})")
    return 0
