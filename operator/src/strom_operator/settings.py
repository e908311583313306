"""The operator's settings, from its environment (every name below is documented in
`strom-operator --help`).

STROM_OPERATOR_NAMESPACES        comma-separated namespaces to watch; empty: cluster-wide
STROM_OPERATOR_PEERING           kopf peering name for running several replicas (HA: one
                                 is active); empty: standalone, no peering objects needed
STROM_OPERATOR_LIVENESS_PORT     kopf's liveness endpoint, http://0.0.0.0:PORT/healthz (8080)
STROM_OPERATOR_METRICS_PORT      Prometheus metrics, http://0.0.0.0:PORT/metrics (9405);
                                 0 serves none
STROM_OPERATOR_RECONCILE_INTERVAL  seconds between each resource's timer reconciles (30)
STROM_OPERATOR_THROTTLE_BYTES    replication throttle (bytes/s per broker) while partitions
                                 are moved by the operator (10485760); 0: unthrottled
STROM_OPERATOR_MAX_MOVES         partitions moved per reconcile step when spreading (10)
STROM_OPERATOR_BROKER_ADDRESS    how the operator reaches a cluster's brokers: "pod-ip"
                                 (default: the broker pods' IPs, so an operator outside
                                 the pod network works where pod IPs are routable) or
                                 "service" (the bootstrap Service's DNS name: in-cluster)
STROM_OPERATOR_BOOTSTRAP_SERVERS host:port,... for every cluster, overriding the above
                                 (tests whose brokers are local processes, no pods)
STROM_OPERATOR_KAFKA_TIMEOUT     seconds each admin call may take (10)
STROM_OPERATOR_SPARK_MASTER      the --master of a SparkJob's spark-submit, as its
                                 submission Job sees the apiserver
                                 (k8s://https://kubernetes.default.svc)
STROM_OPERATOR_SPARK_ENTRYPOINT  the command of the Spark driver and executor containers
                                 (strom-spark-entrypoint; Spark gives it their args)
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Mapping

PREFIX = "STROM_OPERATOR_"


class BrokerAddress(enum.Enum):
    POD_IP = "pod-ip"
    SERVICE = "service"


class SettingsError(ValueError):
    """An environment variable's value cannot be used; the message names it."""


@dataclasses.dataclass(frozen=True)
class OperatorSettings:
    namespaces: tuple[str, ...] = ()
    peering: str | None = None
    liveness_port: int = 8080
    metrics_port: int = 9405
    reconcile_interval_s: float = 30.0
    throttle_bytes_per_s: int = 10 * 1024 * 1024
    max_moves: int = 10
    broker_address: BrokerAddress = BrokerAddress.POD_IP
    bootstrap_servers: str | None = None
    kafka_timeout_s: float = 10.0
    spark_master: str = "k8s://https://kubernetes.default.svc"
    spark_entrypoint: str = "strom-spark-entrypoint"

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces


def from_environment(environ: Mapping[str, str] | None = None) -> OperatorSettings:
    env = os.environ if environ is None else environ
    defaults = OperatorSettings()

    def text(name: str) -> str:
        return env.get(PREFIX + name, "").strip()

    def number(name: str, default: float, kind: type[int] | type[float]) -> float:
        raw = text(name)
        if not raw:
            return default
        try:
            value = kind(raw)
        except ValueError:
            raise SettingsError(f"{PREFIX}{name}={raw!r}: expected a number") from None
        if value < 0:
            raise SettingsError(f"{PREFIX}{name}={raw!r}: must not be negative")
        return value

    address = text("BROKER_ADDRESS") or defaults.broker_address.value
    try:
        broker_address = BrokerAddress(address)
    except ValueError:
        raise SettingsError(
            f"{PREFIX}BROKER_ADDRESS={address!r}: expected pod-ip or service"
        ) from None
    return OperatorSettings(
        namespaces=tuple(ns.strip() for ns in text("NAMESPACES").split(",") if ns.strip()),
        peering=text("PEERING") or None,
        liveness_port=int(number("LIVENESS_PORT", defaults.liveness_port, int)),
        metrics_port=int(number("METRICS_PORT", defaults.metrics_port, int)),
        reconcile_interval_s=number("RECONCILE_INTERVAL", defaults.reconcile_interval_s, float),
        throttle_bytes_per_s=int(number("THROTTLE_BYTES", defaults.throttle_bytes_per_s, int)),
        max_moves=int(number("MAX_MOVES", defaults.max_moves, int)),
        broker_address=broker_address,
        bootstrap_servers=text("BOOTSTRAP_SERVERS") or None,
        kafka_timeout_s=number("KAFKA_TIMEOUT", defaults.kafka_timeout_s, float),
        spark_master=text("SPARK_MASTER") or defaults.spark_master,
        spark_entrypoint=text("SPARK_ENTRYPOINT") or defaults.spark_entrypoint,
    )
