# `make run` and `make test` do all the set-up on a fresh machine: a virtualenv with
# pinned packages (requirements.lock), and for the tests the Java/kcat peers (whose jars
# include Apache Kafka's broker, which the client's differential tests start).
# requirements.lock pins the base dependencies and both extras: `client` (confluent-kafka,
# for the tools, the operator and the tests) and `test`; the broker image takes the base only.
# `make run` installs the broker's runtime only (requirements-runtime.lock, the base
# dependencies at requirements.lock's versions) and starts config/server.properties;
# `make tools` adds the `client` extra for the strom-* tools; `make install`/`make test` all.
# Benchmarks against Apache Kafka: bench/bench.mk (make bench, bench-quick, bench-profile).
# The Kubernetes tier: e2e/k8s/k8s.mk (make k8s-tools builds the control plane once, cached).
# The chaos test run long: e2e/chaos.mk (make chaos MINUTES=30 [SEED=n]).
# librdkafka's own test suite: e2e/librdkafka/librdkafka.mk (make librdkafka-tests builds it
# once, cached; make librdkafka-suite runs it alone).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
RUNTIME_STAMP := $(VENV)/.runtime-stamp
TOOLS_STAMP := $(VENV)/.tools-stamp
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
PYTEST_ARGS ?=

.PHONY: install install-python install-runtime tools peers spark-jars kafka-tools run test lint typecheck unit e2e clean raft-sim

install: install-python peers kafka-tools spark-jars

install-python: $(STAMP)

# Everything: the broker, the `client` extra and the test tools (a full install is also a
# runtime and a tools install).
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.lock
	$(PIP) --no-deps -e '.[client,test]'
	touch $(STAMP) $(RUNTIME_STAMP) $(TOOLS_STAMP)

install-runtime: $(RUNTIME_STAMP)

$(RUNTIME_STAMP): pyproject.toml requirements-runtime.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements-runtime.lock
	$(PIP) --no-deps -e .
	touch $(RUNTIME_STAMP)

# strom-topics, strom-console-producer, ... need the `client` extra (confluent-kafka)
tools: $(TOOLS_STAMP)

$(TOOLS_STAMP): $(RUNTIME_STAMP) requirements.lock
	$(PIP) --no-deps $$(grep -i '^confluent[-_]kafka==' requirements.lock)
	touch $(TOOLS_STAMP)

peers:
	bash e2e/peers/install.sh

# Spark's Kafka connector for the pinned pyspark (spark-on-k8s/pom.xml) -> spark-on-k8s/lib/
spark-jars:
	bash spark-on-k8s/install.sh

# Kafka's commands (kafka-topics.sh, ..., connect-standalone.sh, connect-mirror-maker.sh)
# in .venv/bin, running the pinned Apache Kafka jars of e2e/peers at WARN logging.
kafka-tools:
	bash e2e/peers/kafka_tools.sh $(BIN)

run: install-runtime
	@echo "Starting a broker and controller from config/server.properties: localhost:9092 (Ctrl-C stops it)."
	@echo "  Strom's tools (strom-topics, strom-console-producer, ...): make tools; they go to $(BIN)"
	@echo "  Kafka's tools (kafka-topics.sh, kafka-console-consumer.sh, ...): make kafka-tools puts them in $(BIN)"
	@echo "  More brokers: cp config/server.properties config/server-1.properties, set broker.id,"
	@echo "  listeners and log.dirs, then kafka-server-start.sh config/server-1.properties (README)"
	$(BIN)/strom-server config/server.properties

lint: install-python
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: install-python
	$(BIN)/mypy
	# the pipelines are scripts spark-submit runs, not a package: checked by path
	$(BIN)/mypy spark-on-k8s/jobs/*.py

unit: install-python
	$(BIN)/pytest broker-image/tests $(PYTEST_ARGS)

e2e: install
	$(BIN)/pytest e2e $(PYTEST_ARGS)

# The Raft core's deterministic simulation beyond the seeds `make test` runs:
# make raft-sim SEEDS=100000 [START=0] [JOBS=2], or replay one with its trace: SEED=1234
SEEDS ?= 10000
START ?= 0
JOBS ?= 2
raft-sim: install-python
	PYTHONPATH=$(CURDIR)/broker-image/src $(BIN)/python broker-image/tests/cluster/raft/raft_sim.py \
		$(if $(SEED),--seed $(SEED),--seeds $(SEEDS) --start $(START) --jobs $(JOBS))

# The Kubernetes tier (e2e/k8s) runs as a second pytest beside the rest (e2e/run_suite.py:
# it mostly waits on pods); PYTEST_ARGS go to both runs.
test: install k8s-tools helm librdkafka-tests prometheus lint typecheck
	$(BIN)/python e2e/run_suite.py $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .strom-data e2e/peers/lib e2e/peers/target spark-on-k8s/lib

include bench/bench.mk
include e2e/k8s/k8s.mk
include e2e/chaos.mk
include e2e/librdkafka/librdkafka.mk

# Debian's Prometheus and promtool (pinned), unpacked into ~/.cache/strom/prometheus for
# e2e/test_dashboards.py. Grafana does not run here: `make dashboards-preview` renders each
# dashboard of charts/strom/dashboards/ into a PNG (deploy/dashboards_preview.py), from
# PROMETHEUS=<url> if given (e.g. docker compose's http://localhost:9090), else from the
# dev cluster and Prometheus of e2e/test_dashboards.py; into PREVIEW_DIR.
.PHONY: prometheus dashboards-preview
PROMETHEUS ?=
PREVIEW_DIR ?= .strom-data/dashboards-preview
prometheus:
	bash deploy/prometheus/install.sh

dashboards-preview: install-python $(BENCH_STAMP) prometheus
	$(if $(PROMETHEUS),$(BIN)/python deploy/dashboards_preview.py --prometheus $(PROMETHEUS) --out $(PREVIEW_DIR),DASHBOARDS_PREVIEW_DIR=$(PREVIEW_DIR) $(BIN)/pytest e2e/test_dashboards.py -k dev_cluster $(PYTEST_ARGS))
