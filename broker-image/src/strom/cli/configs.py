"""strom-configs: kafka-configs.sh's --describe and --alter for topics and brokers.

    strom-configs --bootstrap-server HOST:PORT --describe --entity-type topics --entity-name T
    strom-configs --bootstrap-server HOST:PORT --describe --broker 1 --all
    strom-configs --bootstrap-server HOST:PORT --alter --entity-type topics --entity-name T \
        --add-config retention.ms=1000,cleanup.policy=[compact,delete] --delete-config segment.ms
    strom-configs --bootstrap-server HOST:PORT --alter --entity-type brokers --entity-default \
        --add-config log.retention.ms=86400000

Prints, as Kafka's ConfigCommand does, "Dynamic configs for topic T are:" (or "All configs
..." with --all) and one line per config, sorted by name, with its synonyms in precedence
order: `  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000,
DEFAULT_CONFIG:log.retention.hours=168}`. `--alter` uses IncrementalAlterConfigs (SET for
--add-config, DELETE for --delete-config) and prints "Completed updating config for topic T."
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence

from strom.cli import options
from strom.client import admin as client_admin
from strom.client import errors, results

UsageError = options.UsageError
ENTITY_TYPES = ("topics", "brokers")
# What a describe without --all shows: the configs set dynamically on that entity.
DYNAMIC_SOURCE = {
    "topics": "DYNAMIC_TOPIC_CONFIG",
    "brokers": "DYNAMIC_BROKER_CONFIG",
    "broker-defaults": "DYNAMIC_DEFAULT_BROKER_CONFIG",
}


def build_parser() -> argparse.ArgumentParser:
    parser = options.parser(
        "strom-configs",
        "Describe and alter the configs of topics and brokers (Kafka's kafka-configs.sh, "
        "for Strom).",
    )
    options.add_bootstrap(parser)
    options.add_command_config(parser, what="admin")
    parser.add_argument("--describe", action="store_true", help="List configs of the entity.")
    parser.add_argument("--alter", action="store_true", help="Alter the configs of the entity.")
    parser.add_argument(
        "--add-config",
        metavar="K=V,...",
        help="Configs to set: k1=v1,k2=[v1,v2,v3] (square brackets group a list value).",
    )
    parser.add_argument(
        "--delete-config", metavar="K,...", help="Configs to remove (back to their default)."
    )
    parser.add_argument("--entity-type", choices=ENTITY_TYPES, help="topics or brokers")
    parser.add_argument(
        "--entity-name", help="The topic name or broker id (all of them when left out)."
    )
    parser.add_argument(
        "--entity-default",
        action="store_true",
        help="The cluster-wide broker defaults (with --entity-type brokers).",
    )
    parser.add_argument("--topic", help="Same as --entity-type topics --entity-name TOPIC.")
    parser.add_argument("--broker", help="Same as --entity-type brokers --entity-name ID.")
    parser.add_argument(
        "--broker-defaults",
        action="store_true",
        help="Same as --entity-type brokers --entity-default.",
    )
    parser.add_argument(
        "--all", action="store_true", help="All configs, not only the dynamically set ones."
    )
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    args.bootstrap = options.require_bootstrap(args)
    if args.alter == args.describe:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    args.set_configs = parse_add_config(args.add_config or "")
    args.delete_configs = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if args.alter and not (args.set_configs or args.delete_configs):
        raise UsageError("--alter needs --add-config or --delete-config")
    if args.describe and (args.set_configs or args.delete_configs):
        raise UsageError("--add-config and --delete-config go with --alter")
    shorthand = [
        ("topics", args.topic, False),
        ("brokers", args.broker, False),
        ("brokers", None, True) if args.broker_defaults else None,
    ]
    given = [s for s in shorthand if s is not None and (s[1] or s[2])]
    if given and (args.entity_type or args.entity_name or args.entity_default):
        raise UsageError(
            "--topic/--broker/--broker-defaults replace --entity-type and --entity-name"
        )
    if len(given) > 1:
        raise UsageError("give only one of --topic, --broker, --broker-defaults")
    if given:
        args.entity_type, args.entity_name, args.entity_default = given[0]
    if not args.entity_type:
        raise UsageError("--entity-type (topics or brokers) must be specified")
    if args.entity_default and args.entity_type != "brokers":
        raise UsageError("--entity-default is only supported with --entity-type brokers")
    if args.entity_default and args.entity_name:
        raise UsageError("--entity-name and --entity-default cannot be used together")
    if args.entity_type == "brokers" and args.entity_name and not args.entity_name.isdigit():
        raise UsageError(
            f"The entity name for brokers must be a broker id, got {args.entity_name!r}"
        )
    if args.alter and not (args.entity_name or args.entity_default):
        raise UsageError("--alter needs --entity-name (or --entity-default for brokers)")
    return args


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's --add-config syntax: k1=v1,k2=[a,b]; brackets keep commas in one value."""
    out: dict[str, str] = {}
    position = 0
    while position < len(text):
        equals = text.find("=", position)
        if equals < 0:
            raise UsageError(f"--add-config: expected key=value in {text[position:]!r}")
        key = text[position:equals].strip()
        if text.startswith("[", equals + 1):
            close = text.find("]", equals + 1)
            if close < 0:
                raise UsageError(f"--add-config: unclosed [ in the value of {key}")
            value = text[equals + 2 : close]
            position = close + 1
        else:
            comma = text.find(",", equals + 1)
            end = len(text) if comma < 0 else comma
            value = text[equals + 1 : end]
            position = end
        if not key:
            raise UsageError("--add-config: a config name is empty")
        out[key] = value
        if text.startswith(",", position):
            position += 1
    return out


def describe_lines(
    heading: str, entries: Iterable[results.ConfigEntry], *, shown_source: str | None
) -> list[str]:
    """The heading and one line per config (only those from `shown_source` unless None)."""
    lines = [heading]
    chosen = [e for e in entries if shown_source is None or e.source == shown_source]
    for entry in sorted(chosen, key=lambda e: e.name):
        synonyms = ", ".join(f"{s.source}:{s.name}={_text(s.value)}" for s in entry.synonyms)
        lines.append(
            f"  {entry.name}={_text(entry.value)} sensitive={str(entry.sensitive).lower()} "
            f"synonyms={{{synonyms}}}"
        )
    return lines


def _text(value: str | None) -> str:
    return "null" if value is None else value


def _body(argv: Sequence[str] | None) -> int:
    args = parse(argv)
    admin = client_admin.Admin(args.bootstrap, options.properties_file(args.command_config))
    if args.alter:
        kind = "topic" if args.entity_type == "topics" else "broker"
        if args.entity_default:  # the broker resource "": every broker's default
            admin.alter_configs(kind, "", args.set_configs, args.delete_configs)
            print("Completed updating default config for brokers in the cluster.")
            return 0
        admin.alter_configs(kind, args.entity_name, args.set_configs, args.delete_configs)
        print(f"Completed updating config for {kind} {args.entity_name}.")
        return 0
    adjective = "All" if args.all else "Dynamic"
    if args.entity_type == "topics":
        if args.entity_name:
            admin.describe_topics([args.entity_name])  # NotFoundError names a missing topic
            names = [args.entity_name]
        else:
            names = admin.topic_names()
        configs = admin.topic_configs(names)
        source = None if args.all else DYNAMIC_SOURCE["topics"]
        for name in names:
            heading = f"{adjective} configs for topic {name} are:"
            for line in describe_lines(heading, configs[name], shown_source=source):
                print(line)
    elif args.entity_default:
        heading = "Default configs for brokers in the cluster are:"
        for line in describe_lines(heading, admin.broker_configs(""), shown_source=None):
            print(line)
    else:
        ids = [args.entity_name] if args.entity_name else [str(n.id) for n in admin.cluster().nodes]
        source = None if args.all else DYNAMIC_SOURCE["brokers"]
        for broker in ids:
            heading = f"{adjective} configs for broker {broker} are:"
            try:
                entries = admin.broker_configs(broker)
            except errors.NotFoundError:
                # Kafka's tool answers an unknown broker id so, and exits 0
                print(
                    heading
                    if args.all
                    else f"The broker '{broker}' doesn't exist and doesn't have dynamic config."
                )
                continue
            for line in describe_lines(heading, entries, shown_source=source):
                print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return options.run(lambda: _body(argv))


if __name__ == "__main__":
    sys.exit(main())
