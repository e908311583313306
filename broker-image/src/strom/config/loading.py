"""Load the broker configuration from a properties file, the environment and overrides.

Precedence, lowest first:

1. the defaults in `definitions.py`;
2. the Java properties file given to `strom-server` (Kafka's `server.properties`);
3. `STROM_<KEY>` environment variables: the key upper-cased with dots as
   underscores, e.g. `STROM_LOG_DIRS` sets `log.dirs`. They sit above the file so a
   container can adjust one baked-in file per pod;
4. `--override key=value` arguments, which win as they do for Kafka's `kafka-server-start.sh`.

Every key must be known: a typo is an error naming the key (with the closest known
name), never a silently ignored setting. Every Kafka 4.x broker key is known: those
Strom does not use (num.network.threads, offsets.commit.timeout.ms, ...) are definitions
marked `ignored` (kafka_broker_configs.py). The ZooKeeper-era keys Kafka 4 removed
(port, zookeeper.connect, ...; removed_keys.py) are set aside by `BrokerConfig` with one
warning. The only `STROM_*` variables that are not configs are the ones Kubernetes
injects for a Service whose name starts with "strom" (`STROM_SERVICE_HOST`,
`STROM_BOOTSTRAP_PORT_9092_TCP`, ...; see `is_kubernetes_service_variable`), since a
cluster named "strom" gets them in every pod.

The properties file is read as UTF-8 (Java reads ISO-8859-1; `\\uXXXX` escapes work in
both).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from strom.config import broker as broker_module
from strom.config import definitions

ENV_PREFIX = "STROM_"


def env_var_name(key: str) -> str:
    """`log.dirs` -> `STROM_LOG_DIRS`."""
    return ENV_PREFIX + key.upper().replace(".", "_")


_KEY_OF_ENV_VAR = {env_var_name(key): key for key in definitions.BROKER_CONFIGS}
assert len(_KEY_OF_ENV_VAR) == len(definitions.BROKER_CONFIGS), (
    "two keys share an environment variable"
)

# Kubernetes service links: <SVC>_SERVICE_HOST, <SVC>_SERVICE_PORT[_<PORTNAME>],
# <SVC>_PORT, <SVC>_PORT_<N>_<PROTO>[_PROTO|_PORT|_ADDR].
_SERVICE_LINK = re.compile(
    r"STROM(_[A-Z0-9_]+?)?_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?"
    r"|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)"
)


def is_kubernetes_service_variable(name: str) -> bool:
    return _SERVICE_LINK.fullmatch(name) is not None


def load_broker_config(
    config_file: Path | None = None,
    overrides: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> broker_module.BrokerConfig:
    """Merge the sources (see the module docstring) and validate; raise ConfigError."""
    settings: dict[str, str] = {}
    origins: dict[str, str] = {}

    if config_file is not None:
        try:
            text = config_file.read_text(encoding="utf-8")
        except OSError as error:
            raise definitions.ConfigError(
                f"cannot read config file {config_file}: {error.strerror or error}"
            ) from None
        except UnicodeDecodeError as error:
            raise definitions.ConfigError(
                f"config file {config_file} is not UTF-8: {error}"
            ) from None
        for key, value in parse_properties(text, source=str(config_file)).items():
            settings[key], origins[key] = value, str(config_file)

    for name, value in sorted((os.environ if environ is None else environ).items()):
        if not name.startswith(ENV_PREFIX) or is_kubernetes_service_variable(name):
            continue
        env_key = _KEY_OF_ENV_VAR.get(name)
        if env_key is None:
            match = difflib.get_close_matches(name, list(_KEY_OF_ENV_VAR), n=1, cutoff=0.75)
            hint = f" (did you mean {match[0]}?)" if match else ""
            raise definitions.ConfigError(
                f"environment variable {name}: unknown configuration key"
                f" {name[len(ENV_PREFIX) :].lower().replace('_', '.')!r}{hint}",
                name,
            )
        settings[env_key], origins[env_key] = value, f"environment variable {name}"

    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise definitions.ConfigError(f"--override {item!r}: expected key=value")
        settings[key.strip()], origins[key.strip()] = value, "--override"

    return broker_module.BrokerConfig(settings, origins=origins)


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, *, source: str = "properties") -> dict[str, str]:
    """Parse Java `.properties` text the way `java.util.Properties.load` does.

    Comments start with # or ! (first non-blank character); the key ends at the first
    unescaped `=`, `:` or blank; a line ending in an odd number of backslashes goes on
    on the next line (whose leading blanks are dropped); `\\t \\n \\r \\f \\uXXXX`
    escapes, and a backslash before any other character keeps that character. A later
    duplicate key wins."""
    result: dict[str, str] = {}
    lines = re.split(r"\r\n|\r|\n", text)
    index = 0
    while index < len(lines):
        line_number = index + 1
        line = lines[index].lstrip(" \t\f")
        index += 1
        if not line or line[0] in "#!":
            continue  # comments don't continue, even when they end in a backslash
        while _continues(line) and index < len(lines):
            line = line[:-1] + lines[index].lstrip(" \t\f")
            index += 1
        if _continues(line):
            line = line[:-1]  # Java drops a dangling backslash at end of input
        key, value = _split_key_value(line)
        try:
            result[_unescape(key)] = _unescape(value)
        except ValueError as error:
            raise definitions.ConfigError(f"{source}, line {line_number}: {error}") from None
    return result


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    position = 0
    while position < len(line):
        char = line[position]
        if char == "\\":
            position += 2
            continue
        if char in "=: \t\f":
            break
        position += 1
    key = line[:position]
    rest = line[position:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char != "\\" or position + 1 == len(text):
            out.append(char)
            position += 1
            continue
        escaped = text[position + 1]
        if escaped == "u":
            digits = text[position + 2 : position + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ValueError(f"malformed \\uXXXX escape {text[position : position + 6]!r}")
            out.append(chr(int(digits, 16)))
            position += 6
        else:
            out.append(_ESCAPES.get(escaped, escaped))
            position += 2
    return "".join(out)
