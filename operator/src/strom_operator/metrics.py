"""The operator's Prometheus metrics, in a registry of their own, served on /metrics.

strom_operator_reconciles_total{kind,result}     reconciles by resource kind and outcome
strom_operator_reconcile_seconds{kind}           how long each took
strom_operator_errors_total{kind,reason}         failures by kind and condition reason
strom_operator_actions_total{kind,action}        what the operator did to the cluster:
                                                 restart, reassignment, election, ...
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import prometheus_client
from aiohttp import web

REGISTRY = prometheus_client.CollectorRegistry(auto_describe=True)

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
