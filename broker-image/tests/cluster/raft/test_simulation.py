"""The deterministic simulation of the Raft core (raft_sim.py): thousands of seeds of a
quorum under message loss, delay, duplication and reordering, partitions, crash-restarts
that lose unflushed writes, snapshots and client appends, invariants checked after every
event. A failure names its seed: ``make raft-sim SEED=<seed>`` replays it with its trace;
``make raft-sim SEEDS=100000`` runs many more.
"""

from __future__ import annotations

import pytest
import raft_sim

SEEDS = 3000
CHUNK = 100


@pytest.mark.parametrize("start", range(0, SEEDS, CHUNK))
def test_random_seeds_keep_every_invariant(start: int) -> None:
    for seed in range(start, start + CHUNK):
        raft_sim.run_seed(seed)


@pytest.mark.parametrize("voters", [1, 3, 5])
def test_a_quiet_network_elects_a_leader_and_commits(voters: int) -> None:
    quiet = raft_sim.Scenario(
        duration_ms=500, drop=0, duplicate=0, crashes=False, partitions=False, snapshots=False
    )
    simulation = raft_sim.Simulation(seed=7, scenario=quiet, voters=voters).run()
    # one election, no more
    assert max(node.epoch for node in simulation.nodes.values()) == 1
    assert len(simulation.invariants.committed) > 10


def test_a_harsh_network_still_converges_once_healed() -> None:
    harsh = raft_sim.Scenario(drop=0.3, duplicate=0.2, max_delay_ms=15)
    for seed in range(50):
        raft_sim.Simulation(seed=seed, scenario=harsh, voters=5).run()


def test_a_failure_names_its_seed_and_its_trace() -> None:
    simulation = raft_sim.Simulation(seed=3, voters=3)
    simulation.run()
    with pytest.raises(raft_sim.SimulationFailure) as failure:
        simulation.fail("a made-up failure")
    text = str(failure.value)
    assert "seed 3 (3 voters)" in text
    assert "make raft-sim SEED=3" in text
    assert "deliver" in text
