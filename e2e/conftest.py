"""Fixtures for whole-system tests: real strom-server processes and real Kafka peers.

The helper modules beside this file (strom_process, e2e_records, java_peers) are plain
modules, not tests; pytest runs in importlib mode without __init__.py files, so this
conftest puts e2e/ on sys.path once and the tests import them by name.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

E2E_DIR = Path(__file__).resolve().parent
if str(E2E_DIR) not in sys.path:
    sys.path.insert(0, str(E2E_DIR))

import strom_process  # noqa: E402
from apache_kafka import ApacheKafka  # noqa: E402
from java_peers import PEERS_DIR, JavaPeers  # noqa: E402
from kafka_commands import KafkaCommands  # noqa: E402
from strom_process import StromProcess  # noqa: E402


@pytest.fixture(scope="module")
def strom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromProcess]:
    """One broker for the tests of a module (each test uses its own topics).

    Stopped with SIGTERM at the end of the module, which must exit 0.
    """
    broker = StromProcess(
        tmp_path_factory.mktemp("strom"), overrides=strom_process.SHARED_BROKER_OVERRIDES
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def strom_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., StromProcess]]:
    """Make (not start) brokers with their own dirs and ports, e.g. for crash tests.

    `strom_factory(overrides={...})` returns a StromProcess; call .start() on it. Whatever
    is still running at the end of the test is stopped gracefully (must exit 0).
    """
    made: list[StromProcess] = []

    def make(**kwargs: object) -> StromProcess:
        broker = StromProcess(tmp_path_factory.mktemp("strom"), **kwargs)  # type: ignore[arg-type]
        made.append(broker)
        return broker

    yield make
    errors = []
    for broker in made:
        try:
            broker.stop()
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n\n".join(errors)


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (legal Kafka characters only)."""
    name = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")
    return name[:200]


@pytest.fixture(scope="session")
def java_peers() -> JavaPeers:
    """The Java client and Kafka CLI peers, built by e2e/peers/install.sh if needed."""
    try:
        return JavaPeers.install()
    except FileNotFoundError:
        pytest.skip("java is not installed (a JDK 17+ is needed for the Java peers)")


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory, java_peers: JavaPeers) -> Iterator[ApacheKafka]:
    """One Apache Kafka node (KRaft, from the peers' jars) for a module's differential tests:
    the same assertion against Kafka and against Strom."""
    if not any((PEERS_DIR / "lib").glob("kafka_2.13-*.jar")):
        pytest.skip("Apache Kafka's broker jars are not installed: run e2e/peers/install.sh java")
    node = ApacheKafka(tmp_path_factory.mktemp("kafka"), java_peers)
    try:
        node.start()
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def kafka_commands(tmp_path_factory: pytest.TempPathFactory) -> KafkaCommands:
    """Kafka's commands as `make kafka-tools` writes them (kafka-topics.sh,
    connect-standalone.sh, ...), into a directory of this session: this checkout's jars."""
    if shutil.which("java") is None:
        pytest.skip("java is not installed (a JDK 17+ is needed for Kafka's commands)")
    return KafkaCommands.install(tmp_path_factory.mktemp("kafka-bin"))


@pytest.fixture(scope="session")
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.skip("kcat is not installed: run e2e/peers/install.sh (apt-get install kcat)")
    return path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach the stderr of every running broker to a failing test's report."""
    report: pytest.TestReport = yield  # type: ignore[misc]
    if report.failed:
        for broker in list(strom_process.live):
            report.sections.append((f"strom-server {broker.bootstrap} stderr", broker.log_tail()))
    return report  # type: ignore[return-value]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Never leave a broker process behind, whatever happened."""
    for broker in list(strom_process.live):
        broker.kill()
