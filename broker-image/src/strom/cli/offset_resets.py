"""--reset-offsets of strom-consumer-groups: reading the reset specification and planning
the new offsets.

`--topic` scopes (`topic` or `topic:0,1,2`), `--to-datetime` and `--by-duration` as Kafka
reads them (`topic_scope`, `datetime_ms`, `duration_ms`); the plan of each inactive group
(`plan`) for `--to-earliest`, `--to-latest`, `--to-current`, `--to-offset`, `--shift-by`
(moved into [earliest, latest] with Kafka's warnings), `--to-datetime`/`--by-duration`
(the first offset at or after the time, else the latest) and `--from-file`; and the CSV
that `--export` writes and `--from-file` reads back. Printing and committing the plan is
the command's (consumer_groups).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import io
import re
import sys
from collections.abc import Mapping, Sequence

from strom.cli import options
from strom.client import admin as client_admin
from strom.client import errors, results

UsageError = options.UsageError
TopicPartition = results.TopicPartition


# --- the reset specification ------------------------------------------------------------


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


# --- the CSV of --export and --from-file ------------------------------------------------


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


# --- planning ---------------------------------------------------------------------------


def plan(
    admin: client_admin.Admin, args: argparse.Namespace, ids: Sequence[str]
) -> dict[str, dict[TopicPartition, int]]:
    """The new offsets of each group (`ids`, and with --all-groups those --from-file
    names), by the reset specification in `args`; every group must be inactive."""
    if args.spec == "from_file":
        try:
            with open(args.from_file, encoding="utf-8") as f:
                from_file = read_csv(f.read(), ids)
        except OSError as e:
            raise UsageError(f"cannot read {args.from_file}: {e.strerror or e}") from None
        ids = sorted(set(ids) | set(from_file)) if args.all_groups else ids
    described = admin.describe_groups(ids)
    out: dict[str, dict[TopicPartition, int]] = {}
    for group_id in ids:
        state = described[group_id].state
        if state not in ("Empty", "Dead"):
            raise errors.ClientError(
                f"Assignments can only be reset if the group '{group_id}' is inactive, but the "
                f"current state is {state}."
            )
        if args.spec == "from_file":
            out[group_id] = dict(from_file.get(group_id, {}))
        else:
            out[group_id] = _planned(admin, args, group_id)
    return out


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
