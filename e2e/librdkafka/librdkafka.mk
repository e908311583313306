# librdkafka's own test suite against Strom (e2e/librdkafka/README.md). Included by the
# top Makefile, which defines BIN (.venv/bin), PYTEST_ARGS and the install-python target.
#   make librdkafka-tests  build librdkafka 2.0.2 and its test-runner from Debian's source
#                          package into ~/.cache/strom/librdkafka/<version> (skipped when there)
#   make librdkafka-suite  build it if needed, then run the allow-list against Strom
.PHONY: librdkafka-tests librdkafka-suite

librdkafka-tests:
	bash e2e/librdkafka/build.sh

librdkafka-suite: install-python librdkafka-tests
	$(BIN)/pytest e2e/test_librdkafka_suite.py $(PYTEST_ARGS)
