# Benchmarks side by side with Apache Kafka (bench/README.md). Included by the top Makefile
# (after its install-python rule); make runs in the repository root, so paths start there.
#   make bench           full run, ~15-20 min on 2 cores: bench/results/<timestamp>.{json,md,png}
#   make bench-quick     the same workloads, small and short: under 3 minutes
#   make bench-profile   P1 against Strom under py-spy: bench/results/<timestamp>-profile-p1.svg
#   make bench-profile-p2  P2 on 3 Strom nodes, py-spy on two: <timestamp>-profile-p2-node{1,2}.svg
# BENCH_ARGS passes options through, e.g. `make bench BENCH_ARGS="--rounds 7 --keep-run-dir"`.
VENV ?= .venv
BIN ?= $(VENV)/bin
BENCH_STAMP := $(VENV)/.bench-installed-stamp
BENCH_ARGS ?=
STROM_BENCH := PYTHONPATH=bench $(BIN)/python -m strom_bench

.PHONY: bench bench-quick bench-profile bench-profile-p2 bench-setup bench-clean

# Extra Python packages (matplotlib, py-spy) on top of the project's venv, reinstalled when
# bench/requirements.lock changes; then Kafka's jars and the bench's Java programs, and
# Spark's Kafka connector (SP1 runs the clickstream pipeline).
bench-setup: $(BENCH_STAMP) spark-jars
	bash bench/peer/install.sh

$(BENCH_STAMP): bench/requirements.lock | install-python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r bench/requirements.lock
	touch $@

bench: bench-setup
	$(STROM_BENCH) full $(BENCH_ARGS)

bench-quick: bench-setup
	$(STROM_BENCH) quick $(BENCH_ARGS)

bench-profile: bench-setup
	$(STROM_BENCH) profile $(BENCH_ARGS)

bench-profile-p2: bench-setup
	$(STROM_BENCH) profile --workload p2 $(BENCH_ARGS)

bench-clean:
	rm -rf bench/peer/lib bench/peer/target bench/run
