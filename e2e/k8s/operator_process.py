"""The real `strom-operator` as a process on this machine, with the tests' kubeconfig.

On the harness's control plane it is one more of the harness's components: its log is
attached to a failing test's report with the others', and `Harness.stop()` (or the sweep
by run id) ends it. Against another cluster it is stopped by `stop()` alone.

It reaches the brokers at their pod IPs (the operator's default, STROM_OPERATOR_BROKER_
ADDRESS=pod-ip), which the host routes to over the harness's bridge.
"""

from __future__ import annotations

import os
import shutil
import sys
import urllib.request
from pathlib import Path

from k8s_harness import Cluster, Component, free_port, wait_for

STARTUP_TIMEOUT_S = 60


def operator_argv(kubeconfig: str) -> list[str]:
    """strom-operator beside this Python (the project's .venv/bin), else from PATH."""
    beside = Path(sys.executable).parent / "strom-operator"
    command = str(beside) if beside.exists() else shutil.which("strom-operator")
    assert command, "no strom-operator: install the project with its operator extra"
    return [command, "--kubeconfig", kubeconfig]


def start_operator(
    cluster: Cluster,
    namespace: str,
    log_dir: Path,
    reconcile_interval_s: float,
    more_settings: dict[str, str] | None = None,
) -> Component:
    """The operator watching `namespace`, live (its liveness endpoint answers);
    `more_settings`: other STROM_OPERATOR_* variables."""
    liveness_port = free_port()
    settings = {
        "STROM_OPERATOR_NAMESPACES": namespace,
        "STROM_OPERATOR_RECONCILE_INTERVAL": str(reconcile_interval_s),
        "STROM_OPERATOR_LIVENESS_PORT": str(liveness_port),
        "STROM_OPERATOR_METRICS_PORT": "0",
        **(more_settings or {}),
    }
    harness = cluster.harness
    run_id = harness.run_id if harness is not None else "external"
    component = Component("strom-operator", operator_argv(cluster.kubeconfig), log_dir, run_id)
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)  # Component passes os.environ on to its process
    try:
        component.start()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if harness is not None:
        harness.components.append(component)

    def live() -> bool:
        component.check_alive()
        url = f"http://127.0.0.1:{liveness_port}/healthz"
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)

    wait_for("strom-operator live", live, STARTUP_TIMEOUT_S, every=0.5)
    return component
