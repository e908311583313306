"""What the metadata quorum looks like, for DescribeQuorum (kafka-metadata-quorum.sh).

The Raft quorum (`metadata_quorum.MetadataQuorum`) describes itself through this
interface: leader, epoch, high watermark, each voter's log end offset and last fetch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ReplicaState:
    node_id: int
    log_end_offset: int
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    leader_id: int  # -1 while no leader is known
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...] = ()


class Quorum(Protocol):
    def describe(self, now_ms: int) -> QuorumDescription: ...

    def active_controller(self) -> int | None:
        """The node that leads the quorum (the active controller), if one is known."""
        ...

    def is_active_controller(self) -> bool:
        """This node leads the quorum and has applied every earlier epoch's records."""
        ...
