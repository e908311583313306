"""The operator's Prometheus metrics, in a registry of their own, served on /metrics.

strom_operator_reconciles_total{kind,result}     reconciles by resource kind and outcome
strom_operator_reconcile_seconds{kind}           how long each took
strom_operator_errors_total{kind,reason}         failures by kind and condition reason
strom_operator_actions_total{kind,action}        what the operator did to the cluster:
                                                 restart, reassignment, election, ...
strom_operator_conditions{kind,namespace,name,type}   1 while a resource's status
                                                 condition is True, 0 while not
strom_operator_sparkjob_state{namespace,name,state}   1 for a SparkJob's current state
process_*                                        the operator process: CPU, memory, fds
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

import prometheus_client
from aiohttp import web

from strom_operator.reconcile.sparkjob_status import State

REGISTRY = prometheus_client.CollectorRegistry(auto_describe=True)
prometheus_client.ProcessCollector(registry=REGISTRY)

RECONCILES = prometheus_client.Counter(
    "strom_operator_reconciles",
    "Reconciles by resource kind and result (ok, error, refused).",
    ["kind", "result"],
    registry=REGISTRY,
)
DURATION = prometheus_client.Histogram(
    "strom_operator_reconcile_seconds",
    "How long each reconcile took.",
    ["kind"],
    registry=REGISTRY,
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
ERRORS = prometheus_client.Counter(
    "strom_operator_errors",
    "Failed reconciles by resource kind and reason (a status condition's reason).",
    ["kind", "reason"],
    registry=REGISTRY,
)
ACTIONS = prometheus_client.Counter(
    "strom_operator_actions",
    "Actions on a cluster: restart, reassignment, election, scale, topic changes.",
    ["kind", "action"],
    registry=REGISTRY,
)

CONDITIONS = prometheus_client.Gauge(
    "strom_operator_conditions",
    "A resource's status conditions as last written: 1 while True, 0 while False or "
    "Unknown (KafkaCluster Ready/Degraded/..., Topic Ready, SparkJob Running/Completed).",
    ["kind", "namespace", "name", "type"],
    registry=REGISTRY,
)
SPARKJOB_STATE = prometheus_client.Gauge(
    "strom_operator_sparkjob_state",
    "1 for a SparkJob's current state (status.state), 0 for the others.",
    ["namespace", "name", "state"],
    registry=REGISTRY,
)
# the condition types shown per (kind, namespace, name): forgotten ones are removed
_shown_conditions: dict[tuple[str, str, str], set[str]] = {}


def record_status(kind: str, namespace: str, name: str, status: Mapping[str, Any]) -> None:
    """Show the conditions (and a SparkJob's state) of the status just written."""
    key = (kind, namespace, name)
    types = set()
    for condition in status.get("conditions") or []:
        kind_of = str(condition.get("type"))
        types.add(kind_of)
        CONDITIONS.labels(*key, kind_of).set(int(condition.get("status") == "True"))
    for gone in _shown_conditions.get(key, set()) - types:
        CONDITIONS.remove(*key, gone)
    _shown_conditions[key] = types
    if kind == "SparkJob" and status.get("state") in set(State):
        for state in State:
            SPARKJOB_STATE.labels(namespace, name, state.value).set(
                int(state.value == status["state"])
            )


def forget(kind: str, namespace: str, name: str) -> None:
    """A resource was deleted: its series go (Prometheus marks them stale)."""
    for gone in _shown_conditions.pop((kind, namespace, name), set()):
        CONDITIONS.remove(kind, namespace, name, gone)
    if kind == "SparkJob":
        for state in State:
            with contextlib.suppress(KeyError):
                SPARKJOB_STATE.remove(namespace, name, state.value)


class Outcome:
    """What a timed reconcile ended with; `ok` unless the reconciler says otherwise."""

    def __init__(self) -> None:
        self.result = "ok"

    def failed(self, kind: str, reason: str) -> None:
        self.result = "error"
        ERRORS.labels(kind, reason).inc()

    def refused(self, kind: str, reason: str) -> None:
        self.result = "refused"
        ERRORS.labels(kind, reason).inc()


@contextlib.contextmanager
def reconcile(kind: str) -> Iterator[Outcome]:
    """Count and time one reconcile of a `kind` resource (an exception counts as error)."""
    outcome = Outcome()
    start = time.monotonic()
    try:
        yield outcome
    except Exception as error:
        outcome.failed(kind, type(error).__name__)
        raise
    finally:
        DURATION.labels(kind).observe(time.monotonic() - start)
        RECONCILES.labels(kind, outcome.result).inc()


def action(kind: str, name: str) -> None:
    ACTIONS.labels(kind, name).inc()


async def _serve(request: web.Request) -> web.Response:
    body = prometheus_client.generate_latest(REGISTRY)
    return web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})


async def start_server(port: int, host: str = "0.0.0.0") -> web.AppRunner:
    """Serve /metrics on host:port until the returned runner is cleaned up."""
    app = web.Application()
    app.router.add_get("/metrics", _serve)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
