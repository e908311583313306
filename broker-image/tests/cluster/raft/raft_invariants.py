"""The invariants of the Raft simulation (raft_sim.py), checked after every event.

Kafka's RaftEventSimulationTest keeps the same: one leader per epoch, monotonic epochs and
high watermarks, committed data never lost or changed and the same on every node, a
state machine fed the committed prefix only, snapshots at the log start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from strom.cluster.raft import actions, client, memory_log, store
from strom.cluster.raft import log as raft_log


@dataclass
class Node:
    """One simulated node: what survives its crashes (log, store) and its state machine."""

    id: int
    log: memory_log.MemoryLog = field(default_factory=memory_log.MemoryLog)
    store: store.MemoryQuorumStateStore = field(default_factory=store.MemoryQuorumStateStore)
    client: client.RaftClient | None = None
    # the state machine: the data of the committed entries it applied, in order
    applied: list[tuple[int, bytes]] = field(default_factory=list)
    applied_end: int = 0
    # what the invariants saw last
    epoch: int = 0
    high_watermark: int = 0
    verified: int = 0
    led_epoch: int = -1
    wake_at: int | None = None
    wake_version: int = 0
    group: int = 0


def encode_state(applied: list[tuple[int, bytes]]) -> bytes:
    return b"\n".join(b"%d:%s" % (offset, data.hex().encode()) for offset, data in applied)


def decode_state(state: bytes) -> list[tuple[int, bytes]]:
    if not state:
        return []
    result = []
    for line in state.split(b"\n"):
        offset, data = line.split(b":")
        result.append((int(offset), bytes.fromhex(data.decode())))
    return result


class Invariants:
    """The committed prefix of the whole cluster, as the nodes' high watermarks reveal it,
    and the checks of every node against it."""

    def __init__(self, nodes: dict[int, Node], fail: Callable[[str], NoReturn]) -> None:
        self.nodes = nodes
        self.fail = fail
        self.committed: list[raft_log.Entry] = []
        self.leaders: dict[int, int] = {}

    def apply(self, node: Node, committed: actions.Committed) -> None:
        expected = [
            (entry.offset, entry.data)
            for entry in self.committed[node.applied_end : committed.end_offset]
            if not entry.control
        ]
        got = [(entry.offset, entry.data) for entry in committed.entries]
        if got != expected or len(self.committed) < committed.end_offset:
            self.fail(f"node {node.id} applied {got}, the committed entries are {expected}")
        node.applied += got
        node.applied_end = committed.end_offset

    def load_snapshot(self, node: Node, loaded: actions.SnapshotLoaded) -> None:
        end = loaded.snapshot_id.offset
        state = decode_state(loaded.state)
        expected = [
            (entry.offset, entry.data) for entry in self.committed[:end] if not entry.control
        ]
        if state != expected or len(self.committed) < end:
            self.fail(
                f"node {node.id} loaded snapshot {loaded.snapshot_id}: not the committed prefix"
            )
        if self.committed[end - 1].epoch != loaded.snapshot_id.epoch:
            self.fail(f"snapshot {loaded.snapshot_id}: entry {end - 1} has another epoch")
        node.applied = state
        node.applied_end = end

    def check_node(self, node: Node) -> None:
        raft = node.client
        assert raft is not None
        log = node.log
        if raft.epoch < node.epoch:
            self.fail(f"node {node.id}: epoch went back from {node.epoch} to {raft.epoch}")
        node.epoch = raft.epoch
        if raft.is_leader:
            if self.leaders.setdefault(raft.epoch, node.id) != node.id:
                self.fail(
                    f"two leaders in epoch {raft.epoch}: {self.leaders[raft.epoch]}, {node.id}"
                )
            if node.led_epoch != raft.epoch:
                node.led_epoch = raft.epoch
                self.check_leader_completeness(node)
        hw = raft.high_watermark
        if hw < node.high_watermark:
            self.fail(f"node {node.id}: high watermark went back {node.high_watermark} -> {hw}")
        node.high_watermark = hw
        snapshot = log.latest_snapshot_id()
        start = log.log_start_offset
        if (snapshot.offset if snapshot else 0) != start:
            self.fail(f"node {node.id}: log start {start}, latest snapshot {snapshot}")
        if hw > node.verified:
            if start > len(self.committed):
                self.fail(f"node {node.id}: log starts at {start} past the commits known")
            offset = max(node.verified, start)
            for entry in log.read(offset, 1 << 30)[: hw - offset] if offset < hw else []:
                self.commit(node, entry)
            node.verified = hw
        self.check_majority_holds_the_commits()

    def check_majority_holds_the_commits(self) -> None:
        """What is committed survives any crash: a majority of the logs hold it durably."""
        committed = len(self.committed)
        durable = sum(node.log.flushed_end_offset >= committed for node in self.nodes.values())
        if durable <= len(self.nodes) // 2:
            self.fail(f"only {durable} logs hold the {committed} committed entries durably")

    def commit(self, node: Node, entry: raft_log.Entry) -> None:
        committed = self.committed
        if entry.offset < len(committed):
            if committed[entry.offset] != entry:
                self.fail(
                    f"node {node.id}: committed entry {committed[entry.offset]} is {entry} there"
                )
        elif entry.offset == len(committed):
            committed.append(entry)
        else:
            self.fail(f"node {node.id}: commits {entry} past the end {len(committed)}")

    def check_leader_completeness(self, node: Node) -> None:
        log = node.log
        if log.end_offset < len(self.committed):
            self.fail(f"leader {node.id} lacks committed entries: its log ends at {log.end_offset}")
        start = log.log_start_offset
        if start < len(self.committed):
            held = log.read(start, 1 << 30)[: len(self.committed) - start]
            if held != self.committed[start:]:
                self.fail(
                    f"leader {node.id} of epoch {node.epoch} lost or changed committed entries"
                )

    def check_final(self) -> None:
        expected = [(entry.offset, entry.data) for entry in self.committed if not entry.control]
        for node in self.nodes.values():
            if node.applied != expected:
                self.fail(f"node {node.id}: the state machine differs from the committed data")
            log = node.log
            start = log.log_start_offset
            if log.read(start, 1 << 30) != self.committed[start:]:
                self.fail(f"node {node.id}: its log differs from the committed log")
