"""The plain-Python reference of the clickstream pipeline: Spark's window and watermark
rules, and the refusal of an input whose outcome depends on the micro-batch cuts."""

from __future__ import annotations

import pytest
from strom_spark.events import PageView
from strom_spark.windows import UnsettledInput, WindowCount, expected_counts, window_start

MINUTE = 60_000


def view(n: int, page: str, ts: int) -> PageView:
    return PageView(f"e{n}", "u", page, "direct", ts)


def test_windows_are_aligned_to_the_epoch_and_end_exclusive() -> None:
    assert window_start(59_999, MINUTE) == 0
    assert window_start(60_000, MINUTE) == MINUTE
    got = expected_counts([[view(1, "/a", 59_999), view(2, "/a", 60_000)]], MINUTE, 30_000)
    assert got.counts == (WindowCount("/a", 0, MINUTE, 1), WindowCount("/a", MINUTE, 2 * MINUTE, 1))
    assert got.counts[0].key == "/a|0"


def test_a_view_late_against_an_earlier_phase_is_dropped_and_one_within_is_counted() -> None:
    phase1 = [view(1, "/a", 10 * MINUTE), view(2, "/b", 10 * MINUTE + 40_000)]
    # watermark after phase 1: 10:40 - 0:30 = 10:10; window [9:00, 10:00) has closed
    phase2 = [view(3, "/a", 9 * MINUTE + 1), view(4, "/a", 10 * MINUTE + 1)]
    got = expected_counts([phase1, phase2], MINUTE, 30_000)
    assert got.dropped == 1
    assert got.counts == (
        WindowCount("/a", 10 * MINUTE, 11 * MINUTE, 2),
        WindowCount("/b", 10 * MINUTE, 11 * MINUTE, 1),
    )
    assert got.watermark == 10 * MINUTE + 40_000 - 30_000
    assert got.final() == ()
    closing = [view(5, "/z", 20 * MINUTE)]
    later = expected_counts([phase1, phase2, closing], MINUTE, 30_000)
    assert later.final() == got.counts  # the closing view's own window stays open


def test_a_view_whose_fate_depends_on_the_batch_cut_is_refused() -> None:
    # within one phase: 10:50 raises the watermark to 10:20, past the window [9:00, 10:00)
    # the first view sits in, if Spark cuts a batch between them
    phase = [view(1, "/a", 9 * MINUTE + 59_000), view(2, "/a", 10 * MINUTE + 50_000)]
    with pytest.raises(UnsettledInput, match="e1"):
        expected_counts([phase], MINUTE, 30_000)
    assert expected_counts([phase], MINUTE, 120_000).counts[0].count == 1


def test_bad_window_or_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="window_ms"):
        expected_counts([], 0, 0)


def test_a_windows_record_is_what_the_pipeline_writes() -> None:
    key, value = WindowCount("/a", 60_000, 120_000, 3).record()
    assert key == b"/a|60000"
    assert value == b'{"page":"/a","window_start":60000,"window_end":120000,"count":3}'
