"""A deterministic simulation of a Raft quorum (Kafka's RaftEventSimulationTest, smaller).

One seed decides everything: a scheduler on a simulated clock runs the nodes' timers, a
network that delays, drops, duplicates and reorders messages and cuts the cluster in
partitions that come and go, crashes that lose what a node had not flushed, client appends
at the leader, and snapshots. After every event the invariants are checked:

- at most one leader per epoch, and a node's epoch never goes back (restarts included);
- a new leader's log holds every committed entry (leader completeness);
- a committed entry is never lost or changed: every node's log agrees with the committed
  prefix up to its high watermark, and a majority of logs hold that prefix durably;
- a node's high watermark never goes back (a restarted node starts again from its log);
- a node's state machine holds exactly the committed prefix, entry by entry or from a
  snapshot that is the committed prefix's state;
- a log starts at its latest snapshot (or at 0 without one).

Then the faults stop and the cluster must converge (liveness): one leader, every node in
its epoch with the same committed log and state. A failure raises `SimulationFailure`
with the seed and the last events, and

    make raft-sim SEED=<seed>

replays it (``make raft-sim SEEDS=10000 START=0`` runs many). Run as a script:
``python raft_sim.py --seeds N --start S [--jobs J]`` or ``--seed S [--verbose]``.
"""

from __future__ import annotations

import argparse
import collections
import heapq
import multiprocessing
import random
import sys
import time
from dataclasses import dataclass
from typing import Any, NoReturn

import raft_invariants
from strom.cluster.raft import actions, client, leader, messages
from strom.cluster.raft import config as raft_config

RAFT = raft_config.RaftConfig(
    election_timeout_ms=50,
    fetch_timeout_ms=100,
    election_backoff_max_ms=50,
    retry_backoff_ms=5,
    request_timeout_ms=60,
    fetch_max_wait_ms=20,
    fetch_max_bytes=400,
    snapshot_chunk_bytes=64,
)
TRACE_LENGTH = 200


@dataclass(frozen=True)
class Scenario:
    """What one seed runs: the faults, then a healed quiet period that must converge."""

    duration_ms: int = 1500
    heal_ms: int = 2000
    max_delay_ms: int = 8
    drop: float = 0.05
    duplicate: float = 0.03
    crashes: bool = True
    partitions: bool = True
    snapshots: bool = True


class SimulationFailure(AssertionError):
    pass


Node = raft_invariants.Node


class Simulation:
    def __init__(self, seed: int, scenario: Scenario | None = None, voters: int | None = None):
        self.seed = seed
        self.scenario = scenario or Scenario()
        self.rng = random.Random(seed)
        count = voters or self.rng.choice((1, 3, 3, 3, 5))
        self.voters = frozenset(range(1, count + 1))
        self.nodes = {node_id: Node(node_id) for node_id in sorted(self.voters)}
        self.invariants = raft_invariants.Invariants(self.nodes, self.fail)
        self.now = 0
        self.queue: list[tuple[int, int, str, Any]] = []
        self.sequence = 0
        self.trace: collections.deque[tuple[int, str, Any]] = collections.deque(maxlen=TRACE_LENGTH)
        self.healed = False
        self.appended = 0
        self.events = 0
        for node in self.nodes.values():
            self._start(node)

    # ---- the scheduler

    def schedule(self, at: int, kind: str, payload: Any = None) -> None:
        self.sequence += 1
        heapq.heappush(self.queue, (at, self.sequence, kind, payload))

    def run(self) -> Simulation:
        scenario = self.scenario
        self.schedule(self.rng.randrange(5, 40), "append")
        if scenario.crashes and len(self.voters) > 1:
            self.schedule(self.rng.randrange(100, 600), "crash")
        if scenario.partitions and len(self.voters) > 1:
            self.schedule(self.rng.randrange(50, 400), "partition")
        if scenario.snapshots:
            self.schedule(self.rng.randrange(50, 300), "snapshot")
        self.schedule(scenario.duration_ms, "heal")
        end = scenario.duration_ms + scenario.heal_ms
        same_time = 0
        try:
            while self.queue:
                at, _, kind, payload = heapq.heappop(self.queue)
                if at > end:
                    break
                if at == self.now:
                    same_time += 1
                    if same_time > 5000:
                        self.fail("livelock: 5000 events without the clock moving")
                else:
                    same_time = 0
                self.now = at
                self.step(kind, payload)
                if self.healed and self.converged():
                    break
            else:
                self.fail("the event queue ran dry")
            if not self.converged():
                self.fail("no convergence after healing (liveness)")
            self.invariants.check_final()
        except SimulationFailure:
            raise
        except Exception as error:
            self.fail(f"{type(error).__name__}: {error}")
        return self

    def step(self, kind: str, payload: Any) -> None:
        self.events += 1
        if kind == "wake":
            node_id, version = payload
            node = self.nodes[node_id]
            if node.client is None or version != node.wake_version:
                return
            node.wake_at = None
            self.record("poll", node_id)
            self.process(node, node.client.poll(self.now))
        elif kind == "deliver":
            self.deliver(payload)
        elif kind == "append":
            self.client_append()
            # after healing, slower: the cluster must catch up between appends
            pace = (50, 150) if self.healed else (5, 60)
            self.schedule(self.now + self.rng.randrange(*pace), "append")
        elif kind == "crash":
            self.crash()
        elif kind == "restart":
            self.restart(self.nodes[payload])
        elif kind == "partition":
            self.partition()
        elif kind == "rejoin":
            self.record("rejoin", None)
            for node in self.nodes.values():
                node.group = 0
            if not self.healed:
                self.schedule(self.now + self.rng.randrange(50, 400), "partition")
        elif kind == "snapshot":
            self.snapshot()
        elif kind == "heal":
            self.heal()
        else:
            raise AssertionError(kind)

    def record(self, kind: str, detail: Any) -> None:
        self.trace.append((self.now, kind, detail))

    # ---- the nodes

    def _start(self, node: Node) -> None:
        node.client = client.RaftClient(
            node.id,
            self.voters,
            node.log,
            node.store,
            RAFT,
            random.Random(self.rng.getrandbits(32)),
            self.now,
        )
        node.applied = []
        node.applied_end = 0
        node.high_watermark = 0
        node.verified = node.log.log_start_offset
        node.wake_at = None
        self.process(node, [])

    def process(self, node: Node, outputs: list[actions.Action]) -> None:
        raft = node.client
        assert raft is not None
        self.invariants.check_node(node)
        for action in outputs:
            if isinstance(action, actions.Send):
                self.send(node.id, action)
            elif isinstance(action, actions.Committed):
                self.invariants.apply(node, action)
            elif isinstance(action, actions.SnapshotLoaded):
                self.invariants.load_snapshot(node, action)
            else:
                self.record("leader", (node.id, action.leader_id, action.epoch))
        wake = max(self.now, raft.next_wakeup_ms())
        if node.wake_at != wake:
            node.wake_at = wake
            node.wake_version += 1
            self.schedule(wake, "wake", (node.id, node.wake_version))

    def send(self, source: int, action: actions.Send) -> None:
        envelope = messages.Envelope(
            source, action.destination, action.message, action.correlation_id
        )
        scenario = self.scenario
        lossy = not self.healed
        if lossy and self.rng.random() < scenario.drop:
            self.record("drop", envelope)
            return
        copies = 2 if lossy and self.rng.random() < scenario.duplicate else 1
        for _ in range(copies):
            self.schedule(
                self.now + self.rng.randint(1, scenario.max_delay_ms), "deliver", envelope
            )

    def deliver(self, envelope: messages.Envelope) -> None:
        source = self.nodes[envelope.source]
        node = self.nodes[envelope.destination]
        if node.client is None or source.group != node.group:
            self.record("lost", envelope)
            return
        self.record("deliver", envelope)
        self.process(node, node.client.handle(envelope, self.now))

    def client_append(self) -> None:
        leaders = [node for node in self.nodes.values() if node.client and node.client.is_leader]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        assert node.client is not None
        data = []
        for _ in range(self.rng.randint(1, 3)):
            self.appended += 1
            data.append(b"r%d" % self.appended)
        offset = node.client.append(data)
        self.record("append", (node.id, data, offset))
        self.process(node, [])

    def crash(self) -> None:
        live = [node for node in self.nodes.values() if node.client is not None]
        if live:
            node = self.rng.choice(live)
            self.record("crash", node.id)
            node.client = None
            node.log = node.log.crash()
            node.wake_version += 1
            self.schedule(self.now + self.rng.randrange(20, 300), "restart", node.id)
        if not self.healed:
            self.schedule(self.now + self.rng.randrange(100, 700), "crash")

    def restart(self, node: Node) -> None:
        if node.client is not None:
            return
        self.record("restart", node.id)
        self._start(node)

    def partition(self) -> None:
        ids = sorted(self.nodes)
        self.rng.shuffle(ids)
        cut = self.rng.randrange(1, len(ids))
        for index, node_id in enumerate(ids):
            self.nodes[node_id].group = 0 if index < cut else 1
        self.record("partition", (sorted(ids[:cut]), sorted(ids[cut:])))
        self.schedule(self.now + self.rng.randrange(50, 400), "rejoin")

    def snapshot(self) -> None:
        live = [node for node in self.nodes.values() if node.client is not None]
        node = self.rng.choice(live) if live else None
        if node and node.client and node.applied_end > node.log.log_start_offset:
            snapshot_id = node.client.create_snapshot(
                node.applied_end, raft_invariants.encode_state(node.applied)
            )
            self.record("snapshot", (node.id, snapshot_id))
            self.invariants.check_node(node)
        if not self.healed:
            self.schedule(self.now + self.rng.randrange(50, 300), "snapshot")

    def heal(self) -> None:
        self.record("heal", None)
        self.healed = True
        for node in self.nodes.values():
            node.group = 0
            if node.client is None:
                self.restart(node)
        self.queue = [event for event in self.queue if event[2] in ("wake", "deliver", "restart")]
        heapq.heapify(self.queue)
        self.schedule(self.now + 1, "append")

    # ---- failures

    def fail(self, message: str) -> NoReturn:
        lines = [f"seed {self.seed} ({len(self.voters)} voters) at {self.now} ms: {message}"]
        lines.append(f"replay: make raft-sim SEED={self.seed}")
        lines.append(f"the last {len(self.trace)} events:")
        lines += [f"  {at:6d} {kind:9s} {detail}" for at, kind, detail in self.trace]
        lines.append(self.describe())
        raise SimulationFailure("\n".join(lines))

    def describe(self) -> str:
        lines = []
        for node in self.nodes.values():
            raft = node.client
            state = "down" if raft is None else f"{raft.state.name}@{raft.epoch}"
            hw = "-" if raft is None else raft.high_watermark
            lines.append(
                f"  node {node.id}: {state} log [{node.log.log_start_offset}, "
                f"{node.log.end_offset}) flushed {node.log.flushed_end_offset} hw {hw} "
                f"applied {node.applied_end}"
            )
        return "\n".join(lines)

    def converged(self) -> bool:
        clients = [node.client for node in self.nodes.values()]
        if any(raft is None for raft in clients):
            return False
        leaders = [raft for raft in clients if raft is not None and raft.is_leader]
        if len(leaders) != 1 or self.appended == 0:
            return False
        the_leader = leaders[0]
        state = the_leader.state
        assert isinstance(state, leader.LeaderState)
        entries = self.nodes[the_leader.node_id].log.entries()
        end = the_leader.log.end_offset
        if entries and entries[-1].control:
            return False  # wait for one client append in the final epoch
        return all(
            raft is not None and raft.epoch == the_leader.epoch and raft.high_watermark == end
            for raft in clients
        ) and all(node.applied_end == end for node in self.nodes.values())


def run_seed(seed: int) -> int:
    """Run one seed; the number of events it took."""
    return Simulation(seed).run().events


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, help="replay one seed and print its trace")
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    if args.seed is not None:
        simulation = Simulation(args.seed)
        simulation.trace = collections.deque(maxlen=None)
        try:
            simulation.run()
        except SimulationFailure as failure:
            print(failure)
            return 1
        print(
            f"seed {args.seed}: ok, {simulation.events} events, "
            f"{len(simulation.invariants.committed)} committed\n{simulation.describe()}"
        )
        return 0
    started = time.monotonic()
    seeds = range(args.start, args.start + args.seeds)
    failures = 0
    events = 0
    with multiprocessing.Pool(args.jobs) as pool:
        for result in pool.imap_unordered(_run_quietly, seeds, chunksize=16):
            if isinstance(result, str):
                failures += 1
                print(result, file=sys.stderr)
            else:
                events += result
    elapsed = time.monotonic() - started
    print(
        f"{args.seeds} seeds from {args.start}: {failures} failed, {events} events, {elapsed:.1f} s"
    )
    return 1 if failures else 0


def _run_quietly(seed: int) -> int | str:
    try:
        return run_seed(seed)
    except SimulationFailure as failure:
        return str(failure)


if __name__ == "__main__":
    sys.exit(main())
