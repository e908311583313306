# The chaos test (e2e/test_chaos.py, e2e/README.md) run long. Included by the top Makefile,
# which defines BIN (.venv/bin) and the install target; `make test` runs it short (90 s).
#   make chaos                 30 minutes of faults with a fresh seed (printed first)
#   make chaos MINUTES=5       shorter (whole minutes)
#   make chaos SEED=1234       replay that seed's nemesis schedule
MINUTES ?= 30
.PHONY: chaos chaos-txn

chaos: install
	CHAOS_SECONDS=$$(( $(MINUTES) * 60 )) $(if $(SEED),CHAOS_SEED=$(SEED)) \
		$(BIN)/pytest e2e/test_chaos.py -s $(PYTEST_ARGS)

# The transactional chaos test (e2e/test_chaos_txn.py) run long, the same way (`make test`
# runs it for 60 s).
chaos-txn: install
	CHAOS_SECONDS=$$(( $(MINUTES) * 60 )) $(if $(SEED),CHAOS_SEED=$(SEED)) \
		$(BIN)/pytest e2e/test_chaos_txn.py -s -k broker_faults $(PYTEST_ARGS)
