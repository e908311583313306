"""Which old segments a log deletes: Kafka's retention rules, as pure functions.

A log deletes its oldest segments, in order, while a rule holds for each: older than
retention.ms (by its largest timestamp), beyond retention.bytes, or wholly below the log
start offset (DeleteRecords). Only data below the high watermark may go, and never an
empty active segment; the log itself does the deleting (see ``partition_log``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from strom.storage import segment

# (candidate, the segment after it or None) -> whether the candidate may be deleted
Rule = Callable[[segment.LogSegment, segment.LogSegment | None], bool]


def deletable(
    segments: Sequence[segment.LogSegment], high_watermark: int, log_end_offset: int, rule: Rule
) -> list[segment.LogSegment]:
    """The oldest segments, in order, while `rule` holds, as Kafka chooses them."""
    chosen = []
    for index, candidate in enumerate(segments):
        following = segments[index + 1] if index + 1 < len(segments) else None
        upper_bound = following.base_offset if following else log_end_offset
        if high_watermark < upper_bound:
            break
        if following is None and candidate.size == 0:
            break
        if not rule(candidate, following):
            break
        chosen.append(candidate)
    return chosen


def older_than(now_ms: int, retention_ms: int) -> Rule:
    """retention.ms: the segment's newest record is older than this."""

    def expired(candidate: segment.LogSegment, _: segment.LogSegment | None) -> bool:
        return now_ms - candidate.largest_timestamp > retention_ms

    return expired


def beyond_size(size: int, retention_bytes: int) -> Rule:
    """retention.bytes: delete the oldest while the log would still be at least this big."""
    excess = size - retention_bytes

    def over_size(candidate: segment.LogSegment, _: segment.LogSegment | None) -> bool:
        nonlocal excess
        if excess - candidate.size >= 0:
            excess -= candidate.size
            return True
        return False

    return over_size


def below(log_start_offset: int) -> Rule:
    """Segments whose records all lie below the log start offset."""

    def below_log_start(_: segment.LogSegment, following: segment.LogSegment | None) -> bool:
        return following is not None and following.base_offset <= log_start_offset

    return below_log_start
