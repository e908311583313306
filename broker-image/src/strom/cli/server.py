"""strom-server [CONFIG_FILE] [--override key=value ...]: run one broker until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

from strom.cluster import metadata_log, migration, topics
from strom.config import broker as broker_config
from strom.config import definitions as config_definitions
from strom.config import loading as config_loading
from strom.server import broker as broker_module
from strom.storage import dir_lock

log = logging.getLogger("strom.server")

EXIT_CONFIG_ERROR = 2
EXIT_STARTUP_FAILED = 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="strom-server",
        description="Run a Strom broker. Configuration uses Kafka's property names: "
        "defaults < CONFIG_FILE < STROM_<KEY> environment variables < --override.",
    )
    parser.add_argument("config_file", nargs="?", type=Path, help="a server.properties file")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one property, e.g. --override log.dirs=/tmp/strom (repeatable)",
    )
    return parser


def _configure_logging() -> None:
    level = os.environ.get("STROM_LOG_LEVEL_ROOT", "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
        stream=sys.stderr,
    )


async def _serve(config: broker_config.BrokerConfig) -> None:
    broker = broker_module.Broker(config)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    # A node waits in start() for the controller quorum (a copy of server.properties
    # started before its first node, say): Ctrl-C or SIGTERM must stop it there too.
    starting = asyncio.ensure_future(broker.start())
    signalled = asyncio.ensure_future(stopping.wait())
    await asyncio.wait((starting, signalled), return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        log.info("shutting down before the broker started")
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
    else:
        starting.result()  # a failed start raises here
        await signalled
        log.info("shutting down")
    await broker.stop()
    _ignore_later_sigterm(loop)


def _ignore_later_sigterm(loop: asyncio.AbstractEventLoop) -> None:
    """A SIGTERM repeated during the stop (a script's second `kill`, a test's) must not
    kill the stopped broker in its last steps: closing the loop would give SIGTERM back
    its default action, and the process would end with -15 after "stopped cleanly". Kafka
    ignores it too once its shutdown hook runs. Blocked while swapped so none lands between."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _unsupported_roles(quorum: broker_config.QuorumSettings) -> str | None:
    """Why Strom cannot run this node's roles yet, or None."""
    if not quorum.is_broker:
        return (
            "process.roles=controller: a controller-only node (Kafka's split mode) is not"
            " supported yet; run controllers with process.roles=broker,controller"
        )
    if not quorum.is_controller and not quorum.static_voters:
        return (
            "process.roles=broker: a broker-only node finds the quorum through"
            " controller.quorum.voters; controller.quorum.bootstrap.servers alone is not"
            " supported yet"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    _configure_logging()
    try:
        config = config_loading.load_broker_config(
            arguments.config_file, arguments.override, os.environ
        )
    except (config_definitions.ConfigError, OSError) as error:
        print(f"strom-server: configuration error: {error}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    for warning in config.warnings():
        log.warning("%s", warning)
    quorum = config.quorum
    refusal = _unsupported_roles(quorum)
    if refusal is not None:
        print(f"strom-server: configuration error: {refusal}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    try:
        # Before anything reads the directories: a second broker on a directory in use
        # must not run recovery over the live broker's files.
        locks = dir_lock.lock_log_dirs(config.log_dirs)
    except dir_lock.LogDirError as error:
        print(f"strom-server: failed to start: {error}", file=sys.stderr)
        return EXIT_STARTUP_FAILED
    try:
        asyncio.run(_serve(config))
    except (
        OSError,
        topics.MetadataError,
        metadata_log.CorruptMetadataLogError,
        migration.MigrationError,
    ) as error:
        print(f"strom-server: failed to start: {error}", file=sys.stderr)
        return EXIT_STARTUP_FAILED
    finally:
        locks.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
