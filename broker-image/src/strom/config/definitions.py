"""What each configuration is: name, type, default, validation, documentation.

The tables here use Apache Kafka's property names, types and documented defaults
(Kafka 4.0), so that a Kafka user's `server.properties` and topic configs mean the
same thing to Strom. Where Strom's default differs from Kafka's, the documentation
line says so and why.

Values are parsed the way Kafka's `ConfigDef.parseType` does: strings are trimmed,
booleans are `true`/`false` in any case, lists are comma-separated with blanks
around the commas ignored. Defaults are written as strings and go through the same
parser, so a bad default fails at import time rather than at a user's start.
"""

# The tables below are one config per line on purpose: a table reads better than
# wrapped calls.
# ruff: noqa: E501

from __future__ import annotations

import dataclasses
import difflib
import enum
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TypeAlias

from strom.config import kafka_broker_configs

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

ConfigValue: TypeAlias = bool | int | float | str | tuple[str, ...] | None


class ConfigError(ValueError):
    """A configuration is unknown or its value is invalid; the message names the key."""

    def __init__(self, message: str, key: str | None = None, related: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.key = key
        # Other keys the problem involves, so that the message can say where each was set.
        self.related = related


class ConfigType(enum.IntEnum):
    """Kafka's DescribeConfigs `config_type` codes."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigs `config_source` codes."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


# --- validators: each returns None when the (parsed) value is fine, else what is wrong.

Validator: TypeAlias = Callable[[ConfigValue], str | None]


@dataclasses.dataclass(frozen=True)
class AtLeast:
    minimum: float

    def __call__(self, value: ConfigValue) -> str | None:
        if isinstance(value, int | float) and value < self.minimum:
            return f"must be at least {_number(self.minimum)}, got {_number(value)}"
        return None


@dataclasses.dataclass(frozen=True)
class Between:
    minimum: float
    maximum: float

    def __call__(self, value: ConfigValue) -> str | None:
        if isinstance(value, int | float) and not self.minimum <= value <= self.maximum:
            return (
                f"must be between {_number(self.minimum)} and {_number(self.maximum)},"
                f" got {_number(value)}"
            )
        return None


@dataclasses.dataclass(frozen=True)
class OneOf:
    """Case-sensitive, like Kafka's `ValidString.in`; on a LIST it checks every item."""

    choices: tuple[str, ...]
    allow_empty_list: bool = False

    def __call__(self, value: ConfigValue) -> str | None:
        items = value if isinstance(value, tuple) else (value,)
        if isinstance(value, tuple) and not value and not self.allow_empty_list:
            return f"must not be empty; valid values: {', '.join(self.choices)}"
        for item in items:
            if item is not None and item not in self.choices:
                return f"must be one of {', '.join(self.choices)}, got {item!r}"
        return None


@dataclasses.dataclass(frozen=True)
class Custom:
    check: Callable[[ConfigValue], str | None]

    def __call__(self, value: ConfigValue) -> str | None:
        return self.check(value)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# --- the definition itself


@dataclasses.dataclass(frozen=True)
class Synonym:
    """A broker config a topic config falls back to; `to_ms` converts hours/minutes."""

    name: str
    to_ms: int = 1


@dataclasses.dataclass(frozen=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str | None
    doc: str
    validator: Validator | None = None
    # Kafka can change it at runtime (AlterConfigs); DescribeConfigs reports
    # read_only = not dynamic. Topic configs are always dynamic.
    dynamic: bool = False
    # Accepted so that Kafka's own server.properties loads, but Strom does not use it.
    ignored: bool = False
    # Topic configs only: the broker configs that supply the default, in precedence order.
    synonyms: tuple[Synonym, ...] = ()

    @property
    def read_only(self) -> bool:
        return not self.dynamic

    @property
    def is_sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: str) -> ConfigValue:
        """Parse and validate a raw string; raise ConfigError naming this key."""
        value = _parse_type(self.name, self.type, raw)
        if self.validator is not None:
            problem = self.validator(value)
            if problem is not None:
                raise ConfigError(f"{self.name}: {problem}", self.name)
        return value

    def default_value(self) -> ConfigValue:
        return None if self.default is None else self.parse(self.default)


_INTEGER = re.compile(r"[+-]?[0-9]+")
_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}


def _parse_type(name: str, type_: ConfigType, raw: str) -> ConfigValue:
    text = raw.strip()
    if type_ is ConfigType.BOOLEAN:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(f"{name}: expected true or false, got {raw!r}", name)
    if type_ in _BITS:
        if not _INTEGER.fullmatch(text):
            raise ConfigError(f"{name}: expected an integer ({type_.name}), got {raw!r}", name)
        number = int(text)
        limit = 2 ** (_BITS[type_] - 1)
        if not -limit <= number < limit:
            raise ConfigError(
                f"{name}: {number} is out of range for {type_.name} ({-limit} to {limit - 1})",
                name,
            )
        return number
    if type_ is ConfigType.DOUBLE:
        try:
            number_f = float(text)
        except ValueError:
            number_f = math.nan
        if math.isnan(number_f) or "_" in text:
            raise ConfigError(f"{name}: expected a number (DOUBLE), got {raw!r}", name)
        return number_f
    if type_ is ConfigType.LIST:
        return tuple(item.strip() for item in text.split(",")) if text else ()
    return text


def render(definition: ConfigDef, value: ConfigValue) -> str | None:
    """The string Kafka's `ConfigDef.convertToString` gives for a parsed value."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


@dataclasses.dataclass(frozen=True)
class ConfigSynonymEntry:
    """One DescribeConfigs synonym: where else a value could come from, in precedence order."""

    name: str
    value: str | None
    source: ConfigSource


@dataclasses.dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs result row; `value` is None for passwords and unset configs."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    type: ConfigType
    documentation: str
    synonyms: tuple[ConfigSynonymEntry, ...]


def unknown_key_error(key: str, known: Iterable[str], what: str) -> ConfigError:
    """`unknown <what> 'x'`, with the closest known name when there is one."""
    match = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    hint = f" (did you mean {match[0]!r}?)" if match else ""
    return ConfigError(f"unknown {what} {key!r}{hint}", key)


# --- structured string values (listeners are checked in broker.py, with their names)


def parse_host_port(text: str) -> tuple[str, int] | None:
    """`host:port` or `[ipv6]:port`; host may be empty. None if malformed."""
    match = re.fullmatch(r"\[([0-9a-fA-F:.%]*)\]:([0-9]+)|([^\[\]:/\s]*):([0-9]+)", text)
    if match is None:
        return None
    host = match.group(1) if match.group(1) is not None else match.group(3)
    port = int(match.group(2) or match.group(4))
    if port > 65535:
        return None
    return host, port


def _check_protocol_map(value: ConfigValue) -> str | None:
    if not isinstance(value, str):
        return None
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip() or not protocol.strip():
            return f"expected LISTENER_NAME:SECURITY_PROTOCOL pairs, got {item!r}"
        if protocol.strip().upper() not in SECURITY_PROTOCOLS:
            return (
                f"unknown security protocol {protocol.strip()!r} for listener {name.strip()!r};"
                f" valid: {', '.join(SECURITY_PROTOCOLS)}"
            )
    return None


def _check_voters(value: ConfigValue) -> str | None:
    assert isinstance(value, tuple)
    for item in value:
        node_id, sep, address = item.partition("@")
        host_port = parse_host_port(address)
        if not sep or not re.fullmatch(r"[0-9]+", node_id) or not host_port or not host_port[0]:
            return f"expected id@host:port entries (e.g. 1@localhost:9093), got {item!r}"
        if int(node_id) > INT_MAX:
            return f"voter id {node_id} in {item!r} is out of range for a node id (0 to {INT_MAX})"
    return None


def _check_host_ports(value: ConfigValue) -> str | None:
    assert isinstance(value, tuple)
    for item in value:
        host_port = parse_host_port(item)
        if host_port is None or not host_port[0]:
            return f"expected host:port entries (e.g. localhost:9093), got {item!r}"
    return None


_THROTTLED_REPLICA = re.compile(r"[0-9]+:[0-9]+")


def check_throttled_replicas(value: ConfigValue) -> str | None:
    """Kafka's ThrottledReplicaListValidator: `*`, or partition:broker entries."""
    assert isinstance(value, tuple)
    entries = [entry.strip() for entry in value]
    if entries == ["*"] or all(not e or _THROTTLED_REPLICA.fullmatch(e) for e in entries):
        return None
    return (
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def _check_metrics_listener(value: ConfigValue) -> str | None:
    assert isinstance(value, str)
    if value and (not value.startswith("http://") or parse_host_port(value[7:]) is None):
        return f"expected http://host:port, or empty to disable, got {value!r}"
    return None


def _check_nonempty_token(value: ConfigValue) -> str | None:
    if value is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", str(value)):
        return f"expected letters, digits, '_', '-' or '.', got {value!r}"
    return None


def _check_distinct_roles(value: ConfigValue) -> str | None:
    assert isinstance(value, tuple)
    if len(set(value)) != len(value):
        return f"lists a role twice: {','.join(value)}"
    return None


def _check_queued_request_bytes(value: ConfigValue) -> str | None:
    if isinstance(value, int) and value != -1 and value < 1:
        return f"must be -1 (no limit) or at least 1, got {value}"
    return None


# Kafka's names of its server-side assignors, and the short names they answer to.
CONSUMER_ASSIGNORS = {
    "uniform": "uniform",
    "range": "range",
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def _check_assignors(value: ConfigValue) -> str | None:
    names = value if isinstance(value, tuple) else ()
    if not names:
        return "at least one assignor is needed"
    unknown = [name for name in names if name not in CONSUMER_ASSIGNORS]
    return f"unknown assignor(s) {', '.join(unknown)}: uniform or range" if unknown else None


def _check_classic_protocol(value: ConfigValue) -> str | None:
    # Kafka: the classic protocol is always served (KafkaConfig's validation).
    return None if isinstance(value, tuple) and "classic" in value else "must include classic"


def _all(*validators: Validator) -> Validator:
    def check(value: ConfigValue) -> str | None:
        for validator in validators:
            problem = validator(value)
            if problem is not None:
                return problem
        return None

    return check


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
HOUR_MS = 3_600_000
MINUTE_MS = 60_000

_B = ConfigType.BOOLEAN
_S = ConfigType.STRING
_I = ConfigType.INT
_SH = ConfigType.SHORT
_L = ConfigType.LONG
_D = ConfigType.DOUBLE
_LI = ConfigType.LIST
_IGNORED = " Accepted for compatibility with Kafka's server.properties; Strom ignores it."


def _table(*definitions: ConfigDef) -> dict[str, ConfigDef]:
    table = {d.name: d for d in definitions}
    assert len(table) == len(definitions), "duplicate config name"
    for d in definitions:
        d.default_value()  # a bad default fails here, at import
    return table


# fmt: off
BROKER_CONFIGS: Mapping[str, ConfigDef] = _table(
    # --- identity and roles
    ConfigDef("node.id", _I, "1", "The node id of this server in the cluster (Strom default 1; Kafka requires it).", AtLeast(0)),
    ConfigDef("broker.id", _I, None, "The old name of node.id: a file that sets only broker.id sets node.id; when both are set they must be equal.", AtLeast(0)),
    ConfigDef("process.roles", _LI, "broker,controller", "The roles this node plays: broker, controller or both (Strom default both: a single node just works).", _all(OneOf(("broker", "controller")), Custom(_check_distinct_roles))),
    ConfigDef("cluster.id", _S, None, "The cluster id; null means generate one and store it in the log dirs on first start (Strom-specific; Kafka uses kafka-storage format).", Custom(_check_nonempty_token)),
    ConfigDef("broker.rack", _S, None, "Rack of the broker, used for rack-aware replica assignment."),
    # --- listeners
    ConfigDef("listeners", _S, "PLAINTEXT://localhost:9092", "Comma-separated NAME://host:port URIs to listen on; an empty host or 0.0.0.0 binds all interfaces."),
    ConfigDef("advertised.listeners", _S, None, "Listeners published to clients, if different from listeners; null means use listeners (an unspecified host becomes this machine's hostname)."),
    ConfigDef("listener.security.protocol.map", _S, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "Map from listener name to security protocol, LISTENER:PROTOCOL pairs (Strom serves PLAINTEXT only for now).", Custom(_check_protocol_map)),
    ConfigDef("inter.broker.listener.name", _S, None, "Listener brokers use to talk to each other; null means the first non-controller listener."),
    ConfigDef("controller.listener.names", _LI, "", "Names of the listeners used by the controller quorum."),
    ConfigDef("controller.quorum.voters", _LI, "", "The static controller quorum, a comma-separated list of {id}@{host}:{port} entries (e.g. 1@localhost:9093,2@localhost:9094,3@localhost:9095). Empty: the quorum is found through controller.quorum.bootstrap.servers, and with neither set (the Strom default) a controller is a quorum of one, this node.", Custom(_check_voters)),
    ConfigDef("controller.quorum.bootstrap.servers", _LI, "", "Endpoints used to discover the controller quorum, a comma-separated list of {host}:{port} entries (KIP-853). Without controller.quorum.voters a controller must list only its own controller endpoint: Strom starts it as a quorum of one (Kafka's kafka-storage format --standalone).", Custom(_check_host_ports)),
    ConfigDef("controller.quorum.election.timeout.ms", _I, "1000", "Maximum time in milliseconds to wait without being able to fetch from the leader before triggering a new election.", AtLeast(0)),
    ConfigDef("controller.quorum.fetch.timeout.ms", _I, "2000", "Maximum time without a successful fetch from the current leader before a voter becomes a candidate; maximum time a leader can go without fetches from a majority of the quorum before resigning.", AtLeast(0)),
    ConfigDef("controller.quorum.election.backoff.max.ms", _I, "1000", "Maximum time in milliseconds before starting new elections (binary exponential backoff against gridlocked elections).", AtLeast(0)),
    ConfigDef("controller.quorum.request.timeout.ms", _I, "2000", "Maximum time a quorum request waits for its response before it is retried or failed.", AtLeast(0)),
    ConfigDef("controller.quorum.retry.backoff.ms", _I, "20", "Time to wait before retrying a failed quorum request.", AtLeast(0)),
    ConfigDef("controller.quorum.append.linger.ms", _I, "25", "Time in milliseconds the leader waits for writes to accumulate before flushing them to disk.", AtLeast(0)),
    ConfigDef("broker.heartbeat.interval.ms", _I, "2000", "Milliseconds between broker heartbeats to the controller (Strom refuses values below 1).", AtLeast(1)),
    ConfigDef("broker.session.timeout.ms", _I, "9000", "Milliseconds a broker lease lasts without a heartbeat before the controller fences it (Strom refuses values below 1).", AtLeast(1)),
    ConfigDef("initial.broker.registration.timeout.ms", _I, "60000", "How long a broker waits for its first registration with the controller quorum before it gives up and shuts down." + _IGNORED, ignored=True),
    # --- the metadata log (KRaft)
    ConfigDef("metadata.log.dir", _S, None, "Where the cluster metadata log lives; null means the first log directory (log.dirs, else log.dir)."),
    ConfigDef("metadata.log.segment.bytes", _I, "1073741824", "The maximum size of a single metadata log segment.", AtLeast(8 * 1024 * 1024)),
    ConfigDef("metadata.log.segment.ms", _L, "604800000", "The maximum time before a new metadata log segment is rolled out." + _IGNORED, ignored=True),
    ConfigDef("metadata.max.retention.bytes", _L, "104857600", "The maximum combined size of the metadata log and snapshots before old snapshots and segments are deleted (a soft limit: one snapshot always stays)."),
    ConfigDef("metadata.max.retention.ms", _L, "604800000", "How long a metadata log segment or snapshot is kept (a soft limit: one snapshot always stays)." + _IGNORED, ignored=True),
    ConfigDef("metadata.log.max.snapshot.interval.ms", _L, "3600000", "Maximum time to wait before generating a snapshot when committed records are not in the latest one; 0 disables time-based snapshots.", AtLeast(0)),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", _L, "20971520", "Bytes in the metadata log between the latest snapshot and the high watermark before a new snapshot is generated.", AtLeast(1)),
    ConfigDef("metadata.max.idle.interval.ms", _I, "500", "How often the active controller writes a no-op record to the metadata log; 0 disables them." + _IGNORED, AtLeast(0), ignored=True),
    # --- storage
    ConfigDef("log.dirs", _LI, None, "Directories holding the log data; null means use log.dir."),
    ConfigDef("log.dir", _S, "./.strom-data", "Directory holding the log data, when log.dirs is not set (Strom default ./.strom-data; Kafka /tmp/kafka-logs)."),
    ConfigDef("log.segment.bytes", _I, "1073741824", "The maximum size of a single log segment file.", AtLeast(14), dynamic=True),
    ConfigDef("log.roll.ms", _L, None, "Maximum time before a new segment is rolled out; null means use log.roll.hours.", AtLeast(1), dynamic=True),
    ConfigDef("log.roll.hours", _I, "168", "Maximum time in hours before a new segment is rolled out.", AtLeast(1)),
    ConfigDef("log.roll.jitter.ms", _L, None, "Maximum jitter subtracted from the roll time; null means use log.roll.jitter.hours.", AtLeast(0), dynamic=True),
    ConfigDef("log.roll.jitter.hours", _I, "0", "Maximum jitter in hours subtracted from the roll time.", AtLeast(0)),
    ConfigDef("log.retention.ms", _L, None, "Time to keep a segment before deleting it; -1 means no limit; null means use log.retention.minutes.", dynamic=True),
    ConfigDef("log.retention.minutes", _I, None, "Time in minutes to keep a segment; null means use log.retention.hours."),
    ConfigDef("log.retention.hours", _I, "168", "Time in hours to keep a segment before deleting it."),
    ConfigDef("log.retention.bytes", _L, "-1", "Maximum size of a partition before old segments are deleted; -1 means no limit.", dynamic=True),
    ConfigDef("log.retention.check.interval.ms", _L, "300000", "How often the retention checker runs.", AtLeast(1)),
    ConfigDef("log.index.interval.bytes", _I, "4096", "Bytes of log between entries of the offset index.", AtLeast(0), dynamic=True),
    ConfigDef("log.index.size.max.bytes", _I, "10485760", "Maximum size of an offset index file.", AtLeast(4), dynamic=True),
    ConfigDef("log.segment.delete.delay.ms", _L, "60000", "Time to wait before deleting a file from the filesystem.", AtLeast(0), dynamic=True),
    ConfigDef("log.flush.interval.messages", _L, str(LONG_MAX), "Messages accumulated on a partition before they are fsynced.", AtLeast(1), dynamic=True),
    ConfigDef("log.flush.interval.ms", _L, None, "Maximum time data stays unflushed; null means use log.flush.scheduler.interval.ms.", dynamic=True),
    ConfigDef("log.flush.scheduler.interval.ms", _L, str(LONG_MAX), "How often the flusher checks whether a log needs flushing."),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", _I, "60000", "How often the recovery point is checkpointed.", AtLeast(0)),
    ConfigDef("log.cleanup.policy", _LI, "delete", "Default cleanup policy for segments beyond the retention window: delete, compact or both; empty means neither (segments are kept for good).", OneOf(CLEANUP_POLICIES, allow_empty_list=True), dynamic=True),
    ConfigDef("log.cleaner.enable", _B, "true", "Run the log cleaner (needed for compacted topics such as __consumer_offsets)."),
    ConfigDef("log.cleaner.threads", _I, "1", "Number of background log cleaner threads.", AtLeast(0), dynamic=True),
    ConfigDef("log.cleaner.backoff.ms", _L, "15000", "Sleep time when there are no logs to clean.", AtLeast(0), dynamic=True),
    ConfigDef("log.cleaner.delete.retention.ms", _L, "86400000", "How long delete tombstones are kept on compacted topics.", AtLeast(0), dynamic=True),
    ConfigDef("log.cleaner.min.compaction.lag.ms", _L, "0", "Minimum time a message stays uncompacted.", AtLeast(0), dynamic=True),
    ConfigDef("log.cleaner.max.compaction.lag.ms", _L, str(LONG_MAX), "Maximum time a message stays ineligible for compaction.", AtLeast(1), dynamic=True),
    ConfigDef("log.cleaner.min.cleanable.ratio", _D, "0.5", "Minimum ratio of dirty log to total log for a log to be cleaned.", Between(0, 1), dynamic=True),
    ConfigDef("log.cleaner.io.max.bytes.per.second", _D, "1.7976931348623157E308", "The log cleaner's combined read and write I/O is throttled to this many bytes per second (default: unthrottled).", dynamic=True),
    ConfigDef("log.cleaner.dedupe.buffer.size", _L, "134217728", "Memory the log cleaner uses for its key-to-offset map.", dynamic=True),
    ConfigDef("log.cleaner.io.buffer.size", _I, "524288", "Memory the log cleaner uses for its read and write buffers.", AtLeast(0), dynamic=True),
    ConfigDef("log.cleaner.io.buffer.load.factor", _D, "0.9", "Load factor of the log cleaner's dedupe map.", dynamic=True),
    ConfigDef("log.preallocate", _B, "false", "Preallocate the file when creating a new segment.", dynamic=True),
    ConfigDef("log.message.timestamp.type", _S, "CreateTime", "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).", OneOf(TIMESTAMP_TYPES), dynamic=True),
    ConfigDef("log.message.timestamp.before.max.ms", _L, str(LONG_MAX), "Maximum allowed amount a record timestamp may be before the broker's time.", AtLeast(0), dynamic=True),
    ConfigDef("log.message.timestamp.after.max.ms", _L, str(LONG_MAX), "Maximum allowed amount a record timestamp may be after the broker's time.", AtLeast(0), dynamic=True),
    ConfigDef("num.recovery.threads.per.data.dir", _I, "2", "Threads per data dir for log recovery at startup and flushing at shutdown." + _IGNORED, AtLeast(1), dynamic=True, ignored=True),
    # --- topics and replication
    ConfigDef("num.partitions", _I, "1", "Default number of partitions of an automatically created topic.", AtLeast(1)),
    ConfigDef("default.replication.factor", _I, "1", "Default replication factor of an automatically created topic.", AtLeast(1)),
    ConfigDef("min.insync.replicas", _I, "1", "Minimum in-sync replicas for an acks=all produce to succeed.", AtLeast(1), dynamic=True),
    ConfigDef("auto.create.topics.enable", _B, "true", "Create a topic when a client asks for metadata of a topic that does not exist."),
    ConfigDef("delete.topic.enable", _B, "true", "Allow deleting topics."),
    ConfigDef("auto.leader.rebalance.enable", _B, "true", "Move leadership back to preferred replicas in the background."),
    ConfigDef("leader.imbalance.check.interval.seconds", _L, "300", "How often the controller checks leader imbalance.", AtLeast(1)),
    ConfigDef("leader.imbalance.per.broker.percentage", _I, "10", "Allowed leader imbalance per broker, in percent."),
    ConfigDef("unclean.leader.election.enable", _B, "false", "Allow out-of-sync replicas to become leader as a last resort, at the risk of data loss.", dynamic=True),
    ConfigDef("compression.type", _S, "producer", "Final compression of topic data: producer keeps the producer's codec.", OneOf(COMPRESSION_TYPES), dynamic=True),
    ConfigDef("replica.lag.time.max.ms", _L, "30000", "A follower that has not caught up for this long is removed from the ISR."),
    ConfigDef("replica.fetch.max.bytes", _I, "1048576", "Bytes a follower asks for per partition in a fetch.", AtLeast(0)),
    ConfigDef("replica.fetch.min.bytes", _I, "1", "Minimum bytes a follower's fetch waits for."),
    ConfigDef("replica.fetch.wait.max.ms", _I, "500", "Maximum wait time of a follower's fetch."),
    ConfigDef("replica.fetch.response.max.bytes", _I, "10485760", "Maximum bytes expected for a whole follower fetch response.", AtLeast(0)),
    ConfigDef("replica.socket.timeout.ms", _I, "30000", "Socket timeout for follower fetch requests."),
    ConfigDef("replica.fetch.backoff.ms", _I, "1000", "How long a follower waits before fetching again after an error.", AtLeast(0)),
    ConfigDef("max.incremental.fetch.session.cache.slots", _I, "1000", "Maximum incremental fetch sessions (KIP-227) the broker keeps.", AtLeast(0)),
    ConfigDef("min.incremental.fetch.session.eviction.ms", _I, "120000", "Strom: minimum time a fetch session is kept before a session of its own rank may take its slot; unused this long, any new session may. KIP-227 names it; Kafka fixes it at 120000.", AtLeast(0)),
    ConfigDef("num.replica.fetchers", _I, "1", "Fetcher threads per source broker." + _IGNORED, dynamic=True, ignored=True),
    # kafka-reassign-partitions.sh sets (--throttle) and always clears (--verify) these
    ConfigDef("leader.replication.throttled.rate", _L, str(LONG_MAX), "Bytes per second a leader may send to throttled replicas (leader.replication.throttled.replicas) that are not in sync; over it, their fetches get no records until the rate falls.", AtLeast(0), dynamic=True),
    ConfigDef("follower.replication.throttled.rate", _L, str(LONG_MAX), "Bytes per second a follower may fetch for throttled replicas (follower.replication.throttled.replicas) that are not in sync; over it, they are left out of its fetches until the rate falls.", AtLeast(0), dynamic=True),
    ConfigDef("replication.quota.window.num", _I, "11", "Samples the replication quotas' rates are measured over.", AtLeast(1)),
    ConfigDef("replication.quota.window.size.seconds", _I, "1", "Length of one sample of the replication quotas' rates, in seconds.", AtLeast(1)),
    ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", _L, str(LONG_MAX), "Bytes per second a replica moving between log dirs may copy." + _IGNORED, AtLeast(0), dynamic=True, ignored=True),
    # --- network
    ConfigDef("message.max.bytes", _I, "1048588", "Largest record batch size the broker accepts.", AtLeast(0), dynamic=True),
    ConfigDef("socket.request.max.bytes", _I, "104857600", "Maximum bytes in a socket request.", AtLeast(1)),
    ConfigDef("socket.send.buffer.bytes", _I, "102400", "SO_SNDBUF of server sockets; -1 means the OS default."),
    ConfigDef("socket.receive.buffer.bytes", _I, "102400", "SO_RCVBUF of server sockets; -1 means the OS default."),
    ConfigDef("socket.listen.backlog.size", _I, "50", "Maximum pending connections on a listening socket.", AtLeast(1)),
    ConfigDef("connections.max.idle.ms", _L, "600000", "Idle connections are closed after this many milliseconds."),
    ConfigDef("max.request.partition.size.limit", _I, "2000", "The most partitions one DescribeTopicPartitions response may describe; the client pages through the rest.", AtLeast(1)),
    ConfigDef("fetch.max.bytes", _I, "57671680", "Maximum bytes returned for a fetch request.", AtLeast(1024)),
    # Kafka's default is -1 (no limit): N clients each sending a request just under
    # socket.request.max.bytes then cost N times that in memory (10 took Strom to 1.1 GiB).
    # Strom bounds it by default; -1 restores Kafka's behaviour.
    ConfigDef("queued.max.request.bytes", _L, "104857600", "Memory for requests being read or handled, across all connections; while it is used up, connections stop reading until requests finish (back-pressure). One request may go past it, so the peak is about this plus socket.request.max.bytes. -1 means no limit (Kafka's default); Strom's default is 100 MiB so that many large requests at once cannot exhaust memory.", Custom(_check_queued_request_bytes)),
    ConfigDef("queued.max.requests", _I, "500", "Requests queued before the network stops reading more (backpressure).", AtLeast(1)),
    ConfigDef("num.network.threads", _I, "3", "Kafka's network thread count; Strom's asyncio server has no such pool." + _IGNORED, AtLeast(1), dynamic=True, ignored=True),
    ConfigDef("num.io.threads", _I, "8", "Kafka's request handler thread count; Strom's asyncio server has no such pool." + _IGNORED, AtLeast(1), dynamic=True, ignored=True),
    ConfigDef("background.threads", _I, "10", "Threads for background tasks." + _IGNORED, AtLeast(1), dynamic=True, ignored=True),
    # --- coordinators. Replication factors default to 1, like Kafka's shipped
    # config/server.properties, not Kafka's built-in 3: Kafka refuses to create the
    # internal topics with more replicas than live brokers, so 3 breaks `make run`.
    ConfigDef("offsets.topic.num.partitions", _I, "50", "Partitions of __consumer_offsets (do not change after deployment).", AtLeast(1)),
    ConfigDef("offsets.topic.replication.factor", _SH, "1", "Replication factor of __consumer_offsets (Strom default 1, like Kafka's shipped server.properties; Kafka's built-in default is 3).", AtLeast(1)),
    ConfigDef("offsets.topic.segment.bytes", _I, "104857600", "Segment size of __consumer_offsets.", AtLeast(1)),
    ConfigDef("offsets.retention.minutes", _I, "10080", "Committed offsets of an empty group are kept this long.", AtLeast(1)),
    ConfigDef("offsets.retention.check.interval.ms", _L, "600000", "How often stale offsets are checked.", AtLeast(1)),
    ConfigDef("offset.metadata.max.bytes", _I, "4096", "Largest metadata string a consumer may commit with an offset.", AtLeast(0)),
    ConfigDef("transaction.state.log.num.partitions", _I, "50", "Partitions of __transaction_state.", AtLeast(1)),
    ConfigDef("transaction.state.log.replication.factor", _SH, "1", "Replication factor of __transaction_state (Strom default 1, like Kafka's shipped server.properties; Kafka's built-in default is 3).", AtLeast(1)),
    ConfigDef("transaction.state.log.min.isr", _I, "1", "min.insync.replicas of __transaction_state (Strom default 1, like Kafka's shipped server.properties; Kafka's built-in default is 2).", AtLeast(1)),
    ConfigDef("transaction.state.log.segment.bytes", _I, "104857600", "Segment size of __transaction_state.", AtLeast(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, "10000", "How often transactions open past their timeout are aborted.", AtLeast(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", _I, "3600000", "How often expired transactional ids are removed.", AtLeast(1)),
    ConfigDef("transaction.max.timeout.ms", _I, "900000", "Maximum transaction timeout a producer may ask for.", AtLeast(1)),
    ConfigDef("add.partitions.to.txn.retry.backoff.max.ms", _I, "1000", "How long AddPartitionsToTxn / AddOffsetsToTxn that find the previous transaction still ending wait for it before answering CONCURRENT_TRANSACTIONS (Strom default 1000: ending takes more than Kafka's 100 on a loaded 2-core machine).", AtLeast(0)),
    ConfigDef("transactional.id.expiration.ms", _I, "604800000", "A transactional id with no updates for this long expires.", AtLeast(1), dynamic=True),
    ConfigDef("producer.id.expiration.ms", _I, "86400000", "A producer id with no writes for this long expires.", AtLeast(1), dynamic=True),
    ConfigDef("group.initial.rebalance.delay.ms", _I, "3000", "Time the coordinator waits for more members before the first rebalance of a new group."),
    ConfigDef("group.min.session.timeout.ms", _I, "6000", "Minimum session timeout a consumer may ask for."),
    ConfigDef("group.max.session.timeout.ms", _I, "1800000", "Maximum session timeout a consumer may ask for."),
    ConfigDef("group.max.size", _I, str(INT_MAX), "Maximum members in one consumer group.", AtLeast(1)),
    # The defaults and bounds of the group configs (GROUP resources: config/groups.py), Kafka's
    # GroupCoordinatorConfig and ShareGroupConfig. Strom serves no share or streams groups.
    ConfigDef("group.consumer.session.timeout.ms", _I, "45000", "The timeout to detect client failures when using the consumer group protocol.", AtLeast(1)),
    ConfigDef("group.consumer.min.session.timeout.ms", _I, "45000", "The minimum allowed session timeout for registered consumers.", AtLeast(1)),
    ConfigDef("group.consumer.max.session.timeout.ms", _I, "60000", "The maximum allowed session timeout for registered consumers.", AtLeast(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", _I, "5000", "The heartbeat interval given to the members of a consumer group.", AtLeast(1)),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", _I, "5000", "The minimum heartbeat interval for registered consumers.", AtLeast(1)),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", _I, "15000", "The maximum heartbeat interval for registered consumers.", AtLeast(1)),
    ConfigDef("group.consumer.assignment.interval.ms", _I, "1000", "The interval between assignment updates for a consumer group.", AtLeast(0), dynamic=True),
    ConfigDef("group.consumer.min.assignment.interval.ms", _I, "0", "The minimum interval between assignment updates for a consumer group.", AtLeast(0)),
    ConfigDef("group.consumer.max.assignment.interval.ms", _I, "15000", "The maximum interval between assignment updates for a consumer group.", AtLeast(0)),
    ConfigDef("group.share.session.timeout.ms", _I, "45000", "The timeout to detect client failures when using the share group protocol." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.share.min.session.timeout.ms", _I, "45000", "The minimum allowed session timeout for share group members." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.share.max.session.timeout.ms", _I, "60000", "The maximum allowed session timeout for share group members." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.share.heartbeat.interval.ms", _I, "5000", "The heartbeat interval given to the members of a share group." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.share.min.heartbeat.interval.ms", _I, "5000", "The minimum heartbeat interval for share group members." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.share.max.heartbeat.interval.ms", _I, "15000", "The maximum heartbeat interval for share group members." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.share.assignment.interval.ms", _I, "1000", "The interval between assignment updates for a share group." + _IGNORED, AtLeast(0), dynamic=True, ignored=True),
    ConfigDef("group.share.min.assignment.interval.ms", _I, "0", "The minimum interval between assignment updates for a share group." + _IGNORED, AtLeast(0), ignored=True),
    ConfigDef("group.share.max.assignment.interval.ms", _I, "15000", "The maximum interval between assignment updates for a share group." + _IGNORED, AtLeast(0), ignored=True),
    ConfigDef("group.share.record.lock.duration.ms", _I, "30000", "The record acquisition lock duration in milliseconds for share groups." + _IGNORED, AtLeast(1000), ignored=True),
    ConfigDef("group.share.min.record.lock.duration.ms", _I, "15000", "The minimum value of a group configuration for record acquisition lock duration in milliseconds." + _IGNORED, AtLeast(1000), ignored=True),
    ConfigDef("group.share.max.record.lock.duration.ms", _I, "60000", "The maximum value of a group configuration for record acquisition lock duration in milliseconds." + _IGNORED, AtLeast(1000), ignored=True),
    ConfigDef("group.share.delivery.count.limit", _I, "5", "The maximum number of delivery attempts for a record delivered to a share group." + _IGNORED, AtLeast(2), ignored=True),
    ConfigDef("group.share.min.delivery.count.limit", _I, "2", "The minimum value of a group configuration for the maximum number of delivery attempts." + _IGNORED, AtLeast(2), ignored=True),
    ConfigDef("group.share.max.delivery.count.limit", _I, "10", "The maximum value of a group configuration for the maximum number of delivery attempts." + _IGNORED, AtLeast(2), ignored=True),
    ConfigDef("group.share.partition.max.record.locks", _I, "2000", "Share-group record lock limit per share-partition." + _IGNORED, AtLeast(100), ignored=True),
    ConfigDef("group.share.min.partition.max.record.locks", _I, "100", "The minimum value of a group configuration for the record lock limit per share-partition." + _IGNORED, AtLeast(100), ignored=True),
    ConfigDef("group.share.max.partition.max.record.locks", _I, "4000", "The maximum value of a group configuration for the record lock limit per share-partition." + _IGNORED, AtLeast(100), ignored=True),
    ConfigDef("group.streams.session.timeout.ms", _I, "45000", "The timeout to detect client failures when using the streams group protocol." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.streams.min.session.timeout.ms", _I, "45000", "The minimum allowed value for the group-level configuration of streams.session.timeout.ms." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.streams.max.session.timeout.ms", _I, "60000", "The maximum allowed value for the group-level configuration of streams.session.timeout.ms." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.streams.heartbeat.interval.ms", _I, "5000", "The heartbeat interval given to the members of a streams group." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.streams.min.heartbeat.interval.ms", _I, "5000", "The minimum allowed value for the group-level configuration of streams.heartbeat.interval.ms." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.streams.max.heartbeat.interval.ms", _I, "15000", "The maximum allowed value for the group-level configuration of streams.heartbeat.interval.ms." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("group.streams.assignment.interval.ms", _I, "1000", "The interval between assignment updates for a streams group." + _IGNORED, AtLeast(0), dynamic=True, ignored=True),
    ConfigDef("group.streams.min.assignment.interval.ms", _I, "0", "The minimum interval between assignment updates for a streams group." + _IGNORED, AtLeast(0), ignored=True),
    ConfigDef("group.streams.max.assignment.interval.ms", _I, "15000", "The maximum interval between assignment updates for a streams group." + _IGNORED, AtLeast(0), ignored=True),
    ConfigDef("group.streams.num.standby.replicas", _I, "0", "The number of standby replicas for each task." + _IGNORED, AtLeast(0), ignored=True),
    ConfigDef("group.streams.max.standby.replicas", _I, "2", "The maximum allowed value for the group-level configuration of streams.num.standby.replicas." + _IGNORED, AtLeast(0), ignored=True),
    ConfigDef("group.streams.initial.rebalance.delay.ms", _I, "3000", "The time the coordinator waits for more streams clients to join a new group before the first rebalance." + _IGNORED, AtLeast(0), ignored=True),
    ConfigDef("group.coordinator.rebalance.protocols", _LI, "classic,consumer", "The group protocols served: classic (JoinGroup/SyncGroup) and consumer (KIP-848's ConsumerGroupHeartbeat); streams (Kafka 4.3's default lists it) is accepted and not served.", _all(OneOf(("classic", "consumer", "streams")), Custom(_check_classic_protocol))),
    ConfigDef("group.consumer.assignors", _LI, "uniform,range", "The server-side assignors of consumer-protocol groups (uniform, range, or Kafka's class names of them); the first is the default.", Custom(_check_assignors)),
    ConfigDef("group.consumer.migration.policy", _S, "bidirectional", "Whether a classic group converts to a consumer-protocol group (upgrade), back (downgrade), both (bidirectional) or neither (disabled).", OneOf(("disabled", "upgrade", "downgrade", "bidirectional"))),
    ConfigDef("share.coordinator.state.topic.replication.factor", _SH, "1", "Replication factor of the share-group state topic." + _IGNORED, AtLeast(1), ignored=True),
    ConfigDef("share.coordinator.state.topic.min.isr", _SH, "1", "min.insync.replicas of the share-group state topic." + _IGNORED, AtLeast(1), ignored=True),
    # --- Strom-specific
    ConfigDef("metrics.listener", _S, "http://0.0.0.0:9404", "Strom: http://host:port serving /metrics, /healthz and /readyz; empty disables it.", Custom(_check_metrics_listener)),
    # Kafka has no such bound; 16 million partitions asked for by one CreatePartitions
    # wedged a broker for good. Kafka's own per-request bound (10,000) applies as well.
    ConfigDef("max.partitions.per.broker", _I, "50000", "Strom: the most partition replicas one broker may host; CreateTopics and CreatePartitions beyond it are refused with POLICY_VIOLATION. One request may create at most 10,000 partitions, as in Kafka.", AtLeast(1), dynamic=True),
)
# fmt: on


def _with_kafka_configs(own: Mapping[str, ConfigDef]) -> dict[str, ConfigDef]:
    """Strom's own broker configs, then every other Kafka 4.x broker/controller config as
    `ignored` (kafka_broker_configs.py): a Kafka server.properties loads as is, and a key
    that is not Kafka's (a typo) is still refused."""
    kafka_only = [
        ConfigDef(
            name, ConfigType[type_name], default, doc + _IGNORED, dynamic=dynamic, ignored=True
        )
        for name, type_name, default, dynamic, doc in kafka_broker_configs.KAFKA_BROKER_CONFIGS
        if name not in own
    ]
    return {**own, **_table(*kafka_only)}


BROKER_CONFIGS = _with_kafka_configs(BROKER_CONFIGS)

# Broker configs that are one setting spelled in several units, most precise first
# (Kafka's DynamicBrokerConfig.brokerConfigSynonyms).
BROKER_SYNONYM_FAMILIES: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    for family in BROKER_SYNONYM_FAMILIES:
        if name in family:
            return family
    return (name,)


def _t(
    name: str,
    type_: ConfigType,
    default: str | None,
    doc: str,
    validator: Validator | None = None,
    synonyms: tuple[str | Synonym, ...] = (),
) -> ConfigDef:
    syns = tuple(s if isinstance(s, Synonym) else Synonym(s) for s in synonyms)
    return ConfigDef(name, type_, default, doc, validator, dynamic=True, synonyms=syns)


# Kafka's TopicConfig defaults and ServerTopicConfigSynonyms (most precise first).
# fmt: off
TOPIC_CONFIGS: Mapping[str, ConfigDef] = _table(
    _t("cleanup.policy", _LI, "delete", "delete old segments, compact to the last value per key, or both; an empty list means neither, infinite retention (Kafka 4).", OneOf(CLEANUP_POLICIES, allow_empty_list=True), ("log.cleanup.policy",)),
    _t("compression.type", _S, "producer", "Final compression of the topic's data; producer keeps the producer's codec.", OneOf(COMPRESSION_TYPES), ("compression.type",)),
    _t("compression.gzip.level", _I, "-1", "gzip level when compression.type is gzip.", Custom(lambda v: None if v == -1 or Between(1, 9)(v) is None else f"must be -1 or between 1 and 9, got {v}")),
    _t("compression.lz4.level", _I, "9", "lz4 level when compression.type is lz4.", Between(1, 17)),
    _t("compression.zstd.level", _I, "3", "zstd level when compression.type is zstd.", Between(-131072, 22)),
    _t("delete.retention.ms", _L, "86400000", "How long delete tombstones are kept on a compacted topic.", AtLeast(0), ("log.cleaner.delete.retention.ms",)),
    _t("file.delete.delay.ms", _L, "60000", "Time to wait before deleting a file from the filesystem.", AtLeast(0), ("log.segment.delete.delay.ms",)),
    _t("flush.messages", _L, str(LONG_MAX), "Messages written before an fsync is forced.", AtLeast(1), ("log.flush.interval.messages",)),
    _t("flush.ms", _L, str(LONG_MAX), "Time after which an fsync is forced.", AtLeast(0), ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    _t("follower.replication.throttled.replicas", _LI, "", "Replicas throttled on the follower side: partition:broker entries (the broker fetching), or * for all; see follower.replication.throttled.rate.", Custom(check_throttled_replicas)),
    _t("leader.replication.throttled.replicas", _LI, "", "Replicas throttled on the leader side: partition:broker entries (the broker leading), or * for all; see leader.replication.throttled.rate.", Custom(check_throttled_replicas)),
    _t("index.interval.bytes", _I, "4096", "Bytes of log between entries of the offset index.", AtLeast(0), ("log.index.interval.bytes",)),
    _t("max.compaction.lag.ms", _L, str(LONG_MAX), "Maximum time a message stays ineligible for compaction.", AtLeast(1), ("log.cleaner.max.compaction.lag.ms",)),
    _t("max.message.bytes", _I, "1048588", "Largest record batch size the topic accepts.", AtLeast(0), ("message.max.bytes",)),
    _t("message.timestamp.type", _S, "CreateTime", "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).", OneOf(TIMESTAMP_TYPES), ("log.message.timestamp.type",)),
    _t("message.timestamp.before.max.ms", _L, str(LONG_MAX), "Maximum allowed amount a record timestamp may be before the broker's time.", AtLeast(0), ("log.message.timestamp.before.max.ms",)),
    _t("message.timestamp.after.max.ms", _L, str(LONG_MAX), "Maximum allowed amount a record timestamp may be after the broker's time.", AtLeast(0), ("log.message.timestamp.after.max.ms",)),
    _t("min.cleanable.dirty.ratio", _D, "0.5", "Minimum ratio of dirty log to total log for the log to be compacted.", Between(0, 1), ("log.cleaner.min.cleanable.ratio",)),
    _t("min.compaction.lag.ms", _L, "0", "Minimum time a message stays uncompacted.", AtLeast(0), ("log.cleaner.min.compaction.lag.ms",)),
    _t("min.insync.replicas", _I, "1", "Minimum in-sync replicas for an acks=all produce to succeed.", AtLeast(1), ("min.insync.replicas",)),
    _t("preallocate", _B, "false", "Preallocate the file when creating a new segment.", None, ("log.preallocate",)),
    _t("retention.bytes", _L, "-1", "Maximum size of a partition before old segments are deleted; -1 means no limit.", None, ("log.retention.bytes",)),
    _t("retention.ms", _L, "604800000", "Time to keep a segment before deleting it; -1 means no limit.", AtLeast(-1), ("log.retention.ms", Synonym("log.retention.minutes", MINUTE_MS), Synonym("log.retention.hours", HOUR_MS))),
    _t("segment.bytes", _I, "1073741824", "Segment file size of the log.", AtLeast(14), ("log.segment.bytes",)),
    _t("segment.index.bytes", _I, "10485760", "Size of the offset index file of a segment.", AtLeast(4), ("log.index.size.max.bytes",)),
    _t("segment.jitter.ms", _L, "0", "Maximum random jitter subtracted from segment.ms.", AtLeast(0), ("log.roll.jitter.ms", Synonym("log.roll.jitter.hours", HOUR_MS))),
    _t("segment.ms", _L, "604800000", "Time after which a segment is rolled even if not full.", AtLeast(1), ("log.roll.ms", Synonym("log.roll.hours", HOUR_MS))),
    _t("unclean.leader.election.enable", _B, "false", "Allow out-of-sync replicas to become leader as a last resort, at the risk of data loss.", None, ("unclean.leader.election.enable",)),
)
# fmt: on
