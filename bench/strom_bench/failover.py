"""F1's arithmetic: reading FailoverProbe's lines and the failover time of one leader kill.

FailoverProbe (bench/peer) prints one line per acknowledged record (`ack SEQ SEND_US ACK_US`),
per failed one (`error ...`) and per change of the partition's leader or ISR or of the active
controller (`state TIME_US LEADER ISR CONTROLLER`), times in microseconds of the host's wall
clock. A record sent after the kill can only be acknowledged by a new leader (the old one is
dead), and the idempotent producer acknowledges in order, so the failover time of a kill at
K is: the acknowledgement time of the first record sent at or after K, minus K (the gap the
producer sees in its acks).
Pure: no processes; `ProbeReader` only reads the file the probe writes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

MICROS = 1_000_000


@dataclass(frozen=True)
class Ack:
    seq: int
    sent_us: int
    acked_us: int


@dataclass(frozen=True)
class PartitionState:
    """The partition's leader (-1: none) and ISR, and the active controller (the metadata
    quorum's leader, -1: not known), as the probe's admin client saw them."""

    time_us: int
    leader: int
    isr: tuple[int, ...]
    controller: int


@dataclass
class ProbeLog:
    """Everything read so far from one probe."""

    acks: list[Ack] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    states: list[PartitionState] = field(default_factory=list)

    def add_line(self, line: str) -> None:
        words = line.split()
        if not words:
            return
        if words[0] == "ack" and len(words) == 4:
            self.acks.append(Ack(int(words[1]), int(words[2]), int(words[3])))
        elif words[0] == "error":
            self.errors.append(line)
        elif words[0] == "state" and len(words) == 5:
            isr = () if words[3] == "-" else tuple(int(n) for n in words[3].split(","))
            self.states.append(PartitionState(int(words[1]), int(words[2]), isr, int(words[4])))

    @property
    def state(self) -> PartitionState | None:
        return self.states[-1] if self.states else None

    def isr_full(self, replicas: int) -> bool:
        """The partition has a leader and all `replicas` in its ISR."""
        state = self.state
        return state is not None and state.leader >= 0 and len(state.isr) == replicas

    def acked_since(self, time_us: int) -> bool:
        """Some record sent at or after `time_us` was acknowledged."""
        return failover_s(self.acks, time_us) is not None

    def ack_gap_s(self, kill_us: int) -> float | None:
        """The longest silence between acknowledgements from the last one before `kill_us`
        to the failover (the ack of the first record sent after the kill); None until then.
        Responses already on their way when the leader died may still arrive after the kill."""
        recovered = failover_s(self.acks, kill_us)
        if recovered is None:
            return None
        recovered_us = kill_us + round(recovered * MICROS)
        before = [a.acked_us for a in self.acks if a.acked_us < kill_us]
        times = sorted(a.acked_us for a in self.acks if kill_us <= a.acked_us <= recovered_us)
        times.insert(0, max(before) if before else kill_us)
        return max(b - a for a, b in itertools.pairwise(times)) / MICROS


def failover_s(acks: list[Ack], kill_us: int) -> float | None:
    """Seconds from the kill to the acknowledgement of the first record sent at or after it;
    None while no such record has been acknowledged. Acks come in send order (one
    partition, an idempotent producer), so the search runs from the end."""
    first: Ack | None = None
    for ack in reversed(acks):
        if ack.sent_us < kill_us:
            break
        first = ack
    if first is None:
        return None
    return (first.acked_us - kill_us) / MICROS


class ProbeReader:
    """Reads the lines a running probe has appended to its output since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.log = ProbeLog()
        self._offset = 0
        self._partial = b""

    def poll(self) -> ProbeLog:
        if self.path.exists():
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
            self._offset += len(chunk)
            *lines, self._partial = (self._partial + chunk).split(b"\n")
            for line in lines:
                self.log.add_line(line.decode("utf-8", "replace"))
        return self.log
