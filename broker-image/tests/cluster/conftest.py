"""The cluster tests' helper modules (no_logs.py) sit beside this file."""

from __future__ import annotations

import sys
from pathlib import Path

CLUSTER_TESTS = Path(__file__).resolve().parent
if str(CLUSTER_TESTS) not in sys.path:
    sys.path.insert(0, str(CLUSTER_TESTS))
