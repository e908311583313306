"""What the kafka-*.sh style tools share: connection options, key=value arguments,
`--command-config` files, Java-style `%-Ns` table columns, and one way to end with an error.

Every tool's `main(argv)` runs through `run()`: a UsageError or a ClientError becomes one
line on stderr and a non-zero exit status (never a traceback), Ctrl-C exits 130, and a
closed stdout (`| head`) ends the tool quietly.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from strom.client import errors
from strom.config import definitions as config_definitions
from strom.config import loading as config_loading

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """The command line is wrong; the message says how."""


def version() -> str:
    try:
        return importlib.metadata.version("strom")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def parser(prog: str, description: str) -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(prog=prog, description=description, allow_abbrev=False)
    out.add_argument("--version", action="version", version=f"{prog} (Strom) {version()}")
    return out


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="REQUIRED: the broker(s) to connect to",
    )
    # Kafka 3+ dropped --zookeeper; old tutorials still use it: refused with a hint.
    parser.add_argument("--zookeeper", help=argparse.SUPPRESS)


def add_command_config(parser: argparse.ArgumentParser, *aliases: str, what: str) -> None:
    parser.add_argument(
        "--command-config",
        *aliases,
        dest="command_config",
        metavar="FILE",
        help=f"a properties file of {what} client configs (e.g. security settings)",
    )


def require_bootstrap(args: argparse.Namespace, *alternatives: str) -> str:
    """The bootstrap servers given (--bootstrap-server or one of its alternatives)."""
    if getattr(args, "zookeeper", None):
        raise UsageError(
            "--zookeeper is not supported: Strom (like Kafka 3+) has no ZooKeeper; "
            "use --bootstrap-server HOST:PORT"
        )
    for name in ("bootstrap_server", *alternatives):
        value = getattr(args, name, None)
        if value:
            return str(value)
    raise UsageError("Missing required argument: --bootstrap-server HOST:PORT")


def key_value(text: str) -> tuple[str, str]:
    """argparse type for k=v (the value may contain '=')."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


def properties_file(path: str | None) -> dict[str, str]:
    """A Java .properties file (empty when no path)."""
    if not path:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        return config_loading.parse_properties(text, source=path)
    except config_definitions.ConfigError as e:
        raise UsageError(str(e)) from None


def merged(file: str | None, pairs: Iterable[tuple[str, str]] | None) -> dict[str, str]:
    """Properties from a file, then k=v pairs over them (Kafka's precedence)."""
    out = properties_file(file)
    out.update(dict(pairs or ()))
    return out


def left(text: object, width: int) -> str:
    """Java's %-Ns: `text` padded with spaces to at least `width`."""
    return f"{text!s:<{width}}"


def fail(message: str, code: int = EXIT_ERROR) -> int:
    print(message, file=sys.stderr)
    return code


def run(body: Callable[[], int], *, error_prefix: str = "Error: ") -> int:
    """Run a tool's body, turning expected failures into one line on stderr."""
    try:
        return body()
    except UsageError as e:
        return fail(f"{error_prefix}{e}", EXIT_USAGE)
    except errors.ClientError as e:
        return fail(f"{error_prefix}{e}")
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, without Python's complaint at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_ERROR


def exclusive(args: argparse.Namespace, names: Sequence[str], *, required: bool) -> str | None:
    """The one of `names` (argparse dests) that is set; UsageError if several are, or if
    none is and one is required."""
    given = [n for n in names if getattr(args, n, None) not in (None, False, [])]
    flags = ", ".join("--" + n.replace("_", "-") for n in names)
    if len(given) > 1:
        raise UsageError(f"Command must include exactly one action: {flags}")
    if not given:
        if required:
            raise UsageError(f"Command must include exactly one action: {flags}")
        return None
    return given[0]
