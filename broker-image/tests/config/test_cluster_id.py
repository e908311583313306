"""Cluster ids as Kafka makes them: 22 URL-safe characters, never a leading '-'."""

from __future__ import annotations

import re

from strom.config import cluster_id


def test_cluster_ids_never_start_with_a_dash() -> None:
    made = {cluster_id.new_cluster_id() for _ in range(3000)}
    assert len(made) == 3000
    # About 1 in 64 random ids would start with '-' without the check.
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", c) for c in made)
