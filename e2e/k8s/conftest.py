"""Fixtures for the Kubernetes tier: a real control plane (k8s_harness) or any kubeconfig.

The tests here need the binaries that `make k8s-tools` (bash e2e/k8s/build.sh) builds from
Go modules, and root (network and mount namespaces). Without them every test in this folder
is skipped with the reason, so a plain `pytest` stays green on a machine that has not built
them. STROM_K8S_KUBECONFIG=/path/to/kubeconfig runs the same tests against another cluster
(e.g. kind, see e2e/kind/run.sh): then kubectl comes from PATH and no harness is started.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

K8S_DIR = Path(__file__).resolve().parent
if str(K8S_DIR) not in sys.path:
    sys.path.insert(0, str(K8S_DIR))

import k8s_harness  # noqa: E402
from k8s_harness import Cluster, Harness  # noqa: E402

EXTERNAL_KUBECONFIG = os.environ.get("STROM_K8S_KUBECONFIG")
running: list[Harness] = []


def skip_reason() -> str | None:
    if EXTERNAL_KUBECONFIG:
        if shutil.which("kubectl") is None and not k8s_harness.binaries_built():
            return "STROM_K8S_KUBECONFIG is set but there is no kubectl on PATH"
        return None
    if not k8s_harness.binaries_built():
        return (
            f"the Kubernetes binaries are not built in {k8s_harness.binaries_dir()}: "
            "run `make k8s-tools` (bash e2e/k8s/build.sh)"
        )
    if os.geteuid() != 0:
        return "the test kubelet needs root (network and mount namespaces, veths)"
    for tool in ("ip", "nsenter", "openssl"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = skip_reason()
    if reason is None:
        return
    for item in items:
        if K8S_DIR in item.path.parents:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster for one test module: our own control plane, or STROM_K8S_KUBECONFIG's."""
    if EXTERNAL_KUBECONFIG:
        kubectl = shutil.which("kubectl") or str(k8s_harness.binaries_dir() / "kubectl")
        yield Cluster(kubectl, EXTERNAL_KUBECONFIG, None)
        return
    harness = Harness(tmp_path_factory.mktemp("k8s"))
    running.append(harness)
    try:
        harness.start()
        print(f"\ncontrol plane up, seconds since start: {harness.timings}")
        yield Cluster(str(harness.bin / "kubectl"), str(harness.kubeconfig), harness)
    finally:
        harness.stop()
        running.remove(harness)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach the control plane's and the pods' logs to a failing test's report."""
    report: pytest.TestReport = yield  # type: ignore[misc]
    if report.failed and K8S_DIR in item.path.parents:
        for harness in running:
            for component in harness.components:
                report.sections.append((f"{component.name} log", component.log_tail()))
            for log in sorted((harness.root / "kubelet" / "pods").glob("*/logs/*.log")):
                tail = log.read_bytes()[-k8s_harness.LOG_TAIL_CHARS :].decode("utf-8", "replace")
                report.sections.append((f"pod {log.parts[-3]} {log.stem}", tail))
    return report  # type: ignore[return-value]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Never leave a control plane or a pod behind, whatever happened."""
    for harness in list(running):
        harness.stop()
