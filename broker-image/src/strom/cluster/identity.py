"""Which cluster and node a log directory belongs to: Kafka's ``meta.properties``.

Written on first start; a later start with another ``node.id`` or ``cluster.id`` is
refused, so a directory is never served by the wrong broker or joined to the wrong
cluster.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from strom.cluster import topics
from strom.config import cluster_id, loading
from strom.storage import checkpoints

META_PROPERTIES = "meta.properties"


class InconsistentClusterIdError(topics.MetadataError):
    pass


new_cluster_id = cluster_id.new_cluster_id


def ensure_identity(directory: Path, node_id: int, cluster_id: str | None) -> str:
    """The cluster id of `directory` (written there if new); refuses a mismatch."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / META_PROPERTIES
    stored = loading.parse_properties(path.read_text(), source=str(path)) if path.exists() else {}
    stored_cluster = stored.get("cluster.id")
    stored_node = stored.get("node.id")
    if stored_node is not None and int(stored_node) != node_id:
        raise InconsistentClusterIdError(
            f"log directory {directory} belongs to node.id {stored_node}, not {node_id}"
        )
    if cluster_id and stored_cluster and cluster_id != stored_cluster:
        raise InconsistentClusterIdError(
            f"cluster.id {cluster_id} does not match {stored_cluster} stored in {path}"
        )
    effective = stored_cluster or cluster_id or new_cluster_id()
    if not stored_cluster:
        checkpoints.write_atomically(
            path, f"version=1\ncluster.id={effective}\nnode.id={node_id}\n".encode()
        )
    return effective


def ensure_directory_id(directory: Path) -> uuid.UUID:
    """The id of this log directory (``directory.id``, Kafka 3.7+'s, base64url like
    Kafka's Uuid), added to an existing ``meta.properties`` that has none. The metadata
    quorum tells two nodes with one node.id apart by it."""
    path = directory / META_PROPERTIES
    text = path.read_text()
    stored = loading.parse_properties(text, source=str(path))
    found = stored.get("directory.id")
    if found:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(found + "=="))
    made = uuid.uuid4()
    encoded = base64.urlsafe_b64encode(made.bytes).decode().rstrip("=")
    body = text if text.endswith("\n") or not text else text + "\n"
    checkpoints.write_atomically(path, f"{body}directory.id={encoded}\n".encode())
    return made
