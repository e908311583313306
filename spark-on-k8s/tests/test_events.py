"""The sample page views: the record shape the pipelines parse, and a generator that is
deterministic, skewed and late as asked."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from strom_spark.events import PageView, Traffic, page_views


def test_a_page_view_round_trips_through_its_record() -> None:
    view = PageView("pv-1-0", "u0042", "/page/3", "search", 1_700_000_000_123)
    assert view.key() == b"u0042"
    assert json.loads(view.to_json()) == {
        "event_id": "pv-1-0",
        "user_id": "u0042",
        "page": "/page/3",
        "referrer": "search",
        "ts": 1_700_000_000_123,
    }
    assert PageView.from_json(view.to_json()) == view


def test_the_same_seed_gives_the_same_stream_and_ids_are_unique() -> None:
    traffic = Traffic(events_per_second=50, late_fraction=0.1, lateness_ms=(1000, 5000))
    first = list(page_views(7, 2000, 1_000_000, traffic))
    assert first == list(page_views(7, 2000, 1_000_000, traffic))
    assert first != list(page_views(8, 2000, 1_000_000, traffic))
    assert len({view.event_id for view in first}) == 2000


def test_rate_skew_and_lateness_are_as_asked() -> None:
    traffic = Traffic(
        events_per_second=100, pages=20, late_fraction=0.2, lateness_ms=(60_000, 90_000)
    )
    views = list(page_views(1, 20_000, 0, traffic))
    # the stream's clock: 20,000 events at 100/s span about 200 s
    clock_span_s = max(v.ts for v in views) / 1000
    assert 180 < clock_span_s < 220
    counts = Counter(v.page for v in views)
    # Zipf-like: the top page gets far more views than the last
    assert counts["/page/1"] > 5 * counts["/page/20"]
    # a late event lies 60-90 s behind the clock: behind the latest event time seen so far
    latest = 0
    late = 0
    for view in views:
        if view.ts < latest - 50_000:
            late += 1
            assert latest - view.ts <= 90_000 + 5_000
        latest = max(latest, view.ts)
    assert 0.15 * len(views) < late < 0.25 * len(views)


@pytest.mark.parametrize(
    "bad",
    [
        {"events_per_second": 0},
        {"pages": 0},
        {"late_fraction": 1.5},
        {"lateness_ms": (5, 1)},
    ],
)
def test_impossible_traffic_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Traffic(**bad)  # type: ignore[arg-type]
