"""`strom-operator`: runs the kopf operator with Strom's settings, and its /metrics."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

import kopf

from strom_operator import handlers, metrics
from strom_operator import settings as settings_module
from strom_operator.reconcile import model
from strom_operator.runtime import Runtime

FINALIZER = f"{model.GROUP}/finalizer"

DESCRIPTION = """\
The Strom operator: reconciles KafkaCluster, Topic and SparkJob resources (group strom.io).

It reaches the apiserver with --kubeconfig, else $KUBECONFIG or ~/.kube/config, else the
pod's service account. Kopf keeps its progress in annotations under strom.io/, its
finalizer is strom.io/finalizer, and it posts an Event on the KafkaCluster for every
action it takes. Liveness: http://0.0.0.0:LIVENESS_PORT/healthz; Prometheus metrics:
http://0.0.0.0:METRICS_PORT/metrics.
"""


def kopf_settings(ours: settings_module.OperatorSettings) -> kopf.OperatorSettings:
    """kopf's own settings for the operator: where it keeps its state, how it posts."""
    settings = kopf.OperatorSettings()
    settings.peering.standalone = ours.peering is None
    if ours.peering is not None:
        settings.peering.name = ours.peering
        settings.peering.clusterwide = ours.clusterwide
        settings.peering.mandatory = True
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=model.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=model.GROUP, key="last-handled-configuration"
    )
    settings.posting.enabled = True
    settings.posting.level = logging.INFO
    # A KafkaCluster deleted while its timer's pass is running keeps kopf's finalizer until
    # that pass has ended, and kopf looks again only every cancellation_polling seconds
    # (60 by default): the deletion waited a minute for a pass of a few seconds.
    settings.background.cancellation_polling = 1
    return settings


def connection_info() -> kopf.ConnectionInfo:
    """Credentials from $KUBECONFIG (or ~/.kube/config), else the service account."""
    probe = kopf.OperatorSettings()
    info = kopf.login_with_kubeconfig(settings=probe) or kopf.login_with_service_account(
        settings=probe
    )
    if info is None:
        raise SystemExit(
            "strom-operator: no credentials: give --kubeconfig, set KUBECONFIG, "
            "or run in a pod with a service account"
        )
    return info


async def run(ours: settings_module.OperatorSettings, connection: kopf.ConnectionInfo) -> None:
    """The operator until it is stopped: kopf with our handlers, and the metrics server."""
    runtime = Runtime.start(ours, connection)
    server = await metrics.start_server(ours.metrics_port) if ours.metrics_port else None
    try:
        await kopf.operator(
            registry=handlers.build_registry(ours.reconcile_interval_s),
            settings=kopf_settings(ours),
            memo=kopf.Memo(runtime=runtime),
            standalone=ours.peering is None,
            peering_name=ours.peering,
            liveness_endpoint=f"http://0.0.0.0:{ours.liveness_port}/healthz",
            clusterwide=ours.clusterwide,
            namespaces=ours.namespaces,
        )
    finally:
        await runtime.kube.close()
        if server is not None:
            await server.cleanup()


def parser() -> argparse.ArgumentParser:
    epilog = "environment:\n" + (settings_module.__doc__ or "").split("\n\n", 1)[1]
    result = argparse.ArgumentParser(
        prog="strom-operator",
        description=DESCRIPTION,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    result.add_argument("--kubeconfig", help="the kubeconfig file to use (default: $KUBECONFIG)")
    result.add_argument("--verbose", action="store_true", help="log at DEBUG level")
    return result


def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    try:
        ours = settings_module.from_environment()
    except settings_module.SettingsError as error:
        sys.exit(f"strom-operator: {error}")
    asyncio.run(run(ours, connection_info()))


if __name__ == "__main__":
    main()
