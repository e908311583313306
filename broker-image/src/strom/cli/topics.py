"""strom-topics: kafka-topics.sh for Strom (create, list, describe, alter, delete).

Same flags and output as Kafka's TopicCommand: `--describe` prints a summary line per topic
(TopicId, PartitionCount, ReplicationFactor, Configs) and a tab-separated line per partition
(Leader, Replicas, Isr, Elr, LastKnownElr); `--topic` is a regular expression except with
`--create`; errors are "Error while executing topic command : ..." and exit status 1.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping, Sequence

from strom.cli import options
from strom.client import admin as client_admin
from strom.client import errors, results

ERROR_PREFIX = "Error while executing topic command : "
ACTIONS = ("list", "describe", "create", "alter", "delete")
MAX_NAME_LENGTH = 249
COLLISION_WARNING = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
    "('_') could collide. To avoid issues it is best to use either, but not both."
)
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")

UsageError = options.UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = options.parser(
        "strom-topics",
        "This tool helps to create, delete, describe, or change a topic "
        "(Kafka's kafka-topics.sh, for Strom).",
    )
    options.add_bootstrap(parser)
    options.add_command_config(parser, what="admin")
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument("--list", action="store_true", help="List all available topics.")
    actions.add_argument(
        "--describe", action="store_true", help="List details for the given topics."
    )
    actions.add_argument("--create", action="store_true", help="Create a new topic.")
    actions.add_argument(
        "--alter", action="store_true", help="Alter the number of partitions of a topic."
    )
    actions.add_argument("--delete", action="store_true", help="Delete a topic.")
    parser.add_argument(
        "--topic",
        help="The topic to create, alter, describe or delete. It also accepts a regular "
        "expression, except for --create.",
    )
    parser.add_argument("--topic-id", help="The topic id to describe.")
    parser.add_argument(
        "--partitions", type=int, help="The number of partitions (created, or after --alter)."
    )
    parser.add_argument(
        "--replication-factor", type=int, help="The replication factor of a new topic."
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="A topic config override for the topic being created (repeatable).",
    )
    parser.add_argument(
        "--replica-assignment",
        metavar="B1:B2,B3:B4,...",
        help="Manual partition-to-broker assignment for the topic being created or altered.",
    )
    parser.add_argument(
        "--if-exists",
        action="store_true",
        help="When altering, deleting or describing, act only if the topic exists.",
    )
    parser.add_argument(
        "--if-not-exists",
        action="store_true",
        help="When creating, do not fail if the topic already exists.",
    )
    parser.add_argument(
        "--exclude-internal",
        action="store_true",
        help="Exclude internal topics when listing or describing.",
    )
    reports = parser.add_argument_group("describe filters")
    reports.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="Only show under-replicated partitions.",
    )
    reports.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="Only show partitions whose leader is not available.",
    )
    reports.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="Only show partitions whose ISR is smaller than min.insync.replicas.",
    )
    reports.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="Only show partitions whose ISR size equals min.insync.replicas.",
    )
    reports.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="Only show topics that have overridden configs.",
    )
    parser.add_argument("--delete-config", help=argparse.SUPPRESS)
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse and check the command line as TopicCommand does (UsageError on misuse)."""
    args = build_parser().parse_args(argv)
    args.action = options.exclusive(args, ACTIONS, required=True)
    args.bootstrap = options.require_bootstrap(args)
    if args.delete_config:
        raise UsageError("--delete-config is not supported (Kafka 4 removed it): use strom-configs")
    action = args.action
    if action in ("create", "alter", "delete") and not args.topic:
        raise UsageError(f"--topic is required with --{action}")
    if args.topic_id and action != "describe":
        raise UsageError("--topic-id is only supported with --describe")
    if args.config and action != "create":
        raise UsageError("--config is only supported with --create (use strom-configs to alter)")
    if args.partitions is not None and action not in ("create", "alter"):
        raise UsageError("--partitions is only supported with --create or --alter")
    if args.replication_factor is not None and action != "create":
        raise UsageError("--replication-factor is only supported with --create")
    if args.replica_assignment and action not in ("create", "alter"):
        raise UsageError("--replica-assignment is only supported with --create or --alter")
    if args.replica_assignment and (args.partitions is not None and action == "create"):
        raise UsageError("--partitions cannot be used with --replica-assignment")
    if args.replica_assignment and args.replication_factor is not None:
        raise UsageError("--replication-factor cannot be used with --replica-assignment")
    if args.if_not_exists and action != "create":
        raise UsageError("--if-not-exists is only supported with --create")
    if args.if_exists and action not in ("alter", "delete", "describe"):
        raise UsageError("--if-exists is only supported with --alter, --delete or --describe")
    if args.exclude_internal and action not in ("list", "describe"):
        raise UsageError("--exclude-internal is only supported with --list or --describe")
    if any(report_flags(args).values()) and action != "describe":
        raise UsageError("the partition and topic filters are only supported with --describe")
    if action == "alter" and args.partitions is None and not args.replica_assignment:
        raise UsageError("--alter needs --partitions (or --replica-assignment)")
    if action == "create":
        validate_topic_name(args.topic)
        if args.partitions is not None and args.partitions < 1:
            raise UsageError("The partitions must be greater than 0")
        if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
            raise UsageError("The replication factor must be between 1 and 32767 inclusive")
    args.configs = topic_configs(args.config)
    args.assignment = (
        replica_assignment(args.replica_assignment) if args.replica_assignment else None
    )
    return args


def report_flags(args: argparse.Namespace) -> dict[str, bool]:
    return {
        "under_replicated": bool(args.under_replicated_partitions),
        "unavailable": bool(args.unavailable_partitions),
        "under_min_isr": bool(args.under_min_isr_partitions),
        "at_min_isr": bool(args.at_min_isr_partitions),
        "overrides": bool(args.topics_with_overrides),
    }


def validate_topic_name(name: str) -> None:
    """Kafka's rules for topic names (org.apache.kafka.common.internals.Topic.validate)."""
    if not name:
        raise UsageError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise UsageError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise UsageError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL_NAME.fullmatch(name):
        raise UsageError(
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def topic_configs(items: Iterable[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                "requirement failed: Invalid topic config: all configs to be added must be "
                'in the format "key=val".'
            )
        out[key.strip()] = value.strip()
    return out


def replica_assignment(text: str) -> list[list[int]]:
    """'1:2,2:3' -> [[1, 2], [2, 3]] (partition by partition, broker ids by ':')."""
    out: list[list[int]] = []
    for index, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.split(":")]
        except ValueError:
            raise UsageError(f"--replica-assignment: bad broker list {part!r}") from None
        if len(set(brokers)) != len(brokers):
            raise UsageError(
                f"Partition replica lists may not contain duplicate entries: {part.strip()}"
            )
        if out and len(brokers) != len(out[0]):
            raise UsageError(f"Partition {index} has different replication factor: {brokers}")
        out.append(brokers)
    return out


def topic_pattern(text: str) -> re.Pattern[str]:
    """The --topic regular expression as Kafka's IncludeList reads it."""
    regex = text.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"^[\"']+", "", regex)
    regex = re.sub(r"[\"']+$", "", regex)
    try:
        return re.compile(regex)
    except re.error as e:
        raise UsageError(f"--topic {text!r} is not a valid regular expression: {e}") from None


def matching(names: Iterable[str], topic: str | None, *, exclude_internal: bool) -> list[str]:
    pattern = topic_pattern(topic) if topic else None
    return sorted(
        name
        for name in names
        if (pattern is None or pattern.fullmatch(name))
        and not (exclude_internal and name.startswith("__"))
    )


# --- output ---------------------------------------------------------------------------


def overridden(configs: Iterable[results.ConfigEntry]) -> list[results.ConfigEntry]:
    """What `Configs:` shows: every config not at its default (Kafka: !isDefault())."""
    return [entry for entry in configs if not entry.is_default]


def topic_line(topic: results.TopicInfo, configs: Iterable[results.ConfigEntry]) -> str:
    shown = ",".join(f"{e.name}={e.value if e.value is not None else 'null'}" for e in configs)
    replication = len(topic.partitions[0].replicas) if topic.partitions else 0
    return (
        f"Topic: {topic.name}\tTopicId: {topic.topic_id}\t"
        f"PartitionCount: {len(topic.partitions)}\tReplicationFactor: {replication}\t"
        f"Configs: {shown}"
    )


def partition_line(topic: str, p: results.PartitionInfo) -> str:
    leader = "none" if p.leader is None else str(p.leader)
    replicas = ",".join(str(b) for b in p.replicas)
    isr = ",".join(str(b) for b in p.isr)
    # Elr/LastKnownElr (KIP-966) come from DescribeTopicPartitions: Strom keeps no eligible
    # leader replicas, so Kafka's tool prints them empty, as it does against a Kafka broker
    # without ELR, and so do we.
    return (
        f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}\t"
        f"Replicas: {replicas}\tIsr: {isr}\tElr: \tLastKnownElr: "
    )


def describe_lines(
    topics: Sequence[results.TopicInfo],
    configs: Mapping[str, Sequence[results.ConfigEntry]],
    reports: Mapping[str, bool],
    live_brokers: Iterable[int],
) -> list[str]:
    """The --describe output, filtered as TopicCommand filters it."""
    live = set(live_brokers)
    partition_filter = (
        reports.get("under_replicated")
        or reports.get("unavailable")
        or reports.get("under_min_isr")
        or reports.get("at_min_isr")
    )
    lines: list[str] = []
    for topic in topics:
        shown = overridden(configs.get(topic.name, ()))
        if not partition_filter and (not reports.get("overrides") or shown):
            lines.append(topic_line(topic, shown))
        if reports.get("overrides"):
            continue
        min_isr = _min_isr(configs.get(topic.name, ()))
        for p in topic.partitions:
            if not partition_filter or _reported(p, reports, live, min_isr):
                lines.append(partition_line(topic.name, p))
    return lines


def _min_isr(configs: Iterable[results.ConfigEntry]) -> int:
    for entry in configs:
        if entry.name == "min.insync.replicas" and entry.value is not None:
            try:
                return int(entry.value)
            except ValueError:
                break
    return 1


def _reported(
    p: results.PartitionInfo, reports: Mapping[str, bool], live: set[int], min_isr: int
) -> bool:
    has_leader = p.leader is not None and p.leader in live
    return bool(
        (reports.get("under_replicated") and len(p.isr) < len(p.replicas))
        or (reports.get("unavailable") and not has_leader)
        or (reports.get("under_min_isr") and (not has_leader or len(p.isr) < min_isr))
        or (reports.get("at_min_isr") and len(p.isr) == min_isr)
    )


# --- actions --------------------------------------------------------------------------


def _existing(admin: client_admin.Admin, args: argparse.Namespace) -> list[str]:
    """Topics that --topic matches; the error Kafka gives when it matches none."""
    names = matching(admin.topic_names(), args.topic, exclude_internal=args.exclude_internal)
    if args.topic and not names and not args.if_exists:
        raise errors.NotFoundError(f"Topic '{args.topic}' does not exist as expected")
    return names


def _list(admin: client_admin.Admin, args: argparse.Namespace) -> None:
    names = admin.topic_names()
    for name in matching(names, args.topic, exclude_internal=args.exclude_internal):
        print(name)


def _describe(admin: client_admin.Admin, args: argparse.Namespace) -> None:
    if args.topic_id:
        names = matching(admin.topic_names(), None, exclude_internal=args.exclude_internal)
        described = admin.describe_topics(names)
        found = [t for t in described.values() if t.topic_id == args.topic_id]
        if not found:
            if args.if_exists:
                return
            raise errors.NotFoundError(f"TopicId '{args.topic_id}' does not exist as expected")
        names = [t.name for t in found]
    else:
        names = _existing(admin, args)
        described = admin.describe_topics(names)
    configs = admin.topic_configs(names)
    live = [node.id for node in admin.cluster().nodes]
    topics = [described[name] for name in names]
    for line in describe_lines(topics, configs, report_flags(args), live):
        print(line)


def _create(admin: client_admin.Admin, args: argparse.Namespace) -> None:
    if "." in args.topic or "_" in args.topic:
        print(COLLISION_WARNING)
    created = admin.create_topic(
        args.topic,
        partitions=args.partitions,
        replication_factor=args.replication_factor,
        configs=args.configs,
        replica_assignment=args.assignment,
        if_not_exists=args.if_not_exists,
    )
    if created:
        print(f"Created topic {args.topic}.")


def _alter(admin: client_admin.Admin, args: argparse.Namespace) -> None:
    for name in _existing(admin, args):
        if args.partitions is not None:
            total = args.partitions
        else:
            current = len(admin.describe_topics([name])[name].partitions)
            total = current + len(args.assignment or [])
        admin.create_partitions(name, total, replica_assignment=args.assignment)


def _delete(admin: client_admin.Admin, args: argparse.Namespace) -> None:
    names = _existing(admin, args)
    for name in names:
        if name.startswith("__"):
            raise errors.ClientError(
                f"Topic {name} is a kafka internal topic and is not allowed to be marked "
                "for deletion."
            )
    admin.delete_topics(names)


def _body(argv: Sequence[str] | None) -> int:
    args = parse(argv)
    admin = client_admin.Admin(args.bootstrap, options.properties_file(args.command_config))
    action = {
        "list": _list,
        "describe": _describe,
        "create": _create,
        "alter": _alter,
        "delete": _delete,
    }[args.action]
    action(admin, args)
    sys.stdout.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return options.run(lambda: _body(argv), error_prefix=ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
