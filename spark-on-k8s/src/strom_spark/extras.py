"""The Spark tools need extras the base install lacks: pyspark (the `spark` extra) and, to
produce demo data, confluent-kafka (the `client` extra). A missing one ends the tool with
one line naming the pip command and exit status 1, as the client tools do, not with an
ImportError traceback."""

from __future__ import annotations

import importlib.util
import sys

EXIT_ERROR = 1


def require(prog: str, module: str, what: str, extra: str) -> None:
    """Exit with a line naming ``pip install 'strom[extra]'`` when ``module`` is absent."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        print(
            f"{prog}: {what} is not installed ({module.replace('_', '-')}): "
            f"pip install 'strom[{extra}]'",
            file=sys.stderr,
        )
        sys.exit(EXIT_ERROR)
