"""The tables strom-consumer-groups prints: `--describe` (offsets and lag, `--members`,
`--state`), `--list`, the `--reset-offsets` plan and the `--delete-offsets` report.

Pure formatting of the admin client's results into lines, with the columns, widths and
padding of Kafka's ConsumerGroupCommand (its `%-Ns` columns, '-' for what is missing), so
the output can be compared with Kafka's own tool byte for byte.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from strom.client import results

TopicPartition = results.TopicPartition
MISSING = "-"


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


# --- list and reset ---------------------------------------------------------------------


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


# --- delete-offsets ---------------------------------------------------------------------

# Kafka's exception and message of the errors OffsetDelete answers, as its tool prints them.
_EXCEPTIONS = {
    "GROUP_ID_NOT_FOUND": ("GroupIdNotFoundException", "The group id does not exist."),
    "GROUP_SUBSCRIBED_TO_TOPIC": (
        "GroupSubscribedToTopicException",
        "Deleting offsets of a topic is forbidden while the consumer group is actively "
        "subscribed to it.",
    ),
    "UNKNOWN_TOPIC_OR_PARTITION": (
        "UnknownTopicOrPartitionException",
        "This server does not host this topic-partition.",
    ),
    "NON_EMPTY_GROUP": ("GroupNotEmptyException", "The group is not empty."),
    "COORDINATOR_NOT_AVAILABLE": (
        "CoordinatorNotAvailableException",
        "The coordinator is not available.",
    ),
    "NOT_COORDINATOR": ("NotCoordinatorException", "This is not the correct coordinator."),
}


def _exception_text(error: str) -> str:
    name, message = _EXCEPTIONS.get(error, (None, error))
    return message if name is None else f"org.apache.kafka.common.errors.{name}: {message}"


def delete_offsets_lines(
    group_id: str, deletion: results.OffsetDeletion, unknown_topics: Iterable[str]
) -> list[str]:
    """Kafka 4's `--delete-offsets` report: a headline, then each partition's outcome; a
    topic that does not exist has the row '-' (and alone does not fail the request)."""
    if deletion.error is not None:
        message = _EXCEPTIONS.get(deletion.error, (None, deletion.error))[1]
        lines = ["", f"Error: {message}"]
    elif any(error is not None for error in deletion.partitions.values()):
        lines = ["", "Error: Encountered some partition-level error, see the follow-up details."]
    else:
        lines = [f"Request succeeded for deleting offsets from group {group_id}."]
    rows: list[tuple[str, int, str, str]] = []
    for tp, error in deletion.partitions.items():
        # a group-level error is every partition's
        shown = error if deletion.error is None else deletion.error
        status = "Successful" if shown is None else f"Error: {_exception_text(shown)}"
        rows.append((tp.topic, tp.partition, str(tp.partition), status))
    unknown = _exception_text("UNKNOWN_TOPIC_OR_PARTITION")
    rows += [(topic, -1, MISSING, f"Error: {unknown}") for topic in unknown_topics]
    width = max([15, *(len(topic) for topic, _, _, _ in rows)])  # Kafka widens to fit
    lines += ["", f"{'TOPIC':<{width}} {'PARTITION':<10} {'STATUS':<15}"]
    lines += [
        f"{topic:<{width}} {partition:<10} {status:<15}"
        for topic, _, partition, status in sorted(rows)
    ]
    return lines
