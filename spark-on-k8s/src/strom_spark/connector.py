"""Where Spark's Kafka connector (spark-sql-kafka-0-10 and the jars it needs beyond
pyspark's own) is found, for spark-submit's ``--jars``.

In the Spark image the jars sit in Spark's own ``jars/`` folder (baked in by the
Dockerfile), so nothing needs passing; in a source checkout ``make spark-jars`` resolves
them into ``spark-on-k8s/lib/``; ``STROM_SPARK_JARS`` (a folder, or jars separated by
commas) overrides both.
"""

from __future__ import annotations

import os
from pathlib import Path

JARS_ENV = "STROM_SPARK_JARS"
# spark-on-k8s/lib/, beside this package's src/ folder (an editable install or a checkout)
SOURCE_TREE_JARS = Path(__file__).resolve().parents[2] / "lib"


class ConnectorMissing(RuntimeError):
    """No connector jar where one was asked for."""


def connector_jars(environ: dict[str, str] | None = None) -> list[Path]:
    """The connector jars to pass with ``--jars``; empty when Spark already has them."""
    env = os.environ if environ is None else environ
    configured = env.get(JARS_ENV, "").strip()
    if configured:
        return _jars_named(configured)
    if SOURCE_TREE_JARS.is_dir():
        return sorted(SOURCE_TREE_JARS.glob("*.jar"))
    return []


def _jars_named(configured: str) -> list[Path]:
    if "," not in configured and Path(configured).is_dir():
        jars = sorted(Path(configured).glob("*.jar"))
    else:
        jars = [Path(part) for part in configured.split(",") if part.strip()]
    missing = [str(jar) for jar in jars if not jar.is_file()]
    if missing or not jars:
        raise ConnectorMissing(
            f"{JARS_ENV}={configured!r}: no connector jar there"
            + (f" ({', '.join(missing)} missing)" if missing else "")
            + "; `make spark-jars` resolves them into spark-on-k8s/lib/"
        )
    return jars
