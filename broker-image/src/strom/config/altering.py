"""Changing configs at run time: what AlterConfigs and IncrementalAlterConfigs turn a
topic's overrides, or a dynamic broker layer, into — or why they refuse.

Pure functions over the stored raw strings; the server persists and applies the result.
Two kinds of refusal, as Kafka answers them:

- `ConfigError` (INVALID_CONFIG): a topic config is unknown or its value invalid, or an
  APPEND/SUBTRACT names a config that is not a list;
- `InvalidConfigRequest` (INVALID_REQUEST): the request itself is wrong — a key given
  twice, a null value to SET, an unknown operation — and every refusal of a broker
  config, which Kafka reports as INVALID_REQUEST (KAFKA-13609), e.g. "Cannot update
  these configs dynamically: node.id".
"""

from __future__ import annotations

import collections
import dataclasses
import enum
from collections.abc import Callable, Iterable, Mapping

from strom.config import broker as broker_module
from strom.config import definitions
from strom.config import groups as groups_module
from strom.config import topics as topics_module


class InvalidConfigRequest(ValueError):
    """Kafka's INVALID_REQUEST for a config change; the message is shown to the client."""


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs `config_operation` codes (Kafka's AlterConfigOp.OpType)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclasses.dataclass(frozen=True)
class ConfigChange:
    name: str
    op: AlterOp
    value: str | None


def parse_changes(raw: Iterable[tuple[str, int, str | None]]) -> list[ConfigChange]:
    """(name, operation code, value) triples of a request, checked as Kafka's broker
    checks them before anything else: no key twice, a known operation, no null to set."""
    items = list(raw)
    _refuse_duplicates(name for name, _, _ in items)
    changes = []
    nulls = []
    for name, code, value in items:
        try:
            op = AlterOp(code)
        except ValueError:
            raise InvalidConfigRequest(f"Unknown operation type {code} for {name}") from None
        if op is not AlterOp.DELETE and value is None:
            nulls.append(name)
        changes.append(ConfigChange(name, op, value))
    if nulls:
        raise InvalidConfigRequest(f"Null value not supported for : {', '.join(nulls)}")
    return changes


def _refuse_duplicates(names: Iterable[str]) -> None:
    repeated = [name for name, count in collections.Counter(names).items() if count > 1]
    if repeated:
        raise InvalidConfigRequest(f"Error due to duplicate config keys: {', '.join(repeated)}")


def apply_changes(
    stored: Mapping[str, str],
    changes: Iterable[ConfigChange],
    table: Mapping[str, definitions.ConfigDef],
    current_value: Callable[[str], str | None],
) -> dict[str, str]:
    """The stored settings after the incremental changes (raw strings, not yet validated).

    APPEND and SUBTRACT work on the list the config has now — the setting of this
    layer, else the value it inherits (`current_value`) — so appending `compact` to a
    topic that inherits `delete` gives `delete,compact`. Kafka starts from the built-in
    default instead, which silently drops an inherited broker setting."""
    result = dict(stored)
    for change in changes:
        if change.op is AlterOp.SET:
            assert change.value is not None
            result[change.name] = change.value
        elif change.op is AlterOp.DELETE:
            result.pop(change.name, None)
        else:
            definition = table[change.name]
            if definition.type is not definitions.ConfigType.LIST:
                raise definitions.ConfigError(
                    f"Can't {change.op.name} to key {change.name} because its type is not LIST.",
                    change.name,
                )
            existing = result.get(change.name, current_value(change.name)) or ""
            items = [item.strip() for item in existing.split(",") if item.strip()]
            operands = [item.strip() for item in (change.value or "").split(",") if item.strip()]
            if change.op is AlterOp.APPEND:
                items += [item for item in dict.fromkeys(operands) if item not in items]
            else:
                items = [item for item in items if item not in operands]
            result[change.name] = ",".join(items)
    return result


# --- topics


def altered_topic_configs(
    stored: Mapping[str, str],
    changes: Iterable[ConfigChange],
    effective: topics_module.TopicConfig,
) -> dict[str, str]:
    """A topic's overrides after IncrementalAlterConfigs, validated (canonical strings).

    `effective` is the topic's config now, which APPEND/SUBTRACT start from."""
    changes = list(changes)
    for change in changes:
        _check_topic_key(change.name)

    def current_value(name: str) -> str | None:
        entries = effective.entries([name])
        return entries[0].value if entries else None

    result = apply_changes(stored, changes, definitions.TOPIC_CONFIGS, current_value)
    return topics_module.validate_topic_configs(result)


def replaced_topic_configs(configs: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """A topic's overrides after the legacy AlterConfigs, which replaces all of them."""
    items = list(configs)
    _refuse_duplicates(name for name, _ in items)
    return topics_module.validate_topic_configs(dict(items))


def _check_topic_key(name: str) -> None:
    if name not in definitions.TOPIC_CONFIGS:
        raise topics_module.unknown_topic_key_error(name)


# --- groups


def altered_group_configs(
    stored: Mapping[str, str],
    changes: Iterable[ConfigChange],
    broker: broker_module.BrokerConfig,
) -> dict[str, str]:
    """A group's configs after IncrementalAlterConfigs, validated against the broker's
    bounds (canonical strings); a refusal is a ConfigError (INVALID_CONFIG), as Kafka's."""
    changes = list(changes)
    for change in changes:
        if change.name not in groups_module.GROUP_CONFIGS:
            raise groups_module.unknown_group_key_error(change.name)
    effective = groups_module.effective_group_config(broker, {})

    def current_value(name: str) -> str | None:
        return effective.entries([name])[0].value

    result = apply_changes(stored, changes, groups_module.GROUP_CONFIGS, current_value)
    return groups_module.effective_group_config(broker, result).overrides


# --- the dynamic broker layers


def altered_broker_layer(
    stored: Mapping[str, str],
    changes: Iterable[ConfigChange],
    config: broker_module.BrokerConfig,
) -> dict[str, str]:
    """A dynamic broker layer after IncrementalAlterConfigs, validated (canonical strings).

    Raises InvalidConfigRequest for an unknown or read-only key or an invalid value."""
    changes = list(changes)
    for change in changes:
        _check_broker_key(change.name)
    try:
        result = apply_changes(stored, changes, definitions.BROKER_CONFIGS, config.rendered)
    except definitions.ConfigError as error:
        raise InvalidConfigRequest(str(error)) from None
    return _canonical_broker_layer(result)


def replaced_broker_layer(configs: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """A dynamic broker layer after the legacy AlterConfigs, which replaces all of it."""
    items = list(configs)
    _refuse_duplicates(name for name, _ in items)
    nulls = [name for name, value in items if value is None]
    if nulls:
        raise InvalidConfigRequest(f"Null value not supported for : {', '.join(nulls)}")
    for name, _ in items:
        _check_broker_key(name)
    return _canonical_broker_layer({name: value for name, value in items if value is not None})


def _check_broker_key(name: str) -> None:
    definition = definitions.BROKER_CONFIGS.get(name)
    if definition is None:
        raise InvalidConfigRequest(str(broker_module.unknown_broker_key_error(name)))
    if not definition.dynamic:
        raise InvalidConfigRequest(
            f"Cannot update these configs dynamically: {name}"
            " (it is read only at start; set it in the properties file or with --override)"
        )


def _canonical_broker_layer(layer: Mapping[str, str]) -> dict[str, str]:
    result = {}
    for name, raw in layer.items():
        definition = definitions.BROKER_CONFIGS[name]
        try:
            rendered = definitions.render(definition, definition.parse(raw))
        except definitions.ConfigError as error:
            raise InvalidConfigRequest(str(error)) from None
        assert rendered is not None
        result[name] = rendered
    return result


def broker_layers_with(
    config: broker_module.BrokerConfig, *, cluster_defaults: bool, layer: Mapping[str, str]
) -> broker_module.BrokerConfig:
    """The broker config with one dynamic layer replaced, checked as a whole (rules that
    tie keys together); a refusal is an InvalidConfigRequest, as for any broker config."""
    try:
        if cluster_defaults:
            return config.with_dynamic(cluster_defaults=layer)
        return config.with_dynamic(per_broker=layer)
    except definitions.ConfigError as error:
        raise InvalidConfigRequest(str(error)) from None


def load_dynamic_layers(
    config: broker_module.BrokerConfig,
    cluster_defaults: Mapping[str, str],
    per_broker: Mapping[str, str],
) -> tuple[broker_module.BrokerConfig, list[str]]:
    """The static config under the stored dynamic layers, for a broker starting up.

    A stored value this version refuses (a key that became read-only, a value that no
    longer validates) is left out with a warning rather than stopping the broker, as
    Kafka does; the warnings are returned for the caller to log."""
    # In the order BrokerConfig parses them, so the first layer holding the key is the
    # one whose value was refused.
    layers = {"this broker's": dict(per_broker), "cluster-wide default": dict(cluster_defaults)}
    warnings: list[str] = []
    while True:
        per_broker_layer, cluster_layer = layers.values()
        try:
            loaded = config.with_dynamic(
                cluster_defaults=cluster_layer, per_broker=per_broker_layer
            )
        except definitions.ConfigError as error:
            key = error.key
            holder = next((name for name, layer in layers.items() if key in layer), None)
            if key is None or holder is None:
                raise
            del layers[holder][key]
            warnings.append(f"ignoring the stored {holder} dynamic config {key}: {error}")
            continue
        return loaded, warnings
