"""The Raft tests; the simulation harness is raft_sim.py beside this file."""

from __future__ import annotations

import sys
from pathlib import Path

RAFT_TESTS = Path(__file__).resolve().parent
if str(RAFT_TESTS) not in sys.path:
    sys.path.insert(0, str(RAFT_TESTS))
