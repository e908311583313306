"""The broker's configuration: validated values, their sources, and typed accessors.

A `BrokerConfig` is built from the settings given explicitly (properties file,
environment, `--override`; see `loading.py`): everything given is
STATIC_BROKER_CONFIG, everything else is the DEFAULT_CONFIG from `definitions.py`.
Construction validates every value and the rules that tie several keys together
(roles, node id, listeners, advertised listeners, controller names, the quorum; Kafka's
`KafkaConfig.validateValues`), so a server that got a `BrokerConfig` can trust it. A
refusal names the key and where it was set, and the other keys involved with theirs.

Above the static settings sit Kafka's two dynamic layers, changed at run time with
AlterConfigs and kept in the cluster metadata: the cluster-wide defaults
(DYNAMIC_DEFAULT_BROKER_CONFIG, `kafka-configs --entity-default`) and this broker's
own (DYNAMIC_BROKER_CONFIG, `--entity-name <node.id>`), which wins. A config object
never changes: `with_dynamic` makes the next one.
"""

from __future__ import annotations

import dataclasses
import functools
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path

from strom.config import definitions, quorum, roles
from strom.config.removed_keys import is_removed_key, removed_keys_warning

# A topic config name given as a broker setting is a common slip; point at the broker name.
_BROKER_NAME_OF_TOPIC_CONFIG = {
    name: d.synonyms[0].name for name, d in definitions.TOPIC_CONFIGS.items() if d.synonyms
}


@dataclasses.dataclass(frozen=True)
class Listener:
    """One `NAME://host:port` entry; an empty host means all interfaces."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def bind_host(self) -> str | None:
        """The host for `asyncio.start_server`: None binds every interface."""
        return self.host or None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


Voter = quorum.Voter
QuorumVoter = quorum.Voter  # the name tests and callers used before quorum.py
QuorumSettings = quorum.QuorumSettings

# Hosts that stand for "this machine" when an endpoint is compared with a listener.
_WILDCARD_HOSTS = ("", "0.0.0.0", "::")
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def parse_protocol_map(text: str) -> dict[str, str]:
    """`listener.security.protocol.map` as {LISTENER_NAME: PROTOCOL}, names upper-cased."""
    result: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, protocol = item.partition(":")
        result[name.strip().upper()] = protocol.strip().upper()
    return result


def parse_listeners(
    text: str,
    protocol_map: Mapping[str, str],
    *,
    key: str = "listeners",
    controller_names: Iterable[str] = (),
) -> list[Listener]:
    """Parse a listeners value; raise ConfigError naming `key` for what Strom cannot serve.

    `controller_names` are listeners that default to PLAINTEXT when the map lacks them
    (Kafka does so only while listener.security.protocol.map is left at its default)."""
    controller = set(controller_names)
    listeners: list[Listener] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, address = item.partition("://")
        host_port = definitions.parse_host_port(address) if sep else None
        if host_port is None or not name:
            raise definitions.ConfigError(
                f"{key}: expected NAME://host:port (e.g. PLAINTEXT://localhost:9092), got {item!r}",
                key,
            )
        name = name.upper()  # Kafka normalises listener names to upper case
        protocol = protocol_map.get(name)
        if protocol is None and name in controller:
            protocol = "PLAINTEXT"  # Kafka 4 also defaults unmapped controller listeners
        if protocol is None:
            raise definitions.ConfigError(
                f"{key}: listener {name!r} has no security protocol in"
                " listener.security.protocol.map",
                key,
                ("listener.security.protocol.map",),
            )
        if protocol != "PLAINTEXT":
            raise definitions.ConfigError(
                f"{key}: listener {name!r} uses security protocol {protocol}, which Strom does"
                " not support yet; only PLAINTEXT listeners are supported",
                key,
            )
        if any(existing.name == name for existing in listeners):
            raise definitions.ConfigError(
                f"{key}: listener name {name!r} appears more than once", key
            )
        listeners.append(Listener(name, host_port[0], host_port[1], protocol))
    return listeners


def parse_quorum_voters(items: Iterable[str]) -> list[Voter]:
    voters = []
    for item in items:
        node_id, _, address = item.partition("@")
        host_port = definitions.parse_host_port(address)
        assert host_port is not None  # the definition's validator checked the shape
        voters.append(Voter(int(node_id), host_port[0], host_port[1]))
    return voters


def parse_host_ports(items: Iterable[str]) -> list[tuple[str, int]]:
    """controller.quorum.bootstrap.servers entries as (host, port)."""
    result = []
    for item in items:
        host_port = definitions.parse_host_port(item)
        assert host_port is not None  # the definition's validator checked the shape
        result.append(host_port)
    return result


_DYNAMIC_ORIGINS = {
    definitions.ConfigSource.DYNAMIC_BROKER_CONFIG: "the dynamic config of this broker",
    definitions.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: "the dynamic cluster-wide default",
}


class BrokerConfig:
    """Every broker config with its parsed value and source, highest layer first:
    dynamic per-broker, dynamic cluster-wide default, static (explicit), default."""

    def __init__(
        self,
        settings: Mapping[str, str] | None = None,
        *,
        origins: Mapping[str, str] | None = None,
        cluster_defaults: Mapping[str, str] | None = None,
        per_broker: Mapping[str, str] | None = None,
    ) -> None:
        """`settings` are the explicitly set values; `origins` say where each came from
        (a file name, an environment variable, --override) for error messages.
        `cluster_defaults` and `per_broker` are the dynamic layers; only configs Kafka
        can change at run time (`ConfigDef.dynamic`) may be in them."""
        # Keys Kafka 4 removed (port, zookeeper.connect, ...) are set aside, with a warning.
        self._explicit = {k: v for k, v in (settings or {}).items() if not is_removed_key(k)}
        self.removed_keys = sorted(set(settings or {}) - set(self._explicit))
        self._origins = dict(origins or {})
        self._dynamic: dict[definitions.ConfigSource, dict[str, str]] = {
            definitions.ConfigSource.DYNAMIC_BROKER_CONFIG: dict(per_broker or {}),
            definitions.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: dict(cluster_defaults or {}),
        }
        # Raw strings of every set layer, highest precedence first.
        self._layers: list[tuple[definitions.ConfigSource, dict[str, str]]] = [
            *self._dynamic.items(),
            (definitions.ConfigSource.STATIC_BROKER_CONFIG, self._explicit),
        ]
        self._layer_values: dict[definitions.ConfigSource, dict[str, definitions.ConfigValue]] = {}
        for source, layer in self._layers:
            parsed: dict[str, definitions.ConfigValue] = {}
            for name, raw in layer.items():
                parsed[name] = self._parse_setting(source, name, raw)
            self._layer_values[source] = parsed
        self._values: dict[str, definitions.ConfigValue] = {}
        for name, definition in definitions.BROKER_CONFIGS.items():
            for source, _ in self._layers:
                if name in self._layer_values[source]:
                    self._values[name] = self._layer_values[source][name]
                    break
            else:
                self._values[name] = definition.default_value()
        # broker.id is node.id's old name (Kafka's KafkaConfig.populateSynonyms).
        if self.is_set("broker.id") and not self.is_set("node.id"):
            self._values["node.id"] = self._values["broker.id"]
        elif not self.is_set("broker.id"):
            self._values["broker.id"] = self._values["node.id"]
        self._joining_note: str | None = None
        voters = self.get_list("controller.quorum.voters")
        if roles.joins_as_broker(
            self.process_roles,
            self.get_int("node.id"),
            [int(voter.partition("@")[0]) for voter in voters],
            self.controller_listener_names,
            self.get_str("listeners") or "",
        ):
            self._values["process.roles"] = ("broker",)
            self._joining_note = roles.joining_note(self.get_int("node.id"), voters)
        self._check_together()

    def _parse_setting(
        self, source: definitions.ConfigSource, name: str, raw: str
    ) -> definitions.ConfigValue:
        definition = definitions.BROKER_CONFIGS.get(name)
        if definition is None:
            error = unknown_broker_key_error(name)
            raise definitions.ConfigError(self._with_origin(str(error), name, source), name)
        if source in _DYNAMIC_ORIGINS and not definition.dynamic:
            raise definitions.ConfigError(
                f"Cannot update these configs dynamically: {name}"
                " (Kafka reads it only at start; set it in the properties file)",
                name,
            )
        try:
            return definition.parse(raw)
        except definitions.ConfigError as error:
            raise definitions.ConfigError(
                self._with_origin(str(error), name, source), name
            ) from None

    def with_dynamic(
        self,
        *,
        cluster_defaults: Mapping[str, str] | None = None,
        per_broker: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """The same static settings under new dynamic layers (None keeps a layer as is).

        Raises ConfigError naming the key when a dynamic value is unknown, read-only or
        invalid, or breaks a rule that ties keys together."""
        return BrokerConfig(
            self._explicit,
            origins=self._origins,
            cluster_defaults=(
                self.dynamic_cluster_defaults() if cluster_defaults is None else cluster_defaults
            ),
            per_broker=self.dynamic_per_broker() if per_broker is None else per_broker,
        )

    def dynamic_cluster_defaults(self) -> dict[str, str]:
        """The cluster-wide dynamic defaults (raw strings, as stored)."""
        return dict(self._dynamic[definitions.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG])

    def dynamic_per_broker(self) -> dict[str, str]:
        """This broker's own dynamic configs (raw strings, as stored)."""
        return dict(self._dynamic[definitions.ConfigSource.DYNAMIC_BROKER_CONFIG])

    # --- generic access

    def value(self, name: str) -> definitions.ConfigValue:
        return self._values[name]

    def rendered(self, name: str) -> str | None:
        """The value as DescribeConfigs shows it (canonical string, None if unset)."""
        return definitions.render(definitions.BROKER_CONFIGS[name], self._values[name])

    def is_set(self, name: str) -> bool:
        """Whether the value was set in some layer (not the default)."""
        return any(name in layer for _, layer in self._layers)

    def source(self, name: str) -> definitions.ConfigSource:
        for source, layer in self._layers:
            if name in layer:
                return source
        return definitions.ConfigSource.DEFAULT_CONFIG

    def origin(self, name: str) -> str | None:
        """Where an explicit value came from (file, env var, --override); None for defaults."""
        return self._origins.get(name) if name in self._explicit else None

    def warnings(self) -> list[str]:
        """What the broker logs once at start about its settings: keys Kafka 4 removed,
        a copied server.properties that runs as a broker (roles.py)."""
        notes = [removed_keys_warning(self.removed_keys), self._joining_note]
        return [note for note in notes if note]

    def explicit(self) -> dict[str, str]:
        """The explicitly set raw values, e.g. to log at start."""
        return dict(self._explicit)

    def get_int(self, name: str) -> int:
        value = self._values[name]
        assert isinstance(value, int) and not isinstance(value, bool), name
        return value

    def get_optional_int(self, name: str) -> int | None:
        return None if self._values[name] is None else self.get_int(name)

    def get_bool(self, name: str) -> bool:
        value = self._values[name]
        assert isinstance(value, bool), name
        return value

    def get_float(self, name: str) -> float:
        value = self._values[name]
        assert isinstance(value, float), name
        return value

    def get_str(self, name: str) -> str | None:
        value = self._values[name]
        assert value is None or isinstance(value, str), name
        return value

    def get_list(self, name: str) -> list[str]:
        value = self._values[name]
        assert value is None or isinstance(value, tuple), name
        return list(value or ())

    def resolve(
        self, synonyms: Iterable[definitions.Synonym]
    ) -> tuple[definitions.ConfigValue, definitions.Synonym | None]:
        """The first synonym with a value (converted to ms), and which one it was.

        This is how Kafka derives e.g. the retention default: log.retention.ms, else
        log.retention.minutes, else log.retention.hours (which has a default of 168)."""
        for synonym in synonyms:
            value = self._values[synonym.name]
            if value is not None:
                if synonym.to_ms != 1:
                    assert isinstance(value, int)
                    value = min(value * synonym.to_ms, definitions.LONG_MAX)
                return value, synonym
        return None, None

    def _family_ms(self, primary: str) -> int:
        family = definitions.broker_synonyms(primary)
        value, _ = self.resolve(
            definitions.Synonym(name, _MS_FACTOR[name.rsplit(".", 1)[1]]) for name in family
        )
        assert isinstance(value, int)
        return value

    # --- typed accessors for the server

    @property
    def node_id(self) -> int:
        """node.id, else broker.id (its old name), else 1."""
        return self.get_int("node.id")

    @property
    def process_roles(self) -> list[str]:
        return self.get_list("process.roles")

    @property
    def cluster_id(self) -> str | None:
        """None means: generate one on first start and store it with the data."""
        return self.get_str("cluster.id")

    @property
    def broker_rack(self) -> str | None:
        return self.get_str("broker.rack")

    @property
    def listeners(self) -> list[Listener]:
        return list(self._listeners)

    @property
    def client_listeners(self) -> list[Listener]:
        """Listeners that serve clients and brokers, i.e. all but the controller's."""
        names = set(self.controller_listener_names)
        return [listener for listener in self._listeners if listener.name not in names]

    @property
    def advertised_listeners(self) -> list[Listener]:
        """What clients are told to connect to; controller listeners are not advertised.

        Defaults to `client_listeners`; a wildcard host (empty, 0.0.0.0, ::) becomes this
        machine's fully qualified hostname, as Kafka does with the canonical host name."""
        names = set(self.controller_listener_names)
        chosen = self._advertised if self._advertised is not None else self.client_listeners
        result = []
        for listener in chosen:
            if listener.name in names:
                continue
            if listener.host in ("", "0.0.0.0", "::"):
                listener = dataclasses.replace(listener, host=socket.getfqdn())
            result.append(listener)
        return result

    @property
    def inter_broker_listener_name(self) -> str:
        """inter.broker.listener.name, else the first non-controller listener."""
        explicit = self.get_str("inter.broker.listener.name")
        return explicit.upper() if explicit else self.client_listeners[0].name

    @property
    def controller_listener_names(self) -> list[str]:
        return [name.upper() for name in self.get_list("controller.listener.names")]

    @property
    def controller_listeners(self) -> list[Listener]:
        """The listeners named by controller.listener.names, in that order: where this
        node serves the quorum. Never among `client_listeners` or `advertised_listeners`."""
        by_name = {listener.name: listener for listener in self._listeners}
        return [by_name[name] for name in self.controller_listener_names if name in by_name]

    @property
    def controller_quorum_voters(self) -> list[Voter]:
        """controller.quorum.voters as given; see `quorum` for the voters the node uses."""
        return parse_quorum_voters(self.get_list("controller.quorum.voters"))

    @property
    def controller_quorum_bootstrap_servers(self) -> list[tuple[str, int]]:
        return parse_host_ports(self.get_list("controller.quorum.bootstrap.servers"))

    @functools.cached_property
    def quorum(self) -> QuorumSettings:
        """The metadata quorum (validated at construction): with no quorum settings, a
        quorum of one. Built on first use: this node's own endpoint may need its host
        name, a DNS lookup that a config rebuilt by AlterConfigs should not wait for."""
        return self._quorum_settings()

    @property
    def metadata_log_dir(self) -> Path:
        """metadata.log.dir, else the first log directory (Kafka's rule)."""
        explicit = self.get_str("metadata.log.dir")
        return Path(explicit) if explicit else self.log_dirs[0]

    @property
    def log_dirs(self) -> list[Path]:
        """log.dirs when set, else log.dir (Kafka's rule)."""
        dirs = self.get_list("log.dirs") if self._values["log.dirs"] is not None else []
        return [Path(d) for d in dirs] or [Path(self.get_str("log.dir") or "")]

    @property
    def num_partitions(self) -> int:
        return self.get_int("num.partitions")

    @property
    def default_replication_factor(self) -> int:
        return self.get_int("default.replication.factor")

    @property
    def min_insync_replicas(self) -> int:
        return self.get_int("min.insync.replicas")

    @property
    def auto_create_topics_enable(self) -> bool:
        return self.get_bool("auto.create.topics.enable")

    @property
    def delete_topic_enable(self) -> bool:
        return self.get_bool("delete.topic.enable")

    @property
    def message_max_bytes(self) -> int:
        return self.get_int("message.max.bytes")

    @property
    def socket_request_max_bytes(self) -> int:
        return self.get_int("socket.request.max.bytes")

    @property
    def queued_max_request_bytes(self) -> int:
        """Bytes of requests held across connections before reading pauses; -1: no limit."""
        return self.get_int("queued.max.request.bytes")

    @property
    def queued_max_requests(self) -> int:
        return self.get_int("queued.max.requests")

    @property
    def log_segment_bytes(self) -> int:
        return self.get_int("log.segment.bytes")

    @property
    def log_retention_ms(self) -> int:
        """log.retention.ms > .minutes > .hours; any negative value means -1, unlimited."""
        return max(self._family_ms("log.retention.ms"), -1)

    @property
    def log_roll_ms(self) -> int:
        return self._family_ms("log.roll.ms")

    @property
    def log_retention_check_interval_ms(self) -> int:
        return self.get_int("log.retention.check.interval.ms")

    @property
    def offsets_topic_num_partitions(self) -> int:
        return self.get_int("offsets.topic.num.partitions")

    @property
    def offsets_topic_replication_factor(self) -> int:
        return self.get_int("offsets.topic.replication.factor")

    @property
    def transaction_state_log_replication_factor(self) -> int:
        return self.get_int("transaction.state.log.replication.factor")

    @property
    def group_initial_rebalance_delay_ms(self) -> int:
        return self.get_int("group.initial.rebalance.delay.ms")

    @property
    def group_min_session_timeout_ms(self) -> int:
        return self.get_int("group.min.session.timeout.ms")

    @property
    def group_max_session_timeout_ms(self) -> int:
        return self.get_int("group.max.session.timeout.ms")

    @property
    def group_max_size(self) -> int:
        return self.get_int("group.max.size")

    @property
    def group_consumer_protocol_enabled(self) -> bool:
        return "consumer" in self.get_list("group.coordinator.rebalance.protocols")

    @property
    def group_consumer_heartbeat_interval_ms(self) -> int:
        return self.get_int("group.consumer.heartbeat.interval.ms")

    @property
    def group_consumer_session_timeout_ms(self) -> int:
        return self.get_int("group.consumer.session.timeout.ms")

    @property
    def group_consumer_assignors(self) -> list[str]:
        return [
            definitions.CONSUMER_ASSIGNORS[name]
            for name in self.get_list("group.consumer.assignors")
        ]

    @property
    def group_consumer_migration_policy(self) -> str:
        return self.get_str("group.consumer.migration.policy") or "bidirectional"

    @property
    def offsets_retention_ms(self) -> int:
        return self.get_int("offsets.retention.minutes") * 60_000

    @property
    def offsets_retention_check_interval_ms(self) -> int:
        return self.get_int("offsets.retention.check.interval.ms")

    @property
    def offsets_topic_segment_bytes(self) -> int:
        return self.get_int("offsets.topic.segment.bytes")

    @property
    def offset_metadata_max_bytes(self) -> int:
        return self.get_int("offset.metadata.max.bytes")

    @property
    def producer_id_expiration_ms(self) -> int:
        return self.get_int("producer.id.expiration.ms")

    @property
    def metrics_listener(self) -> tuple[str, int] | None:
        """(host, port) of the HTTP endpoint, or None when metrics.listener is empty."""
        text = self.get_str("metrics.listener")
        if not text:
            return None
        host_port = definitions.parse_host_port(text.removeprefix("http://"))
        assert host_port is not None  # the definition's validator checked the shape
        return host_port

    # --- DescribeConfigs

    def entries(self, names: Iterable[str] | None = None) -> list[definitions.ConfigEntry]:
        """DescribeConfigs rows for `names` (all configs when None); unknown names are skipped."""
        wanted = definitions.BROKER_CONFIGS.keys() if names is None else names
        return [self._entry(name) for name in wanted if name in definitions.BROKER_CONFIGS]

    def cluster_default_entries(
        self, names: Iterable[str] | None = None
    ) -> list[definitions.ConfigEntry]:
        """DescribeConfigs rows of the cluster-wide dynamic defaults (the broker resource
        named ""): only the configs set there, as Kafka answers for `--entity-default`."""
        layer = self._layer_values[definitions.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        wanted = layer.keys() if names is None else [n for n in names if n in layer]
        return [self._entry(name, cluster_default=True) for name in wanted]

    def synonyms(self, name: str) -> list[definitions.ConfigSynonymEntry]:
        """Kafka's order: the family's values layer by layer, starting at `name`."""
        found = self.layered_synonyms(definitions.broker_synonyms(name))
        while found and found[0].name != name:
            found.pop(0)  # a more precise synonym is described under its own name
        return found

    def layered_synonyms(self, names: Iterable[str]) -> list[definitions.ConfigSynonymEntry]:
        """Every value `names` have, highest layer first and in the given order within a
        layer, ending with their defaults (Kafka's ConfigHelper.configSynonyms)."""
        names = list(names)
        found = [
            definitions.ConfigSynonymEntry(
                n, definitions.render(definitions.BROKER_CONFIGS[n], values[n]), source
            )
            for source, values in self._layer_values.items()
            for n in names
            if n in values
        ]
        found += [
            definitions.ConfigSynonymEntry(
                n, definitions.BROKER_CONFIGS[n].default, definitions.ConfigSource.DEFAULT_CONFIG
            )
            for n in names
            if definitions.BROKER_CONFIGS[n].default is not None
        ]
        return found

    def _entry(self, name: str, cluster_default: bool = False) -> definitions.ConfigEntry:
        definition = definitions.BROKER_CONFIGS[name]
        synonyms = tuple(self.synonyms(name))
        value = self.rendered(name)
        source = self.source(name)
        if cluster_default:
            # The cluster-wide view lists only the cluster-wide dynamic defaults, as Kafka's
            # ConfigHelper does for the resource "" (no per-broker, static or default rows).
            synonyms = tuple(
                s
                for s in synonyms
                if s.source == definitions.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            )
            value, source = synonyms[0].value, synonyms[0].source
        sensitive = definition.is_sensitive
        if sensitive:
            synonyms = tuple(dataclasses.replace(s, value=None) for s in synonyms)
        return definitions.ConfigEntry(
            name=name,
            value=None if sensitive else value,
            source=source,
            read_only=definition.read_only,
            is_sensitive=sensitive,
            type=definition.type,
            documentation=definition.doc,
            synonyms=synonyms,
        )

    # --- rules across keys

    def _with_origin(
        self,
        message: str,
        name: str,
        source: definitions.ConfigSource = definitions.ConfigSource.STATIC_BROKER_CONFIG,
    ) -> str:
        if source == definitions.ConfigSource.STATIC_BROKER_CONFIG:
            origin = self._origins.get(name)
        else:
            origin = _DYNAMIC_ORIGINS.get(source)
        return f"{message} (set in {origin})" if origin else message

    def _where(self, name: str) -> str:
        """`key=value` and where it was set, for the other keys a refusal involves."""
        value = self.rendered(name)
        shown = f"{name}={value}" if value else f"{name} ({'empty' if value == '' else 'not set'})"
        source = self.source(name)
        if source == definitions.ConfigSource.DEFAULT_CONFIG:
            return f"{shown} by default" if value is not None else shown
        origin = (
            self._origins.get(name)
            if source == definitions.ConfigSource.STATIC_BROKER_CONFIG
            else _DYNAMIC_ORIGINS.get(source)
        )
        return f"{shown} set in {origin}" if origin else shown

    def _fail(self, name: str, problem: str, *related: str) -> definitions.ConfigError:
        """`name: problem (set in <origin>; other=value set in <origin>, ...)`, one line."""
        notes = [f"set in {self._origins[name]}"] if self.origin(name) else []
        notes += [self._where(key) for key in dict.fromkeys(related) if key != name]
        suffix = f" ({'; '.join(notes)})" if notes else ""
        return definitions.ConfigError(f"{name}: {problem}{suffix}", name, related)

    def _check_together(self) -> None:
        roles = self.process_roles
        if not roles:
            raise self._fail("process.roles", "must list broker, controller or both")
        is_broker, is_controller = "broker" in roles, "controller" in roles
        node_id, broker_id = self.get_int("node.id"), self.get_optional_int("broker.id")
        if self.is_set("broker.id") and self.is_set("node.id") and node_id != broker_id:
            raise self._fail(
                "node.id",
                f"must be the same as broker.id, its old name; got {node_id} and {broker_id}",
                "broker.id",
            )
        if self._values["log.dirs"] is not None and not self.get_list("log.dirs"):
            raise self._fail("log.dirs", "must list at least one directory")

        protocol_map = parse_protocol_map(self.get_str("listener.security.protocol.map") or "")
        controller_names = self.controller_listener_names
        # Kafka maps unmapped controller listeners to PLAINTEXT only while the map is the default.
        plaintext_by_default = (
            () if self.is_set("listener.security.protocol.map") else controller_names
        )
        try:
            self._listeners = parse_listeners(
                self.get_str("listeners") or "", protocol_map, controller_names=plaintext_by_default
            )
            advertised = self.get_str("advertised.listeners")
            self._advertised = (
                None
                if advertised is None
                else parse_listeners(
                    advertised,
                    protocol_map,
                    key="advertised.listeners",
                    controller_names=plaintext_by_default,
                )
            )
        except definitions.ConfigError as error:
            assert error.key is not None
            problem = str(error).removeprefix(f"{error.key}: ")
            raise self._fail(error.key, problem, *error.related) from None

        names = [listener.name for listener in self._listeners]
        if not names:
            raise self._fail("listeners", "must list at least one listener")
        ports = [listener.port for listener in self._listeners if listener.port != 0]
        for port in ports:
            if ports.count(port) > 1:
                raise self._fail("listeners", f"port {port} is used by more than one listener")
        for listener in self._advertised or ():
            if not is_controller and listener.name in controller_names:
                raise self._fail(
                    "advertised.listeners",
                    f"must not contain the controller listener {listener.name!r} (named in"
                    " controller.listener.names) when process.roles=broker: clients and"
                    " brokers never send requests to controllers through advertised listeners",
                    "controller.listener.names",
                    "process.roles",
                )
            if listener.name not in names:
                raise self._fail(
                    "advertised.listeners",
                    f"listener {listener.name!r} is not one of the listeners ({', '.join(names)})",
                    "listeners",
                )
            if listener.host in ("0.0.0.0", "::"):
                raise self._fail(
                    "advertised.listeners",
                    f"{listener.host} is not a routable address; advertise a hostname or IP",
                )

        for name in controller_names:
            if is_controller and name not in names:
                raise self._fail(
                    "controller.listener.names",
                    f"listener {name!r} is not one of the listeners ({', '.join(names)});"
                    " a node with the controller role serves the quorum on it",
                    "listeners",
                    "process.roles",
                )
            if not is_controller and name in names:
                raise self._fail(
                    "controller.listener.names",
                    f"listener {name!r} must not be in listeners on a broker-only node"
                    " (process.roles=broker): it is the controllers' listener",
                    "listeners",
                    "process.roles",
                )
            if not is_controller:
                protocol = protocol_map.get(name) or (
                    "PLAINTEXT" if name in plaintext_by_default else None
                )
                if protocol is None:
                    raise self._fail(
                        "controller.listener.names",
                        f"controller listener {name!r} has no security protocol in"
                        " listener.security.protocol.map (an explicit map must name every"
                        " controller listener)",
                        "listener.security.protocol.map",
                    )
                if protocol != "PLAINTEXT":
                    raise self._fail(
                        "controller.listener.names",
                        f"controller listener {name!r} uses security protocol {protocol}, which"
                        " Strom does not support yet; only PLAINTEXT listeners are supported",
                        "listener.security.protocol.map",
                    )
        if not is_controller and not controller_names:
            raise self._fail(
                "controller.listener.names",
                "must name the controllers' listener when process.roles=broker: a broker"
                " reaches the quorum through it",
                "process.roles",
            )
        if not is_broker and self.client_listeners:
            raise self._fail(
                "listeners",
                "must only contain controller listeners (controller.listener.names) when"
                f" process.roles=controller; {self.client_listeners[0].name!r} is not one",
                "controller.listener.names",
                "process.roles",
            )
        if is_broker:
            self._check_inter_broker_listener(names, controller_names)
        self._check_quorum(is_controller)

    def _check_inter_broker_listener(self, names: list[str], controller_names: list[str]) -> None:
        if not self.client_listeners:
            raise self._fail(
                "listeners",
                "there must be at least one broker listener; all listeners are controller"
                " listeners (named in controller.listener.names)",
                "controller.listener.names",
            )
        explicit = self.get_str("inter.broker.listener.name")
        inter = self.inter_broker_listener_name
        if explicit and inter in controller_names:
            raise self._fail(
                "inter.broker.listener.name",
                f"{inter!r} is a controller listener (named in controller.listener.names);"
                " brokers talk to each other on a broker listener",
                "controller.listener.names",
            )
        if explicit and inter not in names:
            raise self._fail(
                "inter.broker.listener.name",
                f"listener {inter!r} is not one of the listeners ({', '.join(names)})",
                "listeners",
            )
        if self._advertised is not None and inter not in [x.name for x in self._advertised]:
            advertised = ", ".join(x.name for x in self._advertised) or "none"
            raise self._fail(
                "inter.broker.listener.name",
                f"listener {inter!r} must be one of the advertised.listeners ({advertised}):"
                " other brokers connect to it",
                "advertised.listeners",
            )

    def _check_quorum(self, is_controller: bool) -> None:
        node_id = self.node_id
        voters = self.controller_quorum_voters
        bootstrap = self.controller_quorum_bootstrap_servers
        voter_ids = [voter.node_id for voter in voters]
        voter_set = "{" + ",".join(str(i) for i in voter_ids) + "}"
        for voter in voters:
            if voter_ids.count(voter.node_id) > 1:
                raise self._fail(
                    "controller.quorum.voters", f"lists node id {voter.node_id} more than once"
                )
            if voter.host in _WILDCARD_HOSTS:
                raise self._fail(
                    "controller.quorum.voters",
                    f"{voter}: {voter.host} is not a routable address; give each voter's"
                    " hostname or IP",
                )
        for host, port in bootstrap:
            if host in _WILDCARD_HOSTS:
                raise self._fail(
                    "controller.quorum.bootstrap.servers",
                    f"{host}:{port}: {host} is not a routable address",
                )
        if is_controller and voters and node_id not in voter_ids:
            raise self._fail(
                "controller.quorum.voters",
                f"this node (node.id={node_id}) has the controller role but is not a voter;"
                f" a controller must be in the set of voters {voter_set}",
                "node.id",
                "process.roles",
            )
        if not is_controller and node_id in voter_ids:
            raise self._fail(
                "controller.quorum.voters",
                f"this node (node.id={node_id}) has just the broker role, so it must not be"
                f" in the set of voters {voter_set}",
                "node.id",
                "process.roles",
            )
        if not is_controller and not voters and not bootstrap:
            raise self._fail(
                "controller.quorum.voters",
                "a broker-only node (process.roles=broker) needs the controller quorum: set"
                " controller.quorum.bootstrap.servers to the controllers' endpoints or"
                " controller.quorum.voters to the set of controllers",
                "controller.quorum.bootstrap.servers",
                "process.roles",
            )
        quorum_keys = ("controller.quorum.voters", "controller.quorum.bootstrap.servers")
        controller_listener = next(iter(self.controller_listeners), None)
        if is_controller and (voters or bootstrap) and controller_listener is None:
            raise self._fail(
                "controller.listener.names",
                "must name one of the listeners when a node with the controller role is in a"
                " quorum set by controller.quorum.voters or controller.quorum.bootstrap.servers",
                "listeners",
                *(key for key in quorum_keys if self.is_set(key)),
            )

        # Without voters a controller is a quorum of one (Kafka's `format --standalone`).
        if is_controller and not voters and bootstrap and not self._is_standalone(bootstrap):
            endpoint = self._own_controller_endpoint(controller_listener)
            given = ",".join(f"{host}:{port}" for host, port in bootstrap)
            raise self._fail(
                "controller.quorum.bootstrap.servers",
                "without controller.quorum.voters a controller starts as a quorum of one"
                " (Kafka's kafka-storage format --standalone), so this must be only this"
                f" node's own controller endpoint ({endpoint[0]}:{endpoint[1]}), got {given};"
                " for a quorum of several controllers set controller.quorum.voters on"
                " every node",
                "listeners",
                "controller.listener.names",
            )

    def _is_standalone(self, bootstrap: list[tuple[str, int]]) -> bool:
        """Whether the bootstrap servers are exactly this node's own controller endpoint."""
        controller_listener = next(iter(self.controller_listeners), None)
        return (
            len(bootstrap) == 1
            and controller_listener is not None
            and self._is_own_endpoint(bootstrap[0], controller_listener)
        )

    def _quorum_settings(self) -> QuorumSettings:
        roles = self.process_roles
        node_id = self.node_id
        voters = self.controller_quorum_voters
        bootstrap = self.controller_quorum_bootstrap_servers
        is_controller = "controller" in roles
        quorum_voters: tuple[Voter, ...] = tuple(voters)
        if is_controller and not voters:
            # A quorum of one: the default, or Kafka's `kafka-storage format --standalone`.
            controller_listener = next(iter(self.controller_listeners), None)
            quorum_voters = (Voter(node_id, *self._own_controller_endpoint(controller_listener)),)
        static_bootstrap = [(voter.host, voter.port) for voter in voters]
        return QuorumSettings(
            node_id=node_id,
            is_controller=is_controller,
            is_broker="broker" in roles,
            voters=quorum_voters,
            static_voters=bool(voters),
            bootstrap_servers=tuple(bootstrap or static_bootstrap),
            controller_listener_name=next(iter(self.controller_listener_names), None),
            election_timeout_ms=self.get_int("controller.quorum.election.timeout.ms"),
            fetch_timeout_ms=self.get_int("controller.quorum.fetch.timeout.ms"),
            election_backoff_max_ms=self.get_int("controller.quorum.election.backoff.max.ms"),
            request_timeout_ms=self.get_int("controller.quorum.request.timeout.ms"),
            retry_backoff_ms=self.get_int("controller.quorum.retry.backoff.ms"),
            append_linger_ms=self.get_int("controller.quorum.append.linger.ms"),
            broker_heartbeat_interval_ms=self.get_int("broker.heartbeat.interval.ms"),
            broker_session_timeout_ms=self.get_int("broker.session.timeout.ms"),
            metadata_log_dir=self.metadata_log_dir,
            metadata_log_segment_bytes=self.get_int("metadata.log.segment.bytes"),
            metadata_max_retention_bytes=self.get_int("metadata.max.retention.bytes"),
            metadata_log_max_snapshot_interval_ms=self.get_int(
                "metadata.log.max.snapshot.interval.ms"
            ),
            metadata_log_max_record_bytes_between_snapshots=self.get_int(
                "metadata.log.max.record.bytes.between.snapshots"
            ),
        )

    def _own_controller_endpoint(self, controller_listener: Listener | None) -> tuple[str, int]:
        """Where other voters reach this node: its advertised controller listener, else the
        listener itself (a wildcard host becomes this machine's name, as Kafka does). The
        default single node has no controller listener; its first advertised listener
        stands in, and nothing connects to it in a quorum of one."""
        if controller_listener is None:
            first = self.advertised_listeners[0]
            return first.host, first.port
        for listener in self._advertised or ():
            if listener.name == controller_listener.name:
                return listener.host, listener.port
        host = controller_listener.host
        return (socket.getfqdn() if host in _WILDCARD_HOSTS else host), controller_listener.port

    def _is_own_endpoint(self, endpoint: tuple[str, int], controller_listener: Listener) -> bool:
        """Whether host:port is this node's controller listener (or its advertised form)."""
        host, port = endpoint
        candidates = [(controller_listener.host, controller_listener.port)]
        candidates += [
            (x.host, x.port) for x in self._advertised or () if x.name == controller_listener.name
        ]
        for own_host, own_port in candidates:
            if own_port != port:
                continue
            if own_host.lower() == host.lower():
                return True
            if own_host in _LOOPBACK_HOSTS and host in _LOOPBACK_HOSTS:
                return True
            if own_host in _WILDCARD_HOSTS and (
                host in _LOOPBACK_HOSTS or host.lower() in _local_host_names()
            ):
                return True
        return False


def _local_host_names() -> set[str]:
    return {socket.gethostname().lower(), socket.getfqdn().lower()}


_MS_FACTOR = {"ms": 1, "minutes": definitions.MINUTE_MS, "hours": definitions.HOUR_MS}


def unknown_broker_key_error(name: str) -> definitions.ConfigError:
    if name in _BROKER_NAME_OF_TOPIC_CONFIG:
        return definitions.ConfigError(
            f"unknown configuration key {name!r}: it is a topic config; the broker default"
            f" is {_BROKER_NAME_OF_TOPIC_CONFIG[name]!r}",
            name,
        )
    return definitions.unknown_key_error(name, definitions.BROKER_CONFIGS, "configuration key")
