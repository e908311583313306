"""Sample user profiles for the enrich pipeline: the record shape on the compacted
``user-profiles`` topic, a deterministic generator of its history, and what the pipeline
must output, computed in plain Python (the reference its tests hold Spark's result to).

The topic is a table: a record's key is the user id, its value a JSON object
``{"user_id", "country", "plan"}``, or no value at all (a tombstone) when the user is
deleted. The latest record of a key is the user's current profile, and compaction keeps
just that one. User ids are those of :mod:`strom_spark.events` (``u0000``, ``u0001``, ...),
so page views join with profiles by ``user_id``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from strom_spark.events import PageView

PLANS = ("free", "trial", "paid")
# most users are free, a quarter pay
PLAN_WEIGHTS = (0.6, 0.15, 0.25)
# a skewed audience: a few countries bring most users
COUNTRIES = ("US", "DE", "GB", "FR", "IN", "BR", "JP", "NL")
COUNTRY_WEIGHTS = (0.35, 0.15, 0.12, 0.1, 0.1, 0.08, 0.06, 0.04)


@dataclass(frozen=True)
class Profile:
    user_id: str
    country: str
    plan: str

    def to_json(self) -> bytes:
        return json.dumps(
            {"user_id": self.user_id, "country": self.country, "plan": self.plan},
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, value: bytes) -> Profile:
        fields = json.loads(value)
        return cls(str(fields["user_id"]), str(fields["country"]), str(fields["plan"]))


@dataclass(frozen=True)
class ProfileChange:
    """One record of the topic: a user's new profile, or ``None`` for a deletion."""

    user_id: str
    profile: Profile | None

    def key(self) -> bytes:
        return self.user_id.encode()

    def value(self) -> bytes | None:
        return None if self.profile is None else self.profile.to_json()


def profile_changes(
    seed: int, users: int, update_fraction: float = 0.0, tombstone_fraction: float = 0.0
) -> Iterator[ProfileChange]:
    """The topic's history, the same for the same seed: a profile for each of ``users``
    users, then a changed plan for ``update_fraction`` of them (upgrades and downgrades),
    then deletions of ``tombstone_fraction`` of them (an updated user may be deleted)."""
    if users < 1:
        raise ValueError(f"users must be at least 1, not {users}")
    for name, fraction in (("update", update_fraction), ("tombstone", tombstone_fraction)):
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"{name} fraction must be within [0, 1], not {fraction}")
    rng = random.Random(seed)
    current: dict[str, Profile] = {}
    for n in range(users):
        user_id = f"u{n:04d}"
        current[user_id] = Profile(
            user_id,
            rng.choices(COUNTRIES, COUNTRY_WEIGHTS)[0],
            rng.choices(PLANS, PLAN_WEIGHTS)[0],
        )
        yield ProfileChange(user_id, current[user_id])
    ids = list(current)
    for user_id in rng.sample(ids, round(users * update_fraction)):
        old = current[user_id]
        new_plan = rng.choice([plan for plan in PLANS if plan != old.plan])
        current[user_id] = Profile(user_id, old.country, new_plan)
        yield ProfileChange(user_id, current[user_id])
    for user_id in rng.sample(ids, round(users * tombstone_fraction)):
        yield ProfileChange(user_id, None)


def latest_profiles(changes: Iterable[ProfileChange]) -> dict[str, Profile]:
    """The topic read as a table: the latest profile of each user not deleted since."""
    table: dict[str, Profile] = {}
    for change in changes:
        if change.profile is None:
            table.pop(change.user_id, None)
        else:
            table[change.user_id] = change.profile
    return table


@dataclass(frozen=True)
class EnrichedView:
    event_id: str
    user_id: str
    page: str
    ts: int
    country: str
    plan: str

    def key(self) -> bytes:
        return self.event_id.encode()

    def to_json(self) -> bytes:
        """The value the pipeline writes, byte for byte (Spark's to_json, fields in order)."""
        return json.dumps(
            {
                "event_id": self.event_id,
                "user_id": self.user_id,
                "page": self.page,
                "ts": self.ts,
                "country": self.country,
                "plan": self.plan,
            },
            separators=(",", ":"),
        ).encode()


def enriched_views(
    views: Iterable[PageView], table: dict[str, Profile], plan: str | None = None
) -> dict[str, EnrichedView]:
    """By event id: each view whose user has a profile in ``table`` (with ``plan``, if
    given), with the profile's country and plan. Views of other users are dropped."""
    out: dict[str, EnrichedView] = {}
    for view in views:
        profile = table.get(view.user_id)
        if profile is None or (plan is not None and profile.plan != plan):
            continue
        out[view.event_id] = EnrichedView(
            view.event_id, view.user_id, view.page, view.ts, profile.country, profile.plan
        )
    return out
