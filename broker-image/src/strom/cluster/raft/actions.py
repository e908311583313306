"""What `client.RaftClient.poll` and ``handle`` return: messages to send and effects.

A driver sends each `Send` to its destination and applies the effects in order:
`Committed` entries to the state machine, `SnapshotLoaded` replaces the state machine's
state, `LeaderChanged` tells who leads now (the active controller is the leader).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.cluster.raft import log as raft_log
from strom.cluster.raft import messages


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``message`` to ``destination``: a request with a new correlation id, or a
    response with the correlation id of the request it answers."""

    destination: int
    message: messages.Message
    correlation_id: int


@dataclass(frozen=True, slots=True)
class Committed:
    """The entries (control entries left out) from the last delivery up to ``end_offset``
    (exclusive, the high watermark) are committed: apply them in order."""

    entries: tuple[raft_log.Entry, ...]
    end_offset: int


@dataclass(frozen=True, slots=True)
class SnapshotLoaded:
    """Replace the state machine's state by this snapshot's (the state of every entry
    before ``snapshot_id.offset``): at start, or after a follower fetched it."""

    snapshot_id: raft_log.SnapshotId
    state: bytes


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    leader_id: int | None
    epoch: int


Action = Send | Committed | SnapshotLoaded | LeaderChanged


@dataclass(frozen=True, slots=True)
class NotLeader:
    """`client.RaftClient.append` on a node that does not lead: who does, if known."""

    leader_id: int | None
    epoch: int
