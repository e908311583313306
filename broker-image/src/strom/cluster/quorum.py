"""What the metadata quorum looks like, for DescribeQuorum (kafka-metadata-quorum.sh).

A quorum of one today: this node is the only voter and the leader of every epoch, and
the metadata log's end is its high watermark. The Raft quorum will describe itself
through the same interface (leader, epoch, high watermark, each voter's and observer's
log end offset and last fetch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from strom.cluster import metadata_log

# A quorum of one elects itself in the first epoch, as a fresh Kafka KRaft node does.
SINGLE_NODE_EPOCH = 1


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


class SingleNodeQuorum:
    def __init__(self, node_id: int, log: metadata_log.LocalMetadataLog) -> None:
        self._node_id = node_id
        self._log = log

    def describe(self, now_ms: int) -> QuorumDescription:
        end = self._log.end_offset
        return QuorumDescription(
            leader_id=self._node_id,
            leader_epoch=SINGLE_NODE_EPOCH,
            high_watermark=end,
            voters=(ReplicaState(self._node_id, end, now_ms, now_ms),),
        )
