"""What the clickstream pipeline must output, computed in plain Python: the reference its
tests hold Spark's result to (jobs/clickstream.py).

Spark's rules, as the pipeline uses them: tumbling windows aligned to the epoch
(``[ts - ts % w, ... + w)``); one watermark for the query, the largest event time seen in
*earlier* micro-batches less the delay (none before the first batch); a view whose
window ends at or before the watermark when its batch runs is dropped; every other view
is counted. A window is final (Parquet's append mode writes it) once the watermark
reaches its end.

So which views count depends on where the micro-batches are cut. The reference takes the
input as phases, each consumed before the next is produced (one ``available-now`` run
per phase, say), and refuses an input whose outcome a different cut inside a phase could
change: a view is *settled* when it is late against the watermark before its phase, or
when no watermark its phase can raise reaches its window's end.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from strom_spark.events import PageView


class UnsettledInput(ValueError):
    """The input's outcome would depend on how Spark cuts a phase into micro-batches."""


@dataclass(frozen=True, order=True)
class WindowCount:
    page: str
    window_start: int  # epoch ms, inclusive
    window_end: int  # epoch ms, exclusive
    count: int

    @property
    def key(self) -> str:
        """The record key the pipeline writes the window's count under."""
        return f"{self.page}|{self.window_start}"

    def record(self) -> tuple[bytes, bytes]:
        """The pipeline's output record for the window, byte for byte (Spark's to_json of
        its output struct): key and value."""
        value = {
            "page": self.page,
            "window_start": self.window_start,
            "window_end": self.window_end,
            "count": self.count,
        }
        return self.key.encode(), json.dumps(value, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Expected:
    counts: tuple[WindowCount, ...]  # every window with at least one counted view
    dropped: int  # views dropped as too late
    watermark: int | None  # after the last phase

    def final(self) -> tuple[WindowCount, ...]:
        """The windows the watermark has closed: what append mode has written."""
        mark = self.watermark
        return tuple(c for c in self.counts if mark is not None and c.window_end <= mark)


def window_start(ts: int, window_ms: int) -> int:
    return ts - ts % window_ms


def expected_counts(
    phases: Sequence[Iterable[PageView]], window_ms: int, watermark_ms: int
) -> Expected:
    if window_ms <= 0 or watermark_ms < 0:
        raise ValueError("window_ms must be positive and watermark_ms not negative")
    counts: Counter[tuple[str, int]] = Counter()
    dropped = 0
    mark: int | None = None
    latest: int | None = None
    for number, phase in enumerate(phases, start=1):
        views = list(phase)
        if not views:
            continue
        latest = max([view.ts for view in views] + ([] if latest is None else [latest]))
        highest_mark = latest - watermark_ms  # the most a cut inside this phase could raise
        for view in views:
            start = window_start(view.ts, window_ms)
            end = start + window_ms
            if mark is not None and end <= mark:
                dropped += 1
                continue
            if end <= highest_mark:
                raise UnsettledInput(
                    f"phase {number}: view {view.event_id} (window {start}..{end}) is counted "
                    f"or dropped depending on the micro-batches (watermark {mark} to "
                    f"{highest_mark})"
                )
            counts[(view.page, start)] += 1
        mark = highest_mark if mark is None else max(mark, highest_mark)
    windows = tuple(
        sorted(
            WindowCount(page, start, start + window_ms, count)
            for (page, start), count in counts.items()
        )
    )
    return Expected(windows, dropped, mark)
