"""The persisted election state (Kafka's ``quorum-state`` file): epoch, vote, leader.

A node writes it, durably, before it acts on a new epoch or vote: before it answers a
granted vote, before it asks for votes, before it leads. `FileQuorumStateStore` keeps
it as Kafka's JSON (``leaderId``, ``leaderEpoch``, ``votedId``, ``data_version``)
replaced atomically with an fsync; `MemoryQuorumStateStore` is the simulation's, which a
simulated crash keeps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from strom.storage import checkpoints

FILE_NAME = "quorum-state"
_DATA_VERSION = 1
_NONE = -1


@dataclass(frozen=True, slots=True)
class ElectionState:
    """What survives a restart: the epoch, whom this node voted for in it, its leader."""

    epoch: int
    voted_id: int | None = None
    leader_id: int | None = None


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None:
        """The last state written, or None on a fresh node."""
        ...

    def write(self, state: ElectionState) -> None:
        """Replace the state durably (it is on disk when this returns)."""
        ...


class CorruptQuorumStateError(Exception):
    """The quorum-state file is not one this node wrote: refuse to start."""


class MemoryQuorumStateStore:
    def __init__(self) -> None:
        self.state: ElectionState | None = None
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1


class FileQuorumStateStore:
    """``<metadata log dir>/quorum-state``, as Kafka's FileQuorumStateStore writes it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> ElectionState | None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            epoch = int(data["leaderEpoch"])
            leader = int(data.get("leaderId", _NONE))
            voted = int(data.get("votedId", _NONE))
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptQuorumStateError(f"{self.path}: {error!r}") from None
        if epoch < 0:
            raise CorruptQuorumStateError(f"{self.path}: negative epoch {epoch}")
        return ElectionState(
            epoch=epoch,
            voted_id=None if voted == _NONE else voted,
            leader_id=None if leader == _NONE else leader,
        )

    def write(self, state: ElectionState) -> None:
        data = {
            "leaderId": _NONE if state.leader_id is None else state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": _NONE if state.voted_id is None else state.voted_id,
            "data_version": _DATA_VERSION,
        }
        checkpoints.write_atomically(self.path, json.dumps(data).encode())
