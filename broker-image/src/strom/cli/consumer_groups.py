"""strom-consumer-groups: kafka-consumer-groups.sh for Strom.

`--list` (with `--state`/`--type` columns or filters), `--describe` of one, several or all
groups (offsets and lag by default, `--members [--verbose]`, `--state`), `--reset-offsets`
of an inactive group (`--to-earliest`, `--to-latest`, `--to-current`, `--to-offset N`,
`--shift-by N`, `--to-datetime`, `--by-duration`, `--from-file`; planned with `--dry-run`,
applied with `--execute`, `--export`ed as CSV), `--delete` and `--delete-offsets` (of the
partitions `--topic T` or `T:0,1` names, OffsetDelete). The tables have the columns,
widths and messages of Kafka's ConsumerGroupCommand; unlike it, every error exits 1.

This module is the command: its options, their checks, and each action run against the
admin client. The tables are `group_tables`'; reading a reset specification and planning
the new offsets are `offset_resets`'.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence

from strom.cli import group_tables, offset_resets, options
from strom.client import admin as client_admin
from strom.client import errors, results

UsageError = options.UsageError
TopicPartition = results.TopicPartition
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
RESET_SPECS = (
    "to_datetime",
    "by_duration",
    "to_earliest",
    "to_latest",
    "shift_by",
    "from_file",
    "to_current",
    "to_offset",
)
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Unknown")
TYPES = ("Classic", "Consumer", "Unknown")
DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In version 5.0, "
    "this command will require either --dry-run or --execute to be specified. You should add "
    "the --dry-run option explicitly if you are scripting this command and want to keep the "
    "current default behavior without prompting."
)


def build_parser() -> argparse.ArgumentParser:
    parser = options.parser(
        "strom-consumer-groups",
        "This tool helps to list all consumer groups, describe a consumer group, delete "
        "consumer group info, or reset consumer group offsets (Kafka's "
        "kafka-consumer-groups.sh, for Strom).",
    )
    options.add_bootstrap(parser)
    options.add_command_config(parser, what="admin")
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument("--list", action="store_true", help="List all consumer groups.")
    actions.add_argument(
        "--describe",
        action="store_true",
        help="Describe consumer groups: offsets and lag (default), --members or --state.",
    )
    actions.add_argument("--delete", action="store_true", help="Delete consumer groups.")
    actions.add_argument(
        "--reset-offsets",
        action="store_true",
        help="Reset the offsets of an inactive group (--dry-run by default, --execute).",
    )
    actions.add_argument(
        "--delete-offsets",
        action="store_true",
        help="Delete the committed offsets of a group for --topic T (or T:0,1).",
    )
    parser.add_argument(
        "--group",
        action="append",
        default=[],
        help="The consumer group to act on (repeatable).",
    )
    parser.add_argument("--all-groups", action="store_true", help="Apply to all groups.")
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        help="With --reset-offsets or --delete-offsets: a topic, or topic:0,1,2 for some "
        "partitions (repeatable).",
    )
    parser.add_argument(
        "--all-topics",
        action="store_true",
        help="With --reset-offsets: every topic the group has offsets for.",
    )
    parser.add_argument("--members", action="store_true", help="Describe the group's members.")
    parser.add_argument(
        "--offsets", action="store_true", help="Describe offsets and lag (the default)."
    )
    parser.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        help="With --describe: the group's state. With --list: a STATE column, or only "
        "groups in the given comma-separated states.",
    )
    parser.add_argument(
        "--type",
        nargs="?",
        const="",
        default=None,
        help="With --list: a TYPE column, or only groups of the given types.",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="More columns with --members or --offsets."
    )
    parser.add_argument(
        "--timeout",
        type=int,
        metavar="MS",
        help="How long to wait for the cluster's answers (default 30000).",
    )
    plans = parser.add_argument_group("reset specifications (exactly one with --reset-offsets)")
    plans.add_argument("--to-earliest", action="store_true", help="Reset to the earliest offset.")
    plans.add_argument("--to-latest", action="store_true", help="Reset to the latest offset.")
    plans.add_argument(
        "--to-current", action="store_true", help="Reset to the current committed offset."
    )
    plans.add_argument("--to-offset", type=int, metavar="N", help="Reset to offset N.")
    plans.add_argument(
        "--shift-by", type=int, metavar="N", help="Move the committed offset by N (+/-)."
    )
    plans.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="Reset to the first offset at or after this time (local time unless a zone "
        "such as Z or +01:00 is given).",
    )
    plans.add_argument(
        "--by-duration",
        metavar="PnDTnHnMnS",
        help="Reset to the first offset at or after now minus this ISO-8601 duration.",
    )
    plans.add_argument(
        "--from-file",
        metavar="CSV",
        help="Reset to the offsets in a CSV file (topic,partition,offset[ or group first]).",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="Only show the new offsets (the default)."
    )
    parser.add_argument("--execute", action="store_true", help="Commit the new offsets.")
    parser.add_argument(
        "--export", action="store_true", help="Print the plan as CSV (for --from-file)."
    )
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    args.action = options.exclusive(args, ACTIONS, required=True)
    args.bootstrap = options.require_bootstrap(args)
    action = args.action
    if action == "delete_offsets":
        if len(args.group) != 1 or args.all_groups:
            raise UsageError("Option --delete-offsets takes one --group")
        if not args.topic:
            raise UsageError("Option --delete-offsets needs --topic")
        args.scopes = [offset_resets.topic_scope(t) for t in args.topic]
    if action in ("describe", "delete", "reset_offsets"):
        if not args.group and not args.all_groups:
            raise UsageError(f"--{action.replace('_', '-')} needs --group or --all-groups")
        if args.group and args.all_groups:
            raise UsageError("Option --group cannot be used with --all-groups")
    if action == "describe":
        chosen = [n for n in ("members", "offsets") if getattr(args, n)]
        if args.state is not None:
            chosen.append("state")
            if args.state:
                raise UsageError("--state takes no value with --describe")
        if len(chosen) > 1:
            raise UsageError(
                "Option --describe takes at most one of these options: "
                "--members, --offsets, --state"
            )
        args.view = chosen[0] if chosen else "offsets"
    else:
        if args.members or args.offsets:
            raise UsageError("--members and --offsets are only supported with --describe")
    if args.type is not None and action != "list":
        raise UsageError("--type is only supported with --list")
    if args.state is not None and action not in ("list", "describe"):
        raise UsageError("--state is only supported with --list or --describe")
    if action == "reset_offsets":
        args.spec = options.exclusive(args, RESET_SPECS, required=False)
        if args.spec is None:
            raise UsageError(
                "You must choose one of the following reset specifications: --to-datetime, "
                "--by-duration, --to-earliest, --to-latest, --shift-by, --from-file, "
                "--to-current, --to-offset."
            )
        if args.spec != "from_file" and not args.topic and not args.all_topics:
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        if args.topic and args.all_topics:
            raise UsageError("Option --all-topics cannot be used with --topic")
        if args.dry_run and args.execute:
            raise UsageError("Option --dry-run cannot be used with --execute")
        args.scopes = [offset_resets.topic_scope(t) for t in args.topic]
        if args.spec == "to_datetime":
            args.timestamp = offset_resets.datetime_ms(args.to_datetime)
        elif args.spec == "by_duration":
            args.timestamp = int(time.time() * 1000) - offset_resets.duration_ms(args.by_duration)
    else:
        for spec in RESET_SPECS:
            if getattr(args, spec) not in (None, False):
                raise UsageError(
                    f"--{spec.replace('_', '-')} is only supported with --reset-offsets"
                )
        if args.all_topics or (args.topic and action != "delete_offsets"):
            raise UsageError(
                "--topic is only supported with --reset-offsets or --delete-offsets, "
                "--all-topics with --reset-offsets"
            )
        if args.dry_run or args.execute or args.export:
            raise UsageError("--dry-run, --execute and --export go with --reset-offsets")
    args.state_filter = _names(args.state, STATES, "state") if action == "list" else None
    args.type_filter = _names(args.type, TYPES, "types") if action == "list" else None
    return args


def _names(text: str | None, valid: Sequence[str], what: str) -> set[str] | None:
    """A comma-separated, case-insensitive filter of state or type names (None: no filter)."""
    if not text:
        return None
    by_lower = {v.lower(): v for v in valid}
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [part for part in chosen if part.lower() not in by_lower]
    if unknown or not chosen:
        noun = "state" if what == "state" else "types"
        raise UsageError(
            f"Invalid {noun} list '{text}'. Valid {'states' if what == 'state' else 'types'} "
            f"are: {', '.join(valid)}"
        )
    return {by_lower[part.lower()] for part in chosen}


# --- actions ----------------------------------------------------------------------------


def _say(lines: Iterable[str]) -> None:
    for line in lines:
        print(line)


def _groups(admin: client_admin.Admin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in admin.list_groups()]
    return sorted(dict.fromkeys(args.group))


def _list(admin: client_admin.Admin, args: argparse.Namespace) -> int:
    groups = admin.list_groups()
    if args.state_filter:
        groups = [g for g in groups if g.state in args.state_filter]
    if args.type_filter:
        groups = [g for g in groups if g.type in args.type_filter]
    _say(
        group_tables.list_table(
            groups, with_type=args.type is not None, with_state=args.state is not None
        )
    )
    return 0


def _announce(group: results.GroupInfo) -> bool:
    """Kafka's remarks before a group's table; False when there is no table to print."""
    if not group.exists:
        print(f"\nError: Consumer group '{group.group_id}' does not exist.", file=sys.stderr)
        return False
    if group.state == "Empty":
        print(f"\nConsumer group '{group.group_id}' has no active members.", file=sys.stderr)
    elif group.state in ("PreparingRebalance", "CompletingRebalance"):
        print(f"\nWarning: Consumer group '{group.group_id}' is rebalancing.", file=sys.stderr)
    return True


def _describe(admin: client_admin.Admin, args: argparse.Namespace) -> int:
    ids = _groups(admin, args)
    described = admin.describe_groups(ids)
    missing = 0
    for group_id in ids:
        group = described[group_id]
        if not _announce(group):
            missing += 1
            continue
        if args.view == "state":
            _say(group_tables.state_table(group))
        elif args.view == "members":
            _say(group_tables.members_table(group, verbose=args.verbose))
        else:
            committed = admin.committed_offsets(group_id)
            assigned = {tp for m in group.members for tp in m.assignment}
            log_end = _log_end_offsets(admin, set(committed) | assigned)
            rows = group_tables.offset_rows(group, committed, log_end)
            if rows:
                _say(group_tables.offsets_table(rows))
    return 1 if missing else 0


def _log_end_offsets(
    admin: client_admin.Admin, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """Latest offsets; a partition whose topic is gone is left out (shown as '-')."""
    out: dict[TopicPartition, int] = {}
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp)
    for topic, tps in sorted(by_topic.items()):
        try:
            out.update(admin.list_offsets(tps, "latest"))
        except errors.NotFoundError:
            continue
        except errors.ConnectError:
            raise
        except errors.ClientError as e:
            print(f"Error getting ending offsets of topic {topic}: {e}", file=sys.stderr)
    return out


def _delete(admin: client_admin.Admin, args: argparse.Namespace) -> int:
    ids = _groups(admin, args)
    outcomes = admin.delete_groups(ids)
    failed = {g: e for g, e in outcomes.items() if e is not None}
    deleted = [g for g, e in outcomes.items() if e is None]
    quoted = ", ".join(f"'{g}'" for g in deleted)
    if not failed:
        print(f"Deletion of requested consumer groups ({quoted}) was successful.")
        return 0
    lines = ["", "Error: Deletion of some consumer groups failed:"]
    lines += [f"* Group '{g}' could not be deleted due to: {e}" for g, e in failed.items()]
    if deleted:
        lines += ["", f"These consumer groups were deleted successfully: {quoted}"]
    for line in lines:
        print(line, file=sys.stderr)
    return 1


def _reset(admin: client_admin.Admin, args: argparse.Namespace) -> int:
    plan = offset_resets.plan(admin, args, _groups(admin, args))
    if args.export:
        print(offset_resets.export_csv(plan))  # Kafka's println of the CSV: a blank line ends it
    else:
        _say(group_tables.reset_table(plan))
    if args.execute:
        for group_id, offsets in plan.items():
            admin.alter_committed_offsets(group_id, offsets)
    elif not args.dry_run:
        print(DRY_RUN_WARNING, file=sys.stderr)
    return 0


def _delete_offsets(admin: client_admin.Admin, args: argparse.Namespace) -> int:
    (group_id,) = args.group
    partitions: list[TopicPartition] = []
    unknown: list[str] = []
    for scope in args.scopes:
        if scope.partitions is not None:
            partitions += [TopicPartition(scope.topic, p) for p in scope.partitions]
            continue
        try:
            (topic,) = admin.describe_topics([scope.topic]).values()
        except errors.NotFoundError:  # reported, not sent, as by Kafka's tool
            unknown.append(scope.topic)
            continue
        partitions += [TopicPartition(scope.topic, p.partition) for p in topic.partitions]
    # sent even with no partitions left, as Kafka's tool does: the group's error shows
    deletion = admin.delete_committed_offsets(group_id, sorted(set(partitions)))
    _say(group_tables.delete_offsets_lines(group_id, deletion, unknown))
    failed = deletion.error is not None or any(deletion.partitions.values()) or unknown
    return 1 if failed else 0


def _body(argv: Sequence[str] | None) -> int:
    args = parse(argv)
    timeout = args.timeout / 1000 if args.timeout else client_admin.DEFAULT_TIMEOUT_S
    admin = client_admin.Admin(
        args.bootstrap, options.properties_file(args.command_config), timeout=timeout
    )
    action = {
        "list": _list,
        "describe": _describe,
        "delete": _delete,
        "reset_offsets": _reset,
        "delete_offsets": _delete_offsets,
    }[args.action]
    code = action(admin, args)
    sys.stdout.flush()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    return options.run(lambda: _body(argv))


if __name__ == "__main__":
    sys.exit(main())
