"""meta.properties: a log directory's cluster, node and directory id."""

from __future__ import annotations

from pathlib import Path

import pytest
from strom.cluster import identity


def test_a_directory_id_is_added_once_and_kept(tmp_path: Path) -> None:
    cluster = identity.ensure_identity(tmp_path, 1, None)
    first = identity.ensure_directory_id(tmp_path)
    assert identity.ensure_directory_id(tmp_path) == first
    text = (tmp_path / identity.META_PROPERTIES).read_text()
    (line,) = [line for line in text.splitlines() if line.startswith("directory.id=")]
    assert len(line.split("=", 1)[1]) == 22  # Kafka's Uuid: base64url, no padding
    # the rest of the identity is untouched
    assert identity.ensure_identity(tmp_path, 1, cluster) == cluster
    with pytest.raises(identity.InconsistentClusterIdError):
        identity.ensure_identity(tmp_path, 2, cluster)
