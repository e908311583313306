"""`python -m strom_bench quick|full|profile` (with bench/ on PYTHONPATH)."""

import sys

from strom_bench import cli

sys.exit(cli.main(sys.argv[1:]))
