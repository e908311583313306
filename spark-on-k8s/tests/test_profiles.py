"""The sample user profiles: the record shape of the compacted topic, a seeded history
with updates and deletions, and the plain-Python reference of the enrich pipeline (the
topic read as a table, views joined with it)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from strom_spark import demo
from strom_spark.events import PageView
from strom_spark.profiles import (
    EnrichedView,
    Profile,
    ProfileChange,
    enriched_views,
    latest_profiles,
    profile_changes,
)


def test_a_profile_round_trips_and_a_deletion_is_a_tombstone() -> None:
    profile = Profile("u0007", "DE", "paid")
    change = ProfileChange("u0007", profile)
    assert change.key() == b"u0007"
    assert json.loads(change.value() or b"") == {
        "user_id": "u0007",
        "country": "DE",
        "plan": "paid",
    }
    assert Profile.from_json(profile.to_json()) == profile
    deleted = ProfileChange("u0007", None)
    assert deleted.key() == b"u0007" and deleted.value() is None


def test_the_history_creates_every_user_then_updates_then_deletes() -> None:
    changes = list(profile_changes(5, 200, update_fraction=0.2, tombstone_fraction=0.1))
    assert changes == list(profile_changes(5, 200, update_fraction=0.2, tombstone_fraction=0.1))
    assert changes != list(profile_changes(6, 200, update_fraction=0.2, tombstone_fraction=0.1))
    created, updates, deletions = changes[:200], changes[200:240], changes[240:]
    # the user ids of strom_spark.events, so that views join with profiles
    assert [c.user_id for c in created] == [f"u{n:04d}" for n in range(200)]
    assert all(c.profile is not None for c in created + updates)
    first_plan = {c.user_id: c.profile.plan for c in created if c.profile}
    # an update is a new plan, never the same one again
    assert all(c.profile and c.profile.plan != first_plan[c.user_id] for c in updates)
    assert len({c.user_id for c in updates}) == 40
    assert len(deletions) == 20 and all(c.profile is None for c in deletions)


def test_plans_and_countries_are_skewed_as_a_real_audience() -> None:
    plans = Counter(c.profile.plan for c in profile_changes(1, 5000) if c.profile)
    assert plans["free"] > plans["paid"] > plans["trial"] > 0
    assert 0.2 < plans["paid"] / 5000 < 0.3
    countries = Counter(c.profile.country for c in profile_changes(1, 5000) if c.profile)
    assert countries.most_common(1)[0][0] == "US"


def test_the_table_holds_the_latest_profile_of_each_user_not_deleted_since() -> None:
    history = [
        ProfileChange("u0001", Profile("u0001", "US", "free")),
        ProfileChange("u0002", Profile("u0002", "FR", "paid")),
        ProfileChange("u0001", Profile("u0001", "US", "paid")),  # an upgrade
        ProfileChange("u0002", None),  # deleted
        ProfileChange("u0003", Profile("u0003", "JP", "trial")),
        ProfileChange("u0003", None),
        ProfileChange("u0003", Profile("u0003", "JP", "free")),  # back after a deletion
        ProfileChange("u0004", None),  # deleting an unknown user is harmless
    ]
    assert latest_profiles(history) == {
        "u0001": Profile("u0001", "US", "paid"),
        "u0003": Profile("u0003", "JP", "free"),
    }


def test_views_are_joined_with_the_table_and_filtered_by_plan() -> None:
    table = {"u0001": Profile("u0001", "US", "paid"), "u0003": Profile("u0003", "JP", "free")}
    views = [
        PageView("pv-1", "u0001", "/page/1", "direct", 1_000),
        PageView("pv-2", "u0002", "/page/2", "search", 2_000),  # no profile: dropped
        PageView("pv-3", "u0003", "/page/1", "ads", 3_000),
    ]
    assert enriched_views(views, table) == {
        "pv-1": EnrichedView("pv-1", "u0001", "/page/1", 1_000, "US", "paid"),
        "pv-3": EnrichedView("pv-3", "u0003", "/page/1", 3_000, "JP", "free"),
    }
    assert list(enriched_views(views, table, plan="paid")) == ["pv-1"]
    assert enriched_views(views, table, plan="trial") == {}


def test_an_enriched_view_is_written_as_spark_writes_it() -> None:
    view = EnrichedView("pv-1", "u0001", "/page/1", 1_700_000_000_123, "US", "paid")
    assert view.key() == b"pv-1"
    # Spark's to_json: the struct's fields in order, no spaces
    assert view.to_json() == (
        b'{"event_id":"pv-1","user_id":"u0001","page":"/page/1",'
        b'"ts":1700000000123,"country":"US","plan":"paid"}'
    )


@pytest.mark.parametrize(
    ("users", "updates", "tombstones", "message"),
    [
        (0, 0.0, 0.0, "users must be at least 1"),
        (10, 1.5, 0.0, "update fraction must be within [0, 1]"),
        (10, 0.0, -0.1, "tombstone fraction must be within [0, 1]"),
    ],
)
def test_a_history_that_cannot_be_is_refused(
    users: int, updates: float, tombstones: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        list(profile_changes(1, users, updates, tombstones))


def test_the_demo_profiles_command_defaults_and_refusals() -> None:
    args = demo._parser().parse_args(["profiles", "--bootstrap-server", "localhost:9092"])
    assert (args.topic, args.users, args.updates, args.tombstones) == (
        "user-profiles",
        1000,
        0.0,
        0.0,
    )
    # refused before any connection: the broker address is never tried
    with pytest.raises(SystemExit, match="tombstone fraction must be within"):
        demo.main(["profiles", "--bootstrap-server", "127.0.0.1:1", "--tombstones", "2"])
