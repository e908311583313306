"""Keys of the ZooKeeper era that Kafka 4 removed, which old server.properties still set.

A tutorial's `server.properties` (broker.id=0, port=9092, zookeeper.connect=...) should
start a broker, not stop at the first key Kafka 4 no longer knows: these keys are set
aside and the broker logs ONE warning naming each with what replaced it
(`removed_keys_warning`). Any other unknown key is still an error (typo protection).
The list is Kafka's upgrade notes (3.0 and 4.0) and the ZooKeeper client configs.
"""

from __future__ import annotations

from collections.abc import Iterable

_SHUTDOWN = "nothing (a KRaft broker shuts down through the controller)"
_TIMESTAMPS = "log.message.timestamp.before.max.ms and log.message.timestamp.after.max.ms"
_NO_ZOOKEEPER = (
    "Kafka 4 and Strom have no ZooKeeper: the controller quorum keeps the metadata"
    " (controller.quorum.voters or controller.quorum.bootstrap.servers)"
)

# key -> what replaced it
REMOVED_KEYS: dict[str, str] = {
    "port": "listeners",
    "host.name": "listeners",
    "advertised.port": "advertised.listeners",
    "advertised.host.name": "advertised.listeners",
    "control.plane.listener.name": "controller.listener.names",
    "broker.id.generation.enable": "node.id (set it on every node)",
    "reserved.broker.max.id": "node.id (set it on every node)",
    "controlled.shutdown.max.retries": _SHUTDOWN,
    "controlled.shutdown.retry.backoff.ms": _SHUTDOWN,
    "inter.broker.protocol.version": "nothing (the cluster's metadata.version feature)",
    "log.message.format.version": "nothing (Kafka 4 writes record batch v2 only)",
    "message.format.version": "nothing (Kafka 4 writes record batch v2 only)",
    "log.message.downconversion.enable": "nothing (Kafka 4 no longer down-converts)",
    "log.message.timestamp.difference.max.ms": _TIMESTAMPS,
    "offsets.commit.required.acks": "nothing (offset commits wait for all in-sync replicas)",
    "delegation.token.master.key": "delegation.token.secret.key",
    "quota.producer.default": "client quotas (kafka-configs.sh --entity-type clients)",
    "quota.consumer.default": "client quotas (kafka-configs.sh --entity-type clients)",
    "group.coordinator.new.enable": "group.coordinator.rebalance.protocols",
    "eligible.leader.replicas.enable": "nothing (the eligible.leader.replicas.version feature)",
    "password.encoder.secret": "nothing (ZooKeeper-only)",
    "password.encoder.old.secret": "nothing (ZooKeeper-only)",
    "password.encoder.keyfactory.algorithm": "nothing (ZooKeeper-only)",
    "password.encoder.cipher.algorithm": "nothing (ZooKeeper-only)",
    "password.encoder.key.length": "nothing (ZooKeeper-only)",
    "password.encoder.iterations": "nothing (ZooKeeper-only)",
}


def is_removed_key(key: str) -> bool:
    """zookeeper.* (connect, timeouts, TLS, migration) or one of REMOVED_KEYS."""
    return key.startswith("zookeeper.") or key in REMOVED_KEYS


def removed_keys_warning(keys: Iterable[str]) -> str | None:
    """One line naming every removed key found, grouped by replacement; None if none."""
    by_replacement: dict[str, list[str]] = {}
    for key in sorted(set(keys)):
        replacement = _NO_ZOOKEEPER if key.startswith("zookeeper.") else REMOVED_KEYS[key]
        by_replacement.setdefault(replacement, []).append(key)
    if not by_replacement:
        return None
    parts = [f"{', '.join(names)} -> {what}" for what, names in by_replacement.items()]
    return "ignoring keys Kafka 4 removed (ZooKeeper era): " + "; ".join(parts)
