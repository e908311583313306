"""Cluster ids as Kafka makes them (`kafka-storage random-uuid`, Uuid.randomUuid)."""

from __future__ import annotations

import base64
import uuid


def new_cluster_id() -> str:
    """16 random bytes in URL-safe base64 without padding (22 characters). Like Kafka's,
    never one that starts with '-': command-line tools would read it as an option
    (`kafka-storage format -t -x…` fails)."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not candidate.startswith("-"):
            return candidate
