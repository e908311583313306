"""Group configs (GROUP resources, type 32) and ListConfigResources through the
dispatcher, as Kafka 4's `kafka-configs --entity-type groups` sends them:
IncrementalAlterConfigs validated against the broker's group.consumer.* bounds,
DescribeConfigs with GROUP_CONFIG sources and the broker synonyms, the config cache's
`group(group_id)` that the coordinator reads, and the configs kept across a restart
(metadata records and snapshots)."""

from __future__ import annotations

from pathlib import Path

from broker_calls import call, new_broker
from kio.schema.errors import ErrorCode
from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import records, snapshots
from strom.config import definitions
from strom.server import broker as broker_module
from test_config_handlers import OK, SET, incremental, legacy
from test_config_handlers import describe as describe_configs

ConfigSource = definitions.ConfigSource
TOPIC, GROUP = 2, 32
DELETE = 1
DESCRIBE_CONFIGS, LIST_CONFIG_RESOURCES = 32, 74


async def test_a_set_group_config_is_what_the_coordinator_reads(
    broker: broker_module.Broker,
) -> None:
    before = broker.configs.group("g1")
    assert (before.consumer_session_timeout_ms, before.consumer_heartbeat_interval_ms) == (
        45000,
        5000,
    )
    answer = await incremental(
        broker,
        [
            (
                GROUP,
                "g1",
                [
                    ("consumer.session.timeout.ms", SET, "50000"),
                    ("consumer.heartbeat.interval.ms", SET, "6000"),
                ],
            )
        ],
    )
    assert answer == [OK]
    group = broker.configs.group("g1")
    assert (group.consumer_session_timeout_ms, group.consumer_heartbeat_interval_ms) == (
        50000,
        6000,
    )
    assert broker.configs.group("another").consumer_session_timeout_ms == 45000
    assert await incremental(
        broker, [(GROUP, "g1", [("consumer.session.timeout.ms", DELETE, None)])]
    ) == [OK]
    assert broker.configs.group("g1").consumer_session_timeout_ms == 45000


async def test_describe_shows_group_config_sources_and_broker_synonyms(
    broker: broker_module.Broker,
) -> None:
    await incremental(broker, [(GROUP, "g2", [("consumer.session.timeout.ms", SET, "50000")])])
    configs = await describe_configs(broker, GROUP, "g2")
    session = configs["consumer.session.timeout.ms"]
    assert (session.value, session.config_source, session.read_only) == (
        "50000",
        ConfigSource.GROUP_CONFIG,
        False,
    )
    assert [(s.name, s.value, s.source) for s in session.synonyms] == [
        ("consumer.session.timeout.ms", "50000", ConfigSource.GROUP_CONFIG),
        ("group.consumer.session.timeout.ms", "45000", ConfigSource.DEFAULT_CONFIG),
    ]
    heartbeat = configs["consumer.heartbeat.interval.ms"]
    assert (heartbeat.value, heartbeat.config_source) == ("5000", ConfigSource.DEFAULT_CONFIG)
    assert {"share.auto.offset.reset", "streams.num.standby.replicas"} <= set(configs)


async def test_refusals_name_the_broker_bound(broker: broker_module.Broker) -> None:
    cases = {
        "consumer.session.timeout.ms=1000": (
            "consumer.session.timeout.ms must be greater than or equal to"
            " group.consumer.min.session.timeout.ms"
        ),
        "consumer.heartbeat.interval.ms=50000": (
            "consumer.heartbeat.interval.ms must be less than or equal to"
            " group.consumer.max.heartbeat.interval.ms"
        ),
        "nope.key=1": "Unknown group config name: nope.key",
        "share.auto.offset.reset=foo": "share.auto.offset.reset",
    }
    for setting, message in cases.items():
        key, _, value = setting.partition("=")
        [(code, text)] = await incremental(broker, [(GROUP, "g3", [(key, SET, value)])])
        assert code == ErrorCode.invalid_config, setting
        assert text is not None and message in text, text
    # the broker's maximum is allowed
    [(code, text)] = await incremental(
        broker,
        [(GROUP, "g3", [("consumer.heartbeat.interval.ms", SET, "15000")])],
    )
    assert code == ErrorCode.none, text
    broker_settings = await incremental(
        broker, [(GROUP, "", [("consumer.session.timeout.ms", SET, "50000")])]
    )
    assert broker_settings == [(ErrorCode.invalid_request, "Group name must not be empty")]
    assert broker.context.image.group_overrides("g3") == {"consumer.heartbeat.interval.ms": "15000"}
    # the legacy AlterConfigs has no group resources, as in Kafka
    [(code, _)] = await legacy(broker, [(GROUP, "g3", {"consumer.session.timeout.ms": "50000"})])
    assert code == ErrorCode.invalid_request


async def test_validate_only_stores_nothing(broker: broker_module.Broker) -> None:
    answer = await incremental(
        broker,
        [(GROUP, "g4", [("consumer.session.timeout.ms", SET, "50000")])],
        validate_only=True,
    )
    assert answer == [OK]
    assert broker.context.image.group_overrides("g4") == {}


async def test_group_configs_survive_a_restart(tmp_path: Path) -> None:
    first = new_broker(tmp_path)
    await first.load()
    await incremental(first, [(GROUP, "kept", [("consumer.session.timeout.ms", SET, "55000")])])
    first.close()
    second = new_broker(tmp_path)
    try:
        await second.load()
        assert second.configs.group("kept").consumer_session_timeout_ms == 55000
    finally:
        second.close()


def test_a_snapshot_carries_group_configs() -> None:
    image = images.MetadataImage("c", group_configs={"g": {"consumer.session.timeout.ms": "5"}})
    written = snapshots.image_records(image)
    assert records.ConfigRecord(
        resource_type=GROUP, resource_name="g", name="consumer.session.timeout.ms", value="5"
    ) in [r for r in written if isinstance(r, records.ConfigRecord)]
    data = snapshots.write_image(image, epoch=1, last_contained_timestamp_ms=0)
    restored = snapshots.read_image("c", data, 0)
    assert restored.group_overrides("g") == {"consumer.session.timeout.ms": "5"}
    # a snapshot replacing an image: the groups' configs that changed, and those now gone
    replacing = deltas.replacement(
        images.MetadataImage("c", group_configs={"old": {"share.delivery.count.limit": "3"}}),
        restored,
    )
    assert replacing.changed_group_configs == {"g", "old"}
    assert replacing.apply().group_configs == {"g": {"consumer.session.timeout.ms": "5"}}


async def test_describe_of_a_nameless_group_is_an_invalid_request(
    broker: broker_module.Broker,
) -> None:
    body = {
        "resources": [{"resource_type": GROUP, "resource_name": "", "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    (result,) = (await call(broker, DESCRIBE_CONFIGS, 4, body)).results
    assert (result.error_code, result.error_message) == (
        ErrorCode.invalid_request,
        "Group name must not be empty",
    )


async def test_list_config_resources_lists_topics_brokers_and_configured_groups(
    broker: broker_module.Broker,
) -> None:
    await incremental(broker, [(GROUP, "tuned", [("consumer.session.timeout.ms", SET, "50000")])])

    async def listed(version: int, types: list[int]) -> tuple[ErrorCode, list[tuple[int, str]]]:
        body = {"resource_types": types} if version else {}
        response = await call(broker, LIST_CONFIG_RESOURCES, version, body)
        found = [(int(r.resource_type), r.resource_name) for r in response.config_resources]
        return response.error_code, found

    assert await listed(0, []) == (ErrorCode.none, [])  # client metrics only: none
    assert await listed(1, [GROUP]) == (ErrorCode.none, [(GROUP, "tuned")])
    code, everything = await listed(1, [])
    assert code == ErrorCode.none
    assert (TOPIC, "orders") in everything and (GROUP, "tuned") in everything
    assert await listed(1, [TOPIC]) == (ErrorCode.none, [(TOPIC, "orders")])
    assert await listed(1, [99]) == (ErrorCode.unsupported_version, [])
