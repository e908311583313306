import pytest
from strom.config import definitions

ConfigType = definitions.ConfigType


def test_type_and_source_codes_match_kafka() -> None:
    assert [t.value for t in ConfigType if t is not ConfigType.UNKNOWN] == list(range(1, 10))
    assert int(ConfigType.PASSWORD) == 9
    sources = definitions.ConfigSource
    assert int(sources.TOPIC_CONFIG) == 1
    assert int(sources.STATIC_BROKER_CONFIG) == 4
    assert int(sources.DEFAULT_CONFIG) == 5
    assert int(sources.GROUP_CONFIG) == 8


@pytest.mark.parametrize(
    ("type_", "raw", "value"),
    [
        (ConfigType.BOOLEAN, " False ", False),
        (ConfigType.INT, "+42", 42),
        (ConfigType.SHORT, "-32768", -32768),
        (ConfigType.LONG, str(2**63 - 1), 2**63 - 1),
        (ConfigType.DOUBLE, "0.25", 0.25),
        (ConfigType.LIST, " a , b,c ", ("a", "b", "c")),
        (ConfigType.LIST, "  ", ()),
        (ConfigType.STRING, "  x y ", "x y"),
    ],
)
def test_parse_types_like_kafka(type_: ConfigType, raw: str, value: object) -> None:
    definition = definitions.ConfigDef("k", type_, None, "doc")
    assert definition.parse(raw) == value


@pytest.mark.parametrize(
    ("type_", "raw"),
    [
        (ConfigType.INT, str(2**31)),
        (ConfigType.SHORT, "32768"),
        (ConfigType.INT, "1_000"),
        (ConfigType.INT, "1.0"),
        (ConfigType.DOUBLE, "nan"),
        (ConfigType.DOUBLE, "1_0"),
        (ConfigType.BOOLEAN, "1"),
    ],
)
def test_parse_rejects(type_: ConfigType, raw: str) -> None:
    definition = definitions.ConfigDef("some.key", type_, None, "doc")
    with pytest.raises(definitions.ConfigError, match=r"^some\.key: ") as info:
        definition.parse(raw)
    assert info.value.key == "some.key"


def test_password_entries_are_sensitive() -> None:
    definition = definitions.ConfigDef("p", ConfigType.PASSWORD, None, "doc")
    assert definition.is_sensitive


def test_kafka_defaults() -> None:
    broker = definitions.BROKER_CONFIGS
    assert broker["log.segment.bytes"].default == "1073741824"
    assert broker["log.retention.hours"].default == "168"
    assert broker["log.retention.ms"].default is None
    assert broker["message.max.bytes"].default == "1048588"
    assert broker["socket.request.max.bytes"].default == "104857600"
    assert broker["group.initial.rebalance.delay.ms"].default == "3000"
    assert definitions.TOPIC_CONFIGS["retention.ms"].synonyms == (
        definitions.Synonym("log.retention.ms"),
        definitions.Synonym("log.retention.minutes", 60_000),
        definitions.Synonym("log.retention.hours", 3_600_000),
    )
