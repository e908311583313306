"""Make bench/ importable (`strom_bench`) for the harness's unit tests; no broker starts here."""

import sys
from pathlib import Path

BENCH_DIR = str(Path(__file__).resolve().parent.parent)
if BENCH_DIR not in sys.path:
    sys.path.insert(0, BENCH_DIR)
