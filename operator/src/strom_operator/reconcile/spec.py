"""Custom resources read into typed specs, with the CRD's defaults filled in and checked.

A KafkaCluster's `config` is checked with the broker's own config definitions
(strom.config: unknown keys with the broker's did-you-mean, each value parsed by its
definition) before anything is rendered or rolled; a refusal is a `model.SpecError`
whose message a user reads in the resource's status. The keys the operator sets itself
(node identity, listeners, the quorum, the data directory...) are refused in `config`.

The defaults here are the ones the CRD schema declares (crds/), so that an object that
skipped the schema's defaulting (an older stored version, a test body) means the same.
"""

from __future__ import annotations

import base64
import decimal
import hashlib
import re
import uuid
from collections.abc import Mapping
from typing import Any

from strom.config import broker as broker_settings
from strom.config import definitions, removed_keys
from strom.config import topics as topic_settings

from strom_operator.reconcile import model

DEFAULT_BROKERS = 3
DEFAULT_IMAGE = "strom/broker:0.1.0"
DEFAULT_STORAGE_SIZE = "10Gi"
DEFAULT_LISTENERS = (model.ListenerSpec("PLAINTEXT", model.KAFKA_PORT),)
CONTROLLER_LISTENER = "CONTROLLER"

# Keys the operator sets in every node's properties (properties.py) or in the pod's
# command: a user value would break the node's identity, the quorum or the volumes.
# The value says where the user's intent goes instead.
OPERATOR_KEYS: Mapping[str, str] = {
    "node.id": "the pod's ordinal in the StatefulSet",
    "broker.id": "the pod's ordinal in the StatefulSet",
    "process.roles": "spec.controllers",
    "listeners": "spec.listeners",
    "advertised.listeners": "spec.listeners (each pod advertises its own IP)",
    "listener.security.protocol.map": "spec.listeners",
    "controller.listener.names": "the operator (the quorum's listener)",
    "inter.broker.listener.name": "spec.listeners (the first one)",
    "controller.quorum.voters": "spec.controllers",
    "controller.quorum.bootstrap.servers": "spec.controllers",
    "log.dir": "spec.storage (the data volume)",
    "log.dirs": "spec.storage (the data volume)",
    "metadata.log.dir": "spec.storage (the data volume)",
    "metrics.listener": "spec.metrics (the probes use it too)",
    "cluster.id": "the KafkaCluster's metadata.uid",
    "broker.rack": "spec.rack.topologyKey",
}

# Broker configs whose value no cluster of N brokers can satisfy when above N.
_AT_MOST_BROKERS = (
    "default.replication.factor",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "min.insync.replicas",
)

# A listener's name is also its port's name in the pod and Services (lower case, '-' for
# '_'): an IANA service name of at most 15 characters.
_LISTENER_NAME = re.compile(r"[A-Z](?:[A-Z0-9]|_(?=[A-Z0-9])){0,14}")
# the pod's other ports (manifests.py)
_RESERVED_LISTENER_NAMES = (CONTROLLER_LISTENER, "METRICS", "HEALTH")
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


# --- KafkaCluster ---------------------------------------------------------------------


def parse_cluster(body: Mapping[str, Any]) -> model.ClusterSpec:
    """A KafkaCluster object (metadata and spec) as a checked ClusterSpec; SpecError else."""
    metadata = _mapping(body.get("metadata"), "metadata")
    spec = _mapping(body.get("spec"), "spec")
    names = model.ClusterNames(
        cluster=_required_str(metadata, "name", "metadata"),
        namespace=_required_str(metadata, "namespace", "metadata"),
    )
    uid = _required_str(metadata, "uid", "metadata")
    brokers = _int(spec, "brokers", DEFAULT_BROKERS, minimum=1)
    controllers = _int(spec, "controllers", min(model.DEFAULT_CONTROLLERS, brokers), minimum=1)
    if controllers > brokers:
        raise model.SpecError(
            "InvalidSpec",
            f"spec.controllers ({controllers}) is more than spec.brokers ({brokers}): the"
            " controllers are the first brokers' pods",
        )
    listeners = _listeners(spec)
    metrics = _metrics(spec)
    clashing = [x for x in listeners if x.port == metrics.port]
    if clashing:
        raise model.SpecError(
            "InvalidSpec",
            f"spec.listeners: {clashing[0].name} uses port {metrics.port}, the port of"
            " spec.metrics (the broker's HTTP endpoint and probes)",
        )
    return model.ClusterSpec(
        names=names,
        uid=uid,
        generation=_int(metadata, "generation", 1, minimum=0, where="metadata"),
        brokers=brokers,
        controllers=controllers,
        image=_str(spec, "image", DEFAULT_IMAGE),
        storage=_storage(spec),
        resources=_resources(spec),
        config=broker_config(spec.get("config"), brokers=brokers),
        listeners=listeners,
        rack_topology_key=_rack(spec),
        metrics=metrics,
        template=_template(spec),
    )


def broker_config(raw: object, *, brokers: int) -> dict[str, str]:
    """spec.config as the broker's properties: every key known to the broker, not one the
    operator sets, each value valid for its definition and rendered as the broker writes
    it (true/false, trimmed numbers, comma-separated lists)."""
    config = _mapping(raw if raw is not None else {}, "spec.config")
    result: dict[str, str] = {}
    for key, value in config.items():
        key = str(key)
        if key in OPERATOR_KEYS:
            raise model.SpecError(
                "OperatorOwnedConfig",
                f"spec.config: {key} is set by the operator (from {OPERATOR_KEYS[key]});"
                " remove it from spec.config",
            )
        if removed_keys.is_removed_key(key):
            replaced = removed_keys.removed_keys_warning([key]) or ""
            raise model.SpecError(
                "UnknownConfig",
                f"spec.config: {key} is one of the {replaced.removeprefix('ignoring ')}",
            )
        definition = definitions.BROKER_CONFIGS.get(key)
        if definition is None:
            raise model.SpecError(
                "UnknownConfig", f"spec.config: {broker_settings.unknown_broker_key_error(key)}"
            )
        result[key] = _rendered(definition, value, "spec.config")
    for key in _AT_MOST_BROKERS:
        if key in result and int(result[key]) > brokers:
            raise model.SpecError(
                "InvalidConfig",
                f"spec.config: {key}={result[key]} is more than spec.brokers ({brokers})",
            )
    return result


def dynamic_config(spec: model.ClusterSpec) -> dict[str, str]:
    """The part of spec.config the brokers take at run time (AlterConfigs on the
    cluster-wide broker default): changing it restarts nothing."""
    return {k: v for k, v in spec.config.items() if definitions.BROKER_CONFIGS[k].dynamic}


def static_config(spec: model.ClusterSpec) -> dict[str, str]:
    """The part of spec.config a broker reads only at start: changing it rolls the pods."""
    return {k: v for k, v in spec.config.items() if not definitions.BROKER_CONFIGS[k].dynamic}


def cluster_id(uid: str) -> str:
    """The Kafka cluster id of a KafkaCluster: its metadata.uid's 16 bytes in URL-safe
    base64 without padding (Kafka's Uuid text), so the same object always gets the same
    id and the operator keeps no state for it. A uid that is not a UUID (an API
    emulator's) gives the first 16 bytes of its SHA-256 instead. Kafka never hands out an
    id that starts with '-' (a command line would read it as an option); such an id
    starts with '_' here."""
    try:
        raw = uuid.UUID(uid).bytes
    except ValueError:
        raw = hashlib.sha256(uid.encode()).digest()[:16]
    text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    return "_" + text[1:] if text.startswith("-") else text


def _listeners(spec: Mapping[str, Any]) -> tuple[model.ListenerSpec, ...]:
    raw = spec.get("listeners")
    if raw is None:
        return DEFAULT_LISTENERS
    if not isinstance(raw, list) or not raw:
        raise model.SpecError("InvalidSpec", "spec.listeners must be a non-empty list")
    listeners: list[model.ListenerSpec] = []
    for index, item in enumerate(raw):
        where = f"spec.listeners[{index}]"
        entry = _mapping(item, where)
        name = _required_str(entry, "name", where)
        port = _int(entry, "port", None, minimum=1, maximum=65535, where=where)
        if not _LISTENER_NAME.fullmatch(name):
            raise model.SpecError(
                "InvalidSpec",
                f"{where}.name {name!r}: up to 15 upper-case letters, digits and single '_',"
                " starting with a letter (a listener name such as PLAINTEXT or INTERNAL)",
            )
        if name in _RESERVED_LISTENER_NAMES:
            raise model.SpecError(
                "InvalidSpec",
                f"{where}.name {name!r} is reserved for the broker pod's own ports"
                f" ({', '.join(_RESERVED_LISTENER_NAMES)})",
            )
        if port == model.CONTROLLER_PORT:
            raise model.SpecError(
                "InvalidSpec",
                f"{where}.port {port} is the controller quorum's port, which the operator sets",
            )
        for other in listeners:
            if other.name == name or other.port == port:
                raise model.SpecError(
                    "InvalidSpec",
                    f"{where}: {name}:{port} repeats the name or port of {other.name}:{other.port}",
                )
        listeners.append(model.ListenerSpec(name, port))
    return tuple(listeners)


def _metrics(spec: Mapping[str, Any]) -> model.MetricsSpec:
    metrics = _mapping(spec.get("metrics", {}), "spec.metrics")
    enabled = metrics.get("enabled", True)
    if not isinstance(enabled, bool):
        raise model.SpecError("InvalidSpec", "spec.metrics.enabled must be true or false")
    port = _int(metrics, "port", model.METRICS_PORT, minimum=1, maximum=65535, where="spec.metrics")
    if port == model.CONTROLLER_PORT:
        raise model.SpecError(
            "InvalidSpec", f"spec.metrics.port {port} is the controller quorum's port"
        )
    return model.MetricsSpec(enabled=enabled, port=port)


def _storage(spec: Mapping[str, Any]) -> model.StorageSpec:
    storage = _mapping(spec.get("storage", {}), "spec.storage")
    size = _str(storage, "size", DEFAULT_STORAGE_SIZE, where="spec.storage")
    try:
        size_bytes = parse_quantity(size)
    except ValueError as error:
        raise model.SpecError("InvalidStorageSize", f"spec.storage.size: {error}") from None
    if size_bytes <= 0:
        raise model.SpecError("InvalidStorageSize", f"spec.storage.size {size!r} is not positive")
    storage_class = storage.get("storageClassName")
    if storage_class is not None and not isinstance(storage_class, str):
        raise model.SpecError("InvalidSpec", "spec.storage.storageClassName must be a string")
    delete_claim = storage.get("deleteClaim", False)
    if not isinstance(delete_claim, bool):
        raise model.SpecError("InvalidSpec", "spec.storage.deleteClaim must be true or false")
    return model.StorageSpec(
        size=size,
        size_bytes=size_bytes,
        storage_class=storage_class or None,
        delete_claim=delete_claim,
    )


def _resources(spec: Mapping[str, Any]) -> model.JsonObject:
    """spec.resources, its requests and limits checked as quantities (a bad one would
    only show as the StatefulSet's refusal by the API server)."""
    resources = dict(_mapping(spec.get("resources") or {}, "spec.resources"))
    for part in ("requests", "limits"):
        for name, value in _mapping(resources.get(part) or {}, f"spec.resources.{part}").items():
            try:
                parse_quantity(str(value) if isinstance(value, int | float) else value)
            except ValueError as error:
                raise model.SpecError(
                    "InvalidSpec", f"spec.resources.{part}.{name}: {error}"
                ) from None
    return resources


def _rack(spec: Mapping[str, Any]) -> str | None:
    rack = spec.get("rack")
    if rack is None:
        return None
    # Any node label: see manifests.py for the two that reach the pods by themselves.
    return _required_str(_mapping(rack, "spec.rack"), "topologyKey", "spec.rack")


def _template(spec: Mapping[str, Any]) -> model.TemplateSpec:
    template = _mapping(spec.get("template", {}), "spec.template")
    pod = _mapping(template.get("pod", {}), "spec.template.pod")
    tolerations = pod.get("tolerations", [])
    if not isinstance(tolerations, list) or not all(isinstance(t, dict) for t in tolerations):
        raise model.SpecError("InvalidSpec", "spec.template.pod.tolerations must be a list")
    affinity = pod.get("affinity")
    if affinity is not None and not isinstance(affinity, dict):
        raise model.SpecError("InvalidSpec", "spec.template.pod.affinity must be an object")
    priority = pod.get("priorityClassName")
    if priority is not None and not isinstance(priority, str):
        raise model.SpecError("InvalidSpec", "spec.template.pod.priorityClassName: a string")
    return model.TemplateSpec(
        pod_labels=_string_map(pod.get("labels"), "spec.template.pod.labels"),
        pod_annotations=_string_map(pod.get("annotations"), "spec.template.pod.annotations"),
        tolerations=tuple(dict(t) for t in tolerations),
        affinity=dict(affinity) if affinity else None,
        priority_class_name=priority or None,
    )


# --- Topic ----------------------------------------------------------------------------


def parse_topic(body: Mapping[str, Any]) -> model.TopicSpec:
    """A Topic object as a checked TopicSpec; SpecError for what the brokers would refuse."""
    metadata = _mapping(body.get("metadata"), "metadata")
    spec = _mapping(body.get("spec"), "spec")
    name = _required_str(metadata, "name", "metadata")
    topic_name = _str(spec, "topicName", name)
    if not _TOPIC_NAME.fullmatch(topic_name) or topic_name in (".", ".."):
        raise model.SpecError(
            "InvalidTopicName",
            f"spec.topicName {topic_name!r}: a Kafka topic name is 1 to 249 letters, digits,"
            " '.', '_' or '-', and not '.' or '..'",
        )
    raw_config = _mapping(spec.get("config") or {}, "spec.config")
    config: dict[str, str | None] = {}
    for key, value in raw_config.items():
        definition = definitions.TOPIC_CONFIGS.get(str(key))
        if definition is None:
            raise model.SpecError(
                "UnknownConfig", f"spec.config: {topic_settings.unknown_topic_key_error(str(key))}"
            )
        config[str(key)] = _rendered(definition, value, "spec.config")
    try:
        checked = topic_settings.validate_topic_configs(config)
    except definitions.ConfigError as error:
        raise model.SpecError("InvalidConfig", f"spec.config: {error}") from None
    return model.TopicSpec(
        cluster=_required_str(spec, "cluster", "spec"),
        namespace=_required_str(metadata, "namespace", "metadata"),
        topic_name=topic_name,
        partitions=_optional_int(spec, "partitions", minimum=1),
        replication_factor=_optional_int(spec, "replicationFactor", minimum=1, maximum=32767),
        config=checked,
        generation=_int(metadata, "generation", 1, minimum=0, where="metadata"),
    )


# --- quantities -----------------------------------------------------------------------

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -3, "u": -2, "m": -1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?"
)


def parse_quantity(text: str) -> int:
    """A Kubernetes quantity ("10Gi", "1.5Gi", "500M", "1e9", "100m", "5n") as an integer,
    rounded up as Kubernetes' Quantity.Value() does; ValueError names what is wrong."""
    match = _QUANTITY.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(
            f"{text!r} is not a Kubernetes quantity (a number with an optional suffix:"
            " Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or an exponent such as e9)"
        )
    number = decimal.Decimal(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        number *= 1024 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        number = number.scaleb(3 * _DECIMAL[suffix])
    elif suffix:
        number = number.scaleb(int(suffix[1:]))
    if abs(number) >= 2**63:  # Kubernetes keeps quantities in 64 bits
        raise ValueError(f"{text!r} is too large for a Kubernetes quantity")
    return int(number.to_integral_value(rounding=decimal.ROUND_CEILING))


# --- reading JSON fields --------------------------------------------------------------


def _rendered(definition: definitions.ConfigDef, value: object, where: str) -> str:
    """A YAML value (string, number, boolean, list) as the property text the broker
    parses, checked by the broker's own definition, in its canonical form."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int | float | str):
        text = str(value)
    elif isinstance(value, list) and all(isinstance(v, str | int) for v in value):
        text = ",".join(str(v) for v in value)
    else:
        raise model.SpecError(
            "InvalidConfig",
            f"{where}: {definition.name} needs a string, number or boolean, got {value!r}",
        )
    try:
        parsed = definition.parse(text)
    except definitions.ConfigError as error:
        raise model.SpecError("InvalidConfig", f"{where}: {error}") from None
    rendered = definitions.render(definition, parsed)
    if rendered is None:  # a STRING config given an empty value
        return ""
    return rendered


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise model.SpecError("InvalidSpec", f"{where} must be an object")
    return value


def _string_map(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    mapping = _mapping(value, where)
    if not all(isinstance(v, str) for v in mapping.values()):
        raise model.SpecError("InvalidSpec", f"{where}: every value must be a string")
    return {str(k): v for k, v in mapping.items()}


def _required_str(mapping: Mapping[str, Any], key: str, where: str) -> str:
    value = mapping.get(key)
    if not isinstance(value, str) or not value:
        raise model.SpecError("InvalidSpec", f"{where}.{key} is required (a non-empty string)")
    return value


def _str(mapping: Mapping[str, Any], key: str, default: str, *, where: str = "spec") -> str:
    value = mapping.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or not value:
        raise model.SpecError("InvalidSpec", f"{where}.{key} must be a non-empty string")
    return value


def _int(
    mapping: Mapping[str, Any],
    key: str,
    default: int | None,
    *,
    minimum: int,
    maximum: int | None = None,
    where: str = "spec",
) -> int:
    """An integer field within bounds, its default when absent (required if None)."""
    value = mapping.get(key)
    if value is None:
        if default is None:
            raise model.SpecError("InvalidSpec", f"{where}.{key} is required (an integer)")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise model.SpecError("InvalidSpec", f"{where}.{key} must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"at least {minimum}" if maximum is None else f"{minimum} to {maximum}"
        raise model.SpecError("InvalidSpec", f"{where}.{key} must be {bounds}, got {value}")
    return int(value)


def _optional_int(
    mapping: Mapping[str, Any], key: str, *, minimum: int, maximum: int | None = None
) -> int | None:
    if mapping.get(key) is None:
        return None
    return _int(mapping, key, None, minimum=minimum, maximum=maximum)
