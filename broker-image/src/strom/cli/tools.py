"""The console-script entry points of the client tools (strom-topics, ...).

The tools run on strom.client, which needs the `client` extra (confluent-kafka). Each
entry point imports its tool only when called, so a missing extra ends in one line naming
`pip install 'strom[client]'` and exit status 1, not an ImportError traceback (this
module imports nothing of strom.client, not even through strom.cli.options).
strom-server is not here: the broker never imports the client.
"""

from __future__ import annotations

import importlib
import sys

EXIT_ERROR = 1  # options.EXIT_ERROR, which cannot be imported without the extra


def _run(module: str) -> int:
    try:
        tool = importlib.import_module(f"strom.cli.{module}")
    except ModuleNotFoundError as e:
        if e.name is None or e.name.partition(".")[0] != "confluent_kafka":
            raise
        prog = "strom-" + module.replace("_", "-")
        print(
            f"{prog}: the Kafka client library is not installed "
            "(confluent-kafka): pip install 'strom[client]'",
            file=sys.stderr,
        )
        return EXIT_ERROR
    status: int = tool.main()
    return status


def topics() -> int:
    return _run("topics")


def console_producer() -> int:
    return _run("console_producer")


def console_consumer() -> int:
    return _run("console_consumer")


def consumer_groups() -> int:
    return _run("consumer_groups")


def configs() -> int:
    return _run("configs")
