"""Sample page-view events for the clickstream pipelines: the record shape on the
``page-views`` topic and a deterministic generator of realistic traffic.

A record's key is the user id (so one user's views stay in order on one partition) and
its value a JSON object ``{"event_id", "user_id", "page", "referrer", "ts"}`` with ``ts``
the event time in epoch milliseconds. The generator draws pages with a Zipf-like skew
(a few pages get most views, as on a real site), users uniformly, and makes a chosen
fraction of events late: their event time lies behind the stream's clock by a lateness
drawn from a given range, as when a phone reconnects and sends what it buffered.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass

REFERRERS = ("direct", "search", "social", "email", "ads")


@dataclass(frozen=True)
class PageView:
    event_id: str
    user_id: str
    page: str
    referrer: str
    ts: int

    def key(self) -> bytes:
        return self.user_id.encode()

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, value: bytes) -> PageView:
        fields = json.loads(value)
        return cls(
            event_id=str(fields["event_id"]),
            user_id=str(fields["user_id"]),
            page=str(fields["page"]),
            referrer=str(fields["referrer"]),
            ts=int(fields["ts"]),
        )


@dataclass(frozen=True)
class Traffic:
    """What the generated stream looks like."""

    events_per_second: float = 100.0
    users: int = 1000
    pages: int = 50
    # the exponent of the page popularity (1/rank^skew); 0 gives every page the same share
    skew: float = 1.1
    late_fraction: float = 0.0
    # a late event's event time is this far (milliseconds, inclusive range) behind the clock
    lateness_ms: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        if self.events_per_second <= 0:
            raise ValueError(f"events_per_second must be above 0, not {self.events_per_second}")
        if self.users < 1 or self.pages < 1:
            raise ValueError("users and pages must be at least 1")
        if not 0.0 <= self.late_fraction <= 1.0:
            raise ValueError(f"late_fraction must be within [0, 1], not {self.late_fraction}")
        low, high = self.lateness_ms
        if not 0 <= low <= high:
            raise ValueError(
                f"lateness_ms must be a range 0 <= low <= high, not {self.lateness_ms}"
            )


def page_views(seed: int, count: int, start_ms: int, traffic: Traffic) -> Iterator[PageView]:
    """``count`` page views from the clock ``start_ms`` on, the same for the same seed.

    The clock advances by exponentially distributed gaps (a Poisson stream at the given
    rate); an on-time event carries the clock, a late one the clock minus its lateness.
    """
    rng = random.Random(seed)
    # cumulative once, so that each draw is a bisection rather than a pass over every page
    cumulative = list(
        itertools.accumulate(1.0 / (rank**traffic.skew) for rank in range(1, traffic.pages + 1))
    )
    pages = [f"/page/{rank}" for rank in range(1, traffic.pages + 1)]
    clock = float(start_ms)
    for n in range(count):
        clock += rng.expovariate(traffic.events_per_second) * 1000.0
        ts = int(clock)
        if rng.random() < traffic.late_fraction:
            ts -= rng.randint(*traffic.lateness_ms)
        yield PageView(
            event_id=f"pv-{seed}-{n}",
            user_id=f"u{rng.randrange(traffic.users):04d}",
            page=rng.choices(pages, cum_weights=cumulative)[0],
            referrer=rng.choice(REFERRERS),
            ts=ts,
        )
