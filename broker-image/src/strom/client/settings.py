"""Client properties: Kafka's Java-client names in, librdkafka settings out.

Users hand the tools the properties they would give Kafka's Java tools (`--command-config
client.properties`, `--producer-property acks=all`). librdkafka understands most of them
under the same names; this module translates the ones it spells differently, drops the
Java-only ones that change nothing here (serializer classes, ...), and refuses the ones
it cannot express, naming the property.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping

from strom.client import errors

LIBRDKAFKA_LOGGER = "strom.client.librdkafka"

# Java client properties without a librdkafka counterpart that a Strom tool can ignore.
IGNORED = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "header.deserializer",
        "max.block.ms",
        "default.api.timeout.ms",
        "max.poll.records",
        "interceptor.classes",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "enable.metrics.push",
        "client.dns.lookup",
        "security.providers",
        "ssl.truststore.password",  # PEM trust stores have no password
        "ssl.truststore.type",
        "ssl.keystore.type",
    }
)

# Java assignor class names (or their simple names) -> librdkafka assignor names.
ASSIGNORS = {
    "RangeAssignor": "range",
    "RoundRobinAssignor": "roundrobin",
    "CooperativeStickyAssignor": "cooperative-sticky",
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
}

_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)(?P<options>.*?);?\s*$",
    re.S,
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')


def librdkafka_settings(bootstrap: str | None, properties: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings for `properties` (Java names), with `bootstrap` (when given)
    replacing any `bootstrap.servers` among them."""
    out: dict[str, str] = {}
    items = dict(properties)
    truststore_type = items.get("ssl.truststore.type", "JKS").upper()  # Java's default
    keystore_type = items.get("ssl.keystore.type", "JKS").upper()
    for key, value in items.items():
        if key in IGNORED:
            continue
        if key == "buffer.memory":
            out["queue.buffering.max.kbytes"] = str(max(1, math.ceil(_integer(key, value) / 1024)))
        elif key in ("send.buffer.bytes", "receive.buffer.bytes"):
            size = _integer(key, value)
            out[f"socket.{key}"] = str(max(size, 0))  # Java's -1 (OS default) is librdkafka's 0
        elif key == "security.protocol":
            out[key] = value.lower()
        elif key == "sasl.jaas.config":
            out.update(jaas_credentials(value))
        elif key == "partition.assignment.strategy":
            out[key] = ",".join(_assignor(name) for name in value.split(",") if name.strip())
        elif key == "ssl.truststore.location":
            if truststore_type != "PEM":
                raise errors.ConfigurationError(
                    f"ssl.truststore.type={truststore_type} is not supported: librdkafka reads "
                    "PEM trust stores only (convert it, and set ssl.truststore.type=PEM)"
                )
            out["ssl.ca.location"] = value
        elif key == "ssl.keystore.location":
            if keystore_type == "PEM":
                out["ssl.certificate.location"] = value
                out["ssl.key.location"] = value
            elif keystore_type == "PKCS12":
                out[key] = value
            else:
                raise errors.ConfigurationError(
                    f"ssl.keystore.type={keystore_type} is not supported: use PKCS12 or PEM"
                )
        elif key == "ssl.keystore.password" and keystore_type == "PEM":
            out["ssl.key.password"] = value
        else:
            out[key] = value
    if bootstrap:
        out["bootstrap.servers"] = bootstrap
    if not out.get("bootstrap.servers"):
        raise errors.ConfigurationError("no bootstrap server: give --bootstrap-server HOST:PORT")
    return out


def jaas_credentials(text: str) -> dict[str, str]:
    """sasl.username / sasl.password from a `sasl.jaas.config` of the PLAIN or SCRAM
    login modules (the only ones with a username and password)."""
    match = _JAAS.match(text)
    if match is None:
        raise errors.ConfigurationError(f"sasl.jaas.config: cannot parse {text!r}")
    module = match.group("module").rsplit(".", 1)[-1]
    if module not in ("PlainLoginModule", "ScramLoginModule"):
        raise errors.ConfigurationError(
            f"sasl.jaas.config: {module} is not supported (PlainLoginModule, ScramLoginModule)"
        )
    options = {
        name: bare or re.sub(r"\\(.)", r"\1", quoted)
        for name, quoted, bare in _JAAS_OPTION.findall(match.group("options"))
    }
    missing = [name for name in ("username", "password") if name not in options]
    if missing:
        raise errors.ConfigurationError(f"sasl.jaas.config: no {' or '.join(missing)}")
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


def quiet_logger() -> logging.Logger:
    """The logger librdkafka's own log lines go to (served on poll). Silent unless a tool
    or test lowers its level: the tools report failures themselves, in one line."""
    logger = logging.getLogger(LIBRDKAFKA_LOGGER)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.CRITICAL)
    return logger


def _assignor(name: str) -> str:
    simple = name.strip().rsplit(".", 1)[-1]
    if simple not in ASSIGNORS:
        raise errors.ConfigurationError(
            f"partition.assignment.strategy: {name.strip()} is not supported "
            "(range, roundrobin, cooperative-sticky)"
        )
    return ASSIGNORS[simple]


def _integer(key: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise errors.ConfigurationError(f"{key}: expected an integer, got {value!r}") from None
