"""strom-consumer-groups: kafka-consumer-groups.sh for Strom.

`--list` (with `--state`/`--type` columns or filters), `--describe` of one, several or all
groups (offsets and lag by default, `--members [--verbose]`, `--state`), `--reset-offsets`
of an inactive group (`--to-earliest`, `--to-latest`, `--to-current`, `--to-offset N`,
`--shift-by N`, `--to-datetime`, `--by-duration`, `--from-file`; planned with `--dry-run`,
applied with `--execute`, `--export`ed as CSV) and `--delete`. The tables have the columns,
widths and messages of Kafka's ConsumerGroupCommand; unlike it, every error exits 1.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import io
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence

from strom.cli import options
from strom.client import admin as client_admin
from strom.client import errors, results

UsageError = options.UsageError
TopicPartition = results.TopicPartition
MISSING = "-"
ACTIONS = ("list", "describe", "delete", "reset_offsets")
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
        help="With --reset-offsets: a topic, or topic:0,1,2 for some partitions (repeatable).",
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
    parser.add_argument("--delete-offsets", action="store_true", help=argparse.SUPPRESS)
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if args.delete_offsets:
        raise UsageError("--delete-offsets is not supported yet by strom-consumer-groups")
    args.action = options.exclusive(args, ACTIONS, required=True)
    args.bootstrap = options.require_bootstrap(args)
    action = args.action
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
        args.scopes = [topic_scope(t) for t in args.topic]
        if args.spec == "to_datetime":
            args.timestamp = datetime_ms(args.to_datetime)
        elif args.spec == "by_duration":
            args.timestamp = int(time.time() * 1000) - duration_ms(args.by_duration)
    else:
        for spec in RESET_SPECS:
            if getattr(args, spec) not in (None, False):
                raise UsageError(
                    f"--{spec.replace('_', '-')} is only supported with --reset-offsets"
                )
        if args.topic or args.all_topics:
            raise UsageError("--topic and --all-topics are only supported with --reset-offsets")
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


@dataclasses.dataclass(frozen=True)
class TopicScope:
    topic: str
    partitions: tuple[int, ...] | None  # None: every partition of the topic


def topic_scope(text: str) -> TopicScope:
    """'t' or 't:0,1,2' as --reset-offsets reads --topic."""
    topic, sep, rest = text.partition(":")
    if not topic:
        raise UsageError(f"Invalid topic arg '{text}', expected topic name and partitions")
    if not sep:
        return TopicScope(topic, None)
    partitions = []
    for part in rest.split(","):
        try:
            partitions.append(int(part.strip()))
        except ValueError:
            raise UsageError(
                f"Invalid partition '{part}' specified in topic arg '{text}''"
            ) from None
    return TopicScope(topic, tuple(partitions))


_DATETIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?(Z|[+-]\d{2}:?\d{2})?$"
)


def datetime_ms(text: str) -> int:
    """Kafka's --to-datetime formats, 'yyyy-MM-ddTHH:mm:ss.SSS' with an optional zone
    (Z, +hh:mm, +hhmm); without one, the local time zone."""
    match = _DATETIME.match(text.strip())
    if match is None:
        raise UsageError(
            f"Error parsing timestamp '{text}': expected the format "
            "'yyyy-MM-ddTHH:mm:ss.SSS' with an optional time zone (Z, +hh:mm)"
        )
    year, month, day, hour, minute, second, millis, zone = match.groups()
    tz: datetime.tzinfo | None = None
    if zone == "Z":
        tz = datetime.UTC
    elif zone:
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        tz = datetime.timezone(
            sign * datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        )
    moment = datetime.datetime(
        int(year),
        int(month),
        int(day),
        int(hour),
        int(minute),
        int(second),
        int((millis or "0").ljust(3, "0")) * 1000,
        tzinfo=tz,
    )
    if tz is None:
        moment = moment.astimezone()  # local time
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(
    r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE
)


def duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse reads it (PnDTnHnMn.nS)."""
    match = _DURATION.match(text.strip())
    if match is None or text.strip().upper() in ("P", "PT"):
        raise UsageError(f"Error parsing duration '{text}': expected the format PnDTnHnMnS")
    days, hours, minutes, seconds = match.groups()
    total = (
        int(days or 0) * 86400
        + int(hours or 0) * 3600
        + int(minutes or 0) * 60
        + float(seconds or 0)
    )
    return int(total * 1000)


# --- describe ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OffsetRow:
    group: str
    topic: str
    partition: int
    offset: int | None
    log_end_offset: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.offset < 0 or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.offset


def offset_rows(
    group: results.GroupInfo,
    committed: Mapping[TopicPartition, int],
    log_end: Mapping[TopicPartition, int],
) -> list[OffsetRow]:
    """ConsumerGroupCommand's rows: partitions of members (the most partitions first),
    then committed partitions that no member owns; each by topic and partition."""
    rows: list[OffsetRow] = []
    owned: set[TopicPartition] = set()
    members = sorted(
        (m for m in group.members if m.assignment), key=lambda m: len(m.assignment), reverse=True
    )
    for member in members:
        for tp in sorted(member.assignment):
            owned.add(tp)
            rows.append(
                OffsetRow(
                    group.group_id,
                    tp.topic,
                    tp.partition,
                    committed.get(tp),
                    log_end.get(tp),
                    member.member_id,
                    member.host,
                    member.client_id,
                )
            )
    for tp in sorted(set(committed) - owned):
        rows.append(
            OffsetRow(
                group.group_id,
                tp.topic,
                tp.partition,
                committed[tp],
                log_end.get(tp),
                None,
                None,
                None,
            )
        )
    return rows


def offsets_table(rows: Sequence[OffsetRow]) -> list[str]:
    """The offsets table (a blank line, the header, the rows), padded as Kafka pads it."""
    g = max([15, *(len(r.group) for r in rows)])
    t = max([15, *(len(r.topic) for r in rows)])
    c = max([15, *(len(r.consumer_id or MISSING) for r in rows)])
    h = max([15, *(len(r.host or MISSING) for r in rows)])

    def line(*cells: object) -> str:
        group, topic, partition, current, end, lag, consumer, host, client = (str(x) for x in cells)
        return (
            f"{group:<{g}} {topic:<{t}} {partition:<10} {current:<15} {end:<15} {lag:<15} "
            f"{consumer:<{c}} {host:<{h}} {client}"
        )

    out = [
        "",
        line(
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ),
    ]
    for r in rows:
        out.append(
            line(
                r.group,
                r.topic,
                r.partition,
                MISSING if r.offset is None or r.offset < 0 else r.offset,
                MISSING if r.log_end_offset is None else r.log_end_offset,
                MISSING if r.lag is None else r.lag,
                r.consumer_id or MISSING,
                r.host or MISSING,
                r.client_id or MISSING,
            )
        )
    return out


def assignment_text(assignment: Iterable[TopicPartition]) -> str:
    """'topic:0,1,2' per topic, topics joined by ';' ('-' when empty)."""
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return MISSING
    return ";".join(
        f"{topic}:{','.join(str(p) for p in sorted(ps))}" for topic, ps in sorted(by_topic.items())
    )


def members_table(group: results.GroupInfo, *, verbose: bool) -> list[str]:
    members = group.members
    g = max([15, len(group.group_id)])
    c = max([15, *(len(m.member_id) for m in members)])
    i = max([17, *(len(m.group_instance_id or "") for m in members)])
    h = max([15, *(len(m.host) for m in members)])
    cl = max([15, *(len(m.client_id) for m in members)])
    with_instance = any(m.group_instance_id for m in members)
    assignments = [assignment_text(m.assignment) for m in members]
    a = max([20, *(len(x) for x in assignments)])

    def line(group_id: str, member: str, instance: str, host: str, client: str, n: object) -> str:
        middle = f"{instance:<{i}} " if with_instance else ""
        return f"{group_id:<{g}} {member:<{c}} {middle}{host:<{h}} {client:<{cl}} {n!s:<15} "

    header = line("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    if verbose:
        header += f"{'CURRENT-EPOCH':<15} {'CURRENT-ASSIGNMENT':<{a}} {'TARGET-EPOCH':<15} "
        header += f"{'TARGET-ASSIGNMENT':<{a}}"
    out = ["", header]
    for member, assigned in zip(members, assignments, strict=True):
        row = line(
            group.group_id,
            member.member_id,
            member.group_instance_id or MISSING,
            member.host,
            member.client_id,
            len(member.assignment),
        )
        if verbose:
            row += f"{MISSING:<15} {assigned:<{a}} {MISSING:<15} {MISSING:<{a}}"
        out.append(row)
    return out


def state_table(group: results.GroupInfo) -> list[str]:
    node = group.coordinator
    coordinator = f"{node.host}:{node.port}  ({node.id})" if node else MISSING
    g = max(15, len(group.group_id))
    c = max(25, len(coordinator))

    def line(*cells: object) -> str:
        group_id, coord, strategy, state, members = (str(x) for x in cells)
        return f"{group_id:<{g}} {coord:<{c}} {strategy:<20} {state:<20} {members}"

    return [
        "",
        line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
        line(
            group.group_id,
            coordinator,
            group.assignor or MISSING,
            group.state,
            len(group.members),
        ),
    ]


def list_table(
    groups: Sequence[results.GroupListing], *, with_type: bool, with_state: bool
) -> list[str]:
    if not with_type and not with_state:
        return [g.group_id for g in groups]
    width = max([15, *(len(g.group_id) for g in groups)]) + 10

    def line(group_id: str, group_type: str, state: str) -> str:
        cells = [f"{group_id:<{width}}"]
        if with_type:
            cells.append(f"{group_type:<20}")
        if with_state:
            cells.append(f"{state:<20}")
        return " ".join(cells)

    return [line("GROUP", "TYPE", "STATE")] + [line(g.group_id, g.type, g.state) for g in groups]


def reset_table(plan: Mapping[str, Mapping[TopicPartition, int]]) -> list[str]:
    g = max([15, *(len(group) for group in plan)])
    t = max([15, *(len(tp.topic) for offsets in plan.values() for tp in offsets)])
    out = [""]
    if plan:
        out.append(f"{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} NEW-OFFSET")
    for group, offsets in plan.items():
        for tp, offset in sorted(offsets.items()):
            out.append(f"{group:<{g}} {tp.topic:<{t}} {tp.partition!s:<10} {offset}")
    return out


def export_csv(plan: Mapping[str, Mapping[TopicPartition, int]]) -> str:
    """The plan as --from-file reads it back: topic,partition,offset (group first when the
    plan has several groups)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for group, offsets in plan.items():
        for tp, offset in sorted(offsets.items()):
            cells = [tp.topic, tp.partition, offset]
            writer.writerow([group, *cells] if len(plan) > 1 else cells)
    return buffer.getvalue()


def read_csv(text: str, groups: Sequence[str]) -> dict[str, dict[TopicPartition, int]]:
    out: dict[str, dict[TopicPartition, int]] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip():
            continue
        try:
            if len(row) == 3:
                if len(groups) != 1:
                    raise UsageError("a CSV without a group column needs exactly one --group")
                group, topic, partition, offset = groups[0], row[0], int(row[1]), int(row[2])
            elif len(row) == 4:
                group, topic, partition, offset = row[0], row[1], int(row[2]), int(row[3])
            else:
                raise ValueError
        except ValueError:
            raise UsageError(
                f"--from-file line {number}: expected topic,partition,offset "
                "(or group,topic,partition,offset)"
            ) from None
        out.setdefault(group, {})[TopicPartition(topic.strip(), partition)] = offset
    return out


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
    _say(list_table(groups, with_type=args.type is not None, with_state=args.state is not None))
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
            _say(state_table(group))
        elif args.view == "members":
            _say(members_table(group, verbose=args.verbose))
        else:
            committed = admin.committed_offsets(group_id)
            assigned = {tp for m in group.members for tp in m.assignment}
            log_end = _log_end_offsets(admin, set(committed) | assigned)
            rows = offset_rows(group, committed, log_end)
            if rows:
                _say(offsets_table(rows))
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
    ids = _groups(admin, args)
    if args.spec == "from_file":
        try:
            with open(args.from_file, encoding="utf-8") as f:
                from_file = read_csv(f.read(), ids)
        except OSError as e:
            raise UsageError(f"cannot read {args.from_file}: {e.strerror or e}") from None
        ids = sorted(set(ids) | set(from_file)) if args.all_groups else ids
    described = admin.describe_groups(ids)
    plan: dict[str, dict[TopicPartition, int]] = {}
    for group_id in ids:
        state = described[group_id].state
        if state not in ("Empty", "Dead"):
            raise errors.ClientError(
                f"Assignments can only be reset if the group '{group_id}' is inactive, but the "
                f"current state is {state}."
            )
        if args.spec == "from_file":
            plan[group_id] = dict(from_file.get(group_id, {}))
        else:
            plan[group_id] = _planned(admin, args, group_id)
    if args.export:
        print(export_csv(plan))  # Kafka's println of the CSV: a blank line ends it
    else:
        _say(reset_table(plan))
    if args.execute:
        for group_id, offsets in plan.items():
            admin.alter_committed_offsets(group_id, offsets)
    elif not args.dry_run:
        print(DRY_RUN_WARNING, file=sys.stderr)
    return 0


def _planned(
    admin: client_admin.Admin, args: argparse.Namespace, group_id: str
) -> dict[TopicPartition, int]:
    committed = admin.committed_offsets(group_id)
    partitions = _scope(admin, args, committed)
    if not partitions:
        return {}
    spec = args.spec
    if spec == "to_earliest":
        return admin.list_offsets(partitions, "earliest")
    if spec == "to_latest":
        return admin.list_offsets(partitions, "latest")
    if spec == "to_current":
        latest = admin.list_offsets([tp for tp in partitions if tp not in committed], "latest")
        return {tp: committed[tp] if tp in committed else latest[tp] for tp in partitions}
    if spec in ("to_datetime", "by_duration"):
        found = admin.list_offsets(partitions, int(args.timestamp))
        latest = admin.list_offsets([tp for tp, o in found.items() if o < 0], "latest")
        for tp in sorted(latest):
            print(
                f"\nWarn: Partition {tp.partition} from topic {tp.topic} is empty. Falling back "
                "to latest known offset.",
                file=sys.stderr,
            )
        return {tp: latest[tp] if found[tp] < 0 else found[tp] for tp in partitions}
    if spec == "shift_by":
        without = [tp for tp in partitions if tp not in committed]
        if without:
            raise errors.ClientError(
                f"Cannot shift offset for partition {without[0]} since there is no current "
                "committed offset"
            )
        wanted = {tp: committed[tp] + args.shift_by for tp in partitions}
    else:  # to_offset
        wanted = dict.fromkeys(partitions, args.to_offset)
    return _clamped(admin, wanted)


def _clamped(
    admin: client_admin.Admin, wanted: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Offsets moved into [earliest, latest], with Kafka's warnings."""
    earliest = admin.list_offsets(wanted, "earliest")
    latest = admin.list_offsets(wanted, "latest")
    out = {}
    for tp, offset in sorted(wanted.items()):
        if offset > latest[tp]:
            print(
                f"New offset ({offset}) is higher than latest offset for topic partition {tp}. "
                f"Value will be set to {latest[tp]}",
                file=sys.stderr,
            )
            offset = latest[tp]
        elif offset < earliest[tp]:
            print(
                f"New offset ({offset}) is lower than earliest offset for topic partition {tp}. "
                f"Value will be set to {earliest[tp]}",
                file=sys.stderr,
            )
            offset = earliest[tp]
        out[tp] = offset
    return out


def _scope(
    admin: client_admin.Admin, args: argparse.Namespace, committed: Mapping[TopicPartition, int]
) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    out: list[TopicPartition] = []
    described = admin.describe_topics(sorted(set(s.topic for s in args.scopes)))
    for scope in args.scopes:
        existing = {p.partition for p in described[scope.topic].partitions}
        if scope.partitions is None:
            out += [TopicPartition(scope.topic, p) for p in sorted(existing)]
            continue
        unknown = [p for p in scope.partitions if p not in existing]
        if unknown:
            names = ",".join(f"{scope.topic}-{p}" for p in unknown)
            raise errors.NotFoundError(f'The partitions "{names}" do not exist')
        out += [TopicPartition(scope.topic, p) for p in scope.partitions]
    return sorted(set(out))


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
    }[args.action]
    code = action(admin, args)
    sys.stdout.flush()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    return options.run(lambda: _body(argv))


if __name__ == "__main__":
    sys.exit(main())
