"""Group configs (GROUP resources, Kafka's GroupConfig, KIP-848/932/1071): per-group
overrides of the broker's group.consumer.*, group.share.* and group.streams.* settings,
set with IncrementalAlterConfigs (`kafka-configs --entity-type groups`).

A group's value is its own override when it has one (GROUP_CONFIG), else the broker's
value of the matching broker key. An override must lie within the broker's bounds for it
(e.g. consumer.session.timeout.ms within group.consumer.min/max.session.timeout.ms), and
a session timeout must exceed the heartbeat interval, as Kafka's GroupConfig checks.
"""

# The table is one config per line on purpose, as in definitions.py.
# ruff: noqa: E501

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from strom.config import broker as broker_module
from strom.config import definitions
from strom.config.definitions import ConfigDef, ConfigSource, ConfigType

_I = ConfigType.INT

_AUTO_OFFSET_RESET = re.compile(r"earliest|latest|by_duration:P.*")


def _check_auto_offset_reset(value: definitions.ConfigValue) -> str | None:
    if isinstance(value, str) and _AUTO_OFFSET_RESET.fullmatch(value):
        return None
    return (
        f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must be"
        " either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
    )


def _g(
    name: str,
    type_: ConfigType,
    default: str,
    doc: str,
    broker_key: str | None = None,
    validator: definitions.Validator | None = None,
) -> ConfigDef:
    synonyms = (definitions.Synonym(broker_key),) if broker_key else ()
    return ConfigDef(name, type_, default, doc, validator, dynamic=True, synonyms=synonyms)


# fmt: off
GROUP_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in (
    _g("consumer.session.timeout.ms", _I, "45000", "The timeout to detect client failures when using the consumer group protocol.", "group.consumer.session.timeout.ms"),
    _g("consumer.heartbeat.interval.ms", _I, "5000", "The heartbeat interval given to the members of a consumer group.", "group.consumer.heartbeat.interval.ms"),
    _g("consumer.assignment.interval.ms", _I, "1000", "The interval between assignment updates for a consumer group.", "group.consumer.assignment.interval.ms"),
    _g("share.session.timeout.ms", _I, "45000", "The timeout to detect client failures when using the share group protocol.", "group.share.session.timeout.ms"),
    _g("share.heartbeat.interval.ms", _I, "5000", "The heartbeat interval given to the members of a share group.", "group.share.heartbeat.interval.ms"),
    _g("share.record.lock.duration.ms", _I, "30000", "The record acquisition lock duration in milliseconds for share groups.", "group.share.record.lock.duration.ms"),
    _g("share.delivery.count.limit", _I, "5", "The maximum number of delivery attempts for a record delivered to a share group.", "group.share.delivery.count.limit"),
    _g("share.partition.max.record.locks", _I, "2000", "Share-group record lock limit per share-partition.", "group.share.partition.max.record.locks"),
    _g("share.assignment.interval.ms", _I, "1000", "The interval between assignment updates for a share group.", "group.share.assignment.interval.ms"),
    _g("share.auto.offset.reset", ConfigType.STRING, "latest", "The strategy to initialize the share-partition start offset: earliest, latest or by_duration:<PnDTnHnMn.nS>.", None, definitions.Custom(_check_auto_offset_reset)),
    _g("share.isolation.level", ConfigType.STRING, "read_uncommitted", "Controls how to read records written transactionally: read_committed or read_uncommitted.", None, definitions.OneOf(("read_committed", "read_uncommitted"))),
    _g("share.renew.acknowledge.enable", ConfigType.BOOLEAN, "true", "Whether the renew acknowledge type is enabled for the share group."),
    _g("streams.session.timeout.ms", _I, "45000", "The timeout to detect client failures when using the streams group protocol.", "group.streams.session.timeout.ms"),
    _g("streams.heartbeat.interval.ms", _I, "5000", "The heartbeat interval given to the members.", "group.streams.heartbeat.interval.ms"),
    _g("streams.num.standby.replicas", _I, "0", "The number of standby replicas for each task.", "group.streams.num.standby.replicas"),
    _g("streams.initial.rebalance.delay.ms", _I, "3000", "The time the coordinator waits for more streams clients to join a new group before the first rebalance.", "group.streams.initial.rebalance.delay.ms"),
    _g("streams.assignment.interval.ms", _I, "1000", "The interval between assignment updates for a streams group.", "group.streams.assignment.interval.ms"),
)}
# fmt: on

# group config -> (broker key of its lower bound, of its upper bound); None: no bound
_BOUNDS: Mapping[str, tuple[str | None, str | None]] = {
    "consumer.heartbeat.interval.ms": (
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    "consumer.session.timeout.ms": (
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    "consumer.assignment.interval.ms": (
        "group.consumer.min.assignment.interval.ms",
        "group.consumer.max.assignment.interval.ms",
    ),
    "share.heartbeat.interval.ms": (
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    "share.session.timeout.ms": (
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
    "share.record.lock.duration.ms": (
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
    "share.delivery.count.limit": (
        "group.share.min.delivery.count.limit",
        "group.share.max.delivery.count.limit",
    ),
    "share.partition.max.record.locks": (
        "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks",
    ),
    "share.assignment.interval.ms": (
        "group.share.min.assignment.interval.ms",
        "group.share.max.assignment.interval.ms",
    ),
    "streams.heartbeat.interval.ms": (
        "group.streams.min.heartbeat.interval.ms",
        "group.streams.max.heartbeat.interval.ms",
    ),
    "streams.session.timeout.ms": (
        "group.streams.min.session.timeout.ms",
        "group.streams.max.session.timeout.ms",
    ),
    "streams.num.standby.replicas": (None, "group.streams.max.standby.replicas"),
    "streams.assignment.interval.ms": (
        "group.streams.min.assignment.interval.ms",
        "group.streams.max.assignment.interval.ms",
    ),
}

_SESSION_OVER_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)


def unknown_group_key_error(name: str) -> definitions.ConfigError:
    return definitions.ConfigError(f"Unknown group config name: {name}", name)


def effective_group_config(
    broker: broker_module.BrokerConfig, overrides: Mapping[str, str]
) -> GroupConfig:
    """A group's configuration: its overrides over the broker's values. Raises ConfigError
    (Kafka's INVALID_CONFIG) for an unknown key, a bad value or one out of bounds."""
    values: dict[str, definitions.ConfigValue] = {}
    canonical: dict[str, str] = {}
    for name, raw in overrides.items():
        definition = GROUP_CONFIGS.get(name)
        if definition is None:
            raise unknown_group_key_error(name)
        values[name] = definition.parse(raw)
        rendered = definitions.render(definition, values[name])
        assert rendered is not None
        canonical[name] = rendered
    for name, definition in GROUP_CONFIGS.items():
        if name not in values:
            values[name] = _broker_default(broker, definition)
    _check_bounds(broker, values, set(canonical))
    return GroupConfig(broker, values, canonical)


def _broker_default(
    broker: broker_module.BrokerConfig, definition: ConfigDef
) -> definitions.ConfigValue:
    if definition.synonyms:
        return broker.value(definition.synonyms[0].name)
    return definition.default_value()


def _check_bounds(
    broker: broker_module.BrokerConfig,
    values: Mapping[str, definitions.ConfigValue],
    overridden: set[str],
) -> None:
    """The group's own settings against the broker's bounds (the broker's own values are
    the broker's business: a group without configs always gets them)."""
    for name, (low_key, high_key) in _BOUNDS.items():
        if name not in overridden:
            continue
        value = values[name]
        assert isinstance(value, int)
        if low_key is not None and value < broker.get_int(low_key):
            raise definitions.ConfigError(
                f"{name} must be greater than or equal to {low_key}", name
            )
        if high_key is not None and value > broker.get_int(high_key):
            raise definitions.ConfigError(f"{name} must be less than or equal to {high_key}", name)
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if not overridden & {session, heartbeat}:
            continue
        session_ms, heartbeat_ms = values[session], values[heartbeat]
        assert isinstance(session_ms, int) and isinstance(heartbeat_ms, int)
        if session_ms <= heartbeat_ms:
            raise definitions.ConfigError(f"{session} must be greater than {heartbeat}", session)


class GroupConfig:
    """One group's effective configuration: what the coordinator reads, and DescribeConfigs."""

    def __init__(
        self,
        broker: broker_module.BrokerConfig,
        values: Mapping[str, definitions.ConfigValue],
        overrides: Mapping[str, str],
    ) -> None:
        self._broker = broker
        self._values = dict(values)
        self._overrides = dict(overrides)

    @property
    def overrides(self) -> dict[str, str]:
        """The group's own settings (canonical strings), as stored in the metadata."""
        return dict(self._overrides)

    def get_int(self, name: str) -> int:
        value = self._values[name]
        assert isinstance(value, int) and not isinstance(value, bool), name
        return value

    @property
    def consumer_session_timeout_ms(self) -> int:
        return self.get_int("consumer.session.timeout.ms")

    @property
    def consumer_heartbeat_interval_ms(self) -> int:
        return self.get_int("consumer.heartbeat.interval.ms")

    @property
    def consumer_assignment_interval_ms(self) -> int:
        return self.get_int("consumer.assignment.interval.ms")

    def entries(self, names: Iterable[str] | None = None) -> list[definitions.ConfigEntry]:
        """DescribeConfigs rows for `names` (all when None); unknown names are skipped."""
        wanted = GROUP_CONFIGS.keys() if names is None else names
        return [self._entry(name) for name in wanted if name in GROUP_CONFIGS]

    def _entry(self, name: str) -> definitions.ConfigEntry:
        definition = GROUP_CONFIGS[name]
        value = definitions.render(definition, self._values[name])
        synonyms: list[definitions.ConfigSynonymEntry] = []
        if name in self._overrides:
            synonyms.append(
                definitions.ConfigSynonymEntry(
                    name, self._overrides[name], ConfigSource.GROUP_CONFIG
                )
            )
        if definition.synonyms:
            # The broker key it falls back to, with where the broker's value comes from.
            broker_key = definition.synonyms[0].name
            synonyms.append(
                definitions.ConfigSynonymEntry(
                    broker_key, self._broker.rendered(broker_key), self._broker.source(broker_key)
                )
            )
        else:
            synonyms.append(
                definitions.ConfigSynonymEntry(
                    name, definition.default, ConfigSource.DEFAULT_CONFIG
                )
            )
        return definitions.ConfigEntry(
            name=name,
            value=value,
            source=ConfigSource.GROUP_CONFIG
            if name in self._overrides
            else ConfigSource.DEFAULT_CONFIG,
            read_only=False,
            is_sensitive=False,
            type=definition.type,
            documentation=definition.doc,
            synonyms=tuple(synonyms),
        )
