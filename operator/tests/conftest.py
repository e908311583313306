"""The operator's fast tier: the real operator (kopf, in the test's event loop) against kmock's
Kubernetes emulator, with a real strom-server behind every admin call.

kmock runs no controllers: no StatefulSet makes pods, no garbage collector follows owner
references. So the tests create the broker pod objects themselves (with the Ready
condition a kubelet would set), and the operator reaches the broker, a local process,
through STROM_OPERATOR_BOOTSTRAP_SERVERS (settings.bootstrap_servers) instead of pod IPs.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import kmock
import kopf
import pytest
from strom_operator import handlers, k8s, main, settings
from strom_operator.runtime import Runtime

# e2e's strom_process runs the brokers; operator_tier holds the tests' helpers
TESTS_DIR = Path(__file__).resolve().parent
for folder in (TESTS_DIR.parents[1] / "e2e", TESTS_DIR):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import strom_process  # noqa: E402
from operator_tier import NAMESPACE  # noqa: E402

INTERVAL_S = 1.0

# kopf watches only what discovery says can be listed and watched
VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}
RESOURCES = {
    # kopf's backbone waits to discover these (it lists neither with scanning disabled)
    "v1/namespaces": kmock.ResourceInfo(kind="Namespace", namespaced=False, verbs=VERBS),
    "apiextensions.k8s.io/v1/customresourcedefinitions": kmock.ResourceInfo(
        kind="CustomResourceDefinition", namespaced=False, verbs=VERBS
    ),
    "strom.io/v1alpha1/kafkaclusters": kmock.ResourceInfo(
        kind="KafkaCluster", namespaced=True, verbs=VERBS, subresources={"status", "scale"}
    ),
    "strom.io/v1alpha1/topics": kmock.ResourceInfo(
        kind="Topic", namespaced=True, verbs=VERBS, subresources={"status"}
    ),
    "v1/pods": kmock.ResourceInfo(kind="Pod", namespaced=True, verbs=VERBS),
    "v1/events": kmock.ResourceInfo(kind="Event", namespaced=True, verbs=VERBS),
    "v1/configmaps": kmock.ResourceInfo(kind="ConfigMap", namespaced=True, verbs=VERBS),
    "v1/services": kmock.ResourceInfo(kind="Service", namespaced=True, verbs=VERBS),
    "v1/persistentvolumeclaims": kmock.ResourceInfo(
        kind="PersistentVolumeClaim", namespaced=True, verbs=VERBS
    ),
    "apps/v1/statefulsets": kmock.ResourceInfo(
        kind="StatefulSet", namespaced=True, verbs=VERBS, subresources={"status", "scale"}
    ),
    "storage.k8s.io/v1/storageclasses": kmock.ResourceInfo(
        kind="StorageClass", namespaced=False, verbs=VERBS
    ),
    "policy/v1/poddisruptionbudgets": kmock.ResourceInfo(
        kind="PodDisruptionBudget", namespaced=True, verbs=VERBS
    ),
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[strom_process.StromProcess]:
    """One real broker for a test module (each test uses its own topic names)."""
    with strom_process.running_broker(
        tmp_path_factory.mktemp("strom"), overrides=strom_process.SHARED_BROKER_OVERRIDES
    ) as process:
        yield process


@pytest.fixture
async def kube(kmock: kmock.KubernetesEmulator) -> AsyncIterator[k8s.Client]:
    for name, info in RESOURCES.items():
        kmock.resources[name] = info
    async with k8s.Client(kopf.ConnectionInfo(server=str(kmock.url))) as client:
        yield client


@pytest.fixture
def bootstrap_servers(broker: strom_process.StromProcess) -> str:
    """Where the operator finds the brokers (a test module may point it elsewhere)."""
    return broker.bootstrap


@pytest.fixture
def operator(
    kmock: kmock.KubernetesEmulator, kube: k8s.Client, bootstrap_servers: str
) -> Iterator[settings.OperatorSettings]:
    """strom-operator's kopf watching NAMESPACE, in a thread with its own event loop: kopf
    cancels every task of its loop that it did not start when it stops, the test's own
    included, so it cannot share the test's loop."""
    ours = settings.OperatorSettings(
        namespaces=(NAMESPACE,),
        reconcile_interval_s=INTERVAL_S,
        bootstrap_servers=bootstrap_servers,
        kafka_timeout_s=5.0,
        metrics_port=0,
    )
    kopf_settings = main.kopf_settings(ours)
    # kmock serves no namespace or CRD lists: the namespace is given, discovery is enough
    kopf_settings.scanning.disabled = True
    connection = kopf.ConnectionInfo(server=str(kmock.url))
    stop = threading.Event()
    ready = threading.Event()

    async def run() -> None:
        runtime = Runtime.start(ours, connection)
        try:
            await kopf.operator(
                registry=handlers.build_registry(ours.reconcile_interval_s),
                settings=kopf_settings,
                memo=kopf.Memo(runtime=runtime),
                standalone=True,
                namespaces=ours.namespaces,
                stop_flag=stop,
                ready_flag=ready,
            )
        finally:
            await runtime.kube.close()

    thread = threading.Thread(target=asyncio.run, args=(run(),), name="kopf", daemon=True)
    thread.start()
    assert ready.wait(10), "kopf did not start within 10 s"
    try:
        yield ours
    finally:
        stop.set()
        thread.join(15)
        assert not thread.is_alive(), "kopf did not stop within 15 s"
