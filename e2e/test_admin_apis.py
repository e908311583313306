"""The admin APIs Kafka 4 clients call, differentially: the same requests (on the wire,
through librdkafka, through Kafka's own tools) to Apache Kafka 4.3 and to Strom, the same
answers expected, and the deliberate differences listed.

ApiVersions (every API Strom serves, at Kafka's version range), DescribeTopicPartitions,
ListConfigResources, group configs (`kafka-configs --entity-type groups`), an empty
cleanup.policy, DescribeCluster v2, the cluster-wide default's synonyms, ListGroups with a
states filter, and kafka-get-offsets on a partition emptied by delete-records.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import wire_requests
from apache_kafka import ApacheKafka
from confluent_kafka import Consumer, ConsumerGroupState, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from java_peers import JavaPeers
from strom.protocol import apis, outbound
from strom_process import StromProcess
from waiting import wait_until

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
RETENTION_CHECK_MS = 200
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"

# What Strom serves at another range than Kafka 4.3, and why.
DELIBERATE_DIFFERENCES: dict[apis.ApiKey, str] = {
    apis.ApiKey.PRODUCE: "v0-2: kio has no schemas for them (message format v0/v1)",
    apis.ApiKey.FETCH: "v18 (share groups' fields): the fetch-session work decides it",
    apis.ApiKey.OFFSET_COMMIT: "v10 names topics by id: not handled by the group handlers yet",
    apis.ApiKey.OFFSET_FETCH: "v10 names topics by id: not handled by the group handlers yet",
    # transaction.version 2 (KIP-890 part 2) is not served yet: these versions mean it
    apis.ApiKey.ADD_PARTITIONS_TO_TXN: "v5: a leader adding a TV2 producer's partition",
    apis.ApiKey.END_TXN: "v5: the epoch bump at every end of a TV2 transaction",
    apis.ApiKey.TXN_OFFSET_COMMIT: "v5: a TV2 producer's implicit AddOffsetsToTxn",
    apis.ApiKey.WRITE_TXN_MARKERS: "v2: the markers' transaction version (KIP-1228)",
}


@pytest.fixture(scope="module")
def strom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromProcess]:
    broker = StromProcess(
        tmp_path_factory.mktemp("strom"),
        overrides={
            "group.initial.rebalance.delay.ms": "0",
            "log.retention.check.interval.ms": str(RETENTION_CHECK_MS),
        },
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(params=["kafka", "strom"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    """The same assertions against Apache Kafka and against Strom (both node 1 alone)."""
    node: ApacheKafka | StromProcess = request.getfixturevalue(request.param)
    return node.bootstrap


def send(bootstrap: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
    port = int(bootstrap.rsplit(":", 1)[1])
    return asyncio.run(wire_requests.send(port, outbound.Draft(api_key, body), version))


def new_topic(bootstrap: str, partitions: int) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)
    return name


def api_ranges(bootstrap: str) -> dict[int, tuple[int, int]]:
    response = send(
        bootstrap,
        apis.ApiKey.API_VERSIONS,
        3,
        {"client_software_name": "strom-e2e", "client_software_version": "1"},
    )
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


def test_strom_advertises_kafkas_version_ranges(kafka: ApacheKafka, strom: StromProcess) -> None:
    theirs, ours = api_ranges(kafka.bootstrap), api_ranges(strom.bootstrap)
    assert set(ours) <= set(theirs), "an API Kafka 4.3 does not serve"
    different = {
        apis.ApiKey(key).name: (ours[key], theirs[key])
        for key in ours
        if ours[key] != theirs[key] and apis.ApiKey(key) not in DELIBERATE_DIFFERENCES
    }
    assert different == {}, f"Strom's range vs Kafka 4.3's: {different}"


def test_describe_topic_partitions_answers_as_kafka(bootstrap: str) -> None:
    topic = new_topic(bootstrap, 3)
    body = {
        "topics": [{"name": topic}, {"name": "bad name!"}, {"name": "zz-missing"}],
        "response_partition_limit": 2,
        "cursor": None,
    }
    first = send(bootstrap, apis.ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body)
    # "bad name!" sorts first; the topic's third partition goes past the limit
    assert [(t.name, t.error_code, len(t.partitions)) for t in first.topics] == [
        ("bad name!", 17, 0),
        (topic, 0, 2),
    ]
    assert {t.topic_authorized_operations for t in first.topics} == {3576}
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == (topic, 2)
    body["cursor"] = {"topic_name": topic, "partition_index": 2}
    second = send(bootstrap, apis.ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body)
    assert [
        (t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in second.topics
    ] == [
        (topic, 0, [2]),
        ("zz-missing", 3, []),
    ]
    assert second.next_cursor is None
    (partition,) = second.topics[0].partitions
    assert (partition.eligible_leader_replicas, partition.last_known_elr) == ((), ())
    body["cursor"] = {"topic_name": "not-named", "partition_index": 0}
    refused = send(bootstrap, apis.ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body)
    assert {t.error_code for t in refused.topics} == {42}  # INVALID_REQUEST


def kafka_configs(java_peers: JavaPeers, bootstrap: str, *args: str) -> tuple[int, str]:
    done = java_peers.run(CONFIG_COMMAND, "--bootstrap-server", bootstrap, *args, check=False)
    return done.returncode, done.stdout + done.stderr


def test_group_configs_through_kafka_configs(
    kafka: ApacheKafka, strom: StromProcess, java_peers: JavaPeers
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    described = {}
    for name, node in (("kafka", kafka.bootstrap), ("strom", strom.bootstrap)):
        entity = ("--entity-type", "groups", "--entity-name", group)
        rc, out = kafka_configs(
            java_peers,
            node,
            *entity,
            "--alter",
            "--add-config",
            "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000",
        )
        assert rc == 0 and f"Completed updating config for group {group}." in out, out
        rc, out = kafka_configs(
            java_peers, node, *entity, "--alter", "--add-config", "consumer.session.timeout.ms=1000"
        )
        assert (
            rc != 0
            and (
                "consumer.session.timeout.ms must be greater than or equal to"
                " group.consumer.min.session.timeout.ms"
            )
            in out
        ), out
        rc, out = kafka_configs(java_peers, node, *entity, "--describe", "--all")
        assert rc == 0, out
        described[name] = sorted(line.strip() for line in out.splitlines() if "sensitive=" in line)
        listed = send(node, apis.ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [32]})
        assert (32, group) in {
            (int(r.resource_type), r.resource_name) for r in listed.config_resources
        }
        unknown = send(node, apis.ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [99]})
        assert int(unknown.error_code) == 35  # UNSUPPORTED_VERSION
    assert described["strom"] == described["kafka"]
    assert (
        "consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}"
    ) in described["strom"]


def test_an_empty_cleanup_policy_is_accepted(bootstrap: str) -> None:
    topic = new_topic(bootstrap, 1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    change = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([change])[change].result(timeout=30)
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    (configs,) = [future.result(timeout=30) for future in described.values()]
    assert configs["cleanup.policy"].value == ""


def test_describe_cluster_v2_flags_fenced_brokers(bootstrap: str) -> None:
    body = {
        "include_cluster_authorized_operations": False,
        "endpoint_type": 1,
        "include_fenced_brokers": True,
    }
    answer = send(bootstrap, apis.ApiKey.DESCRIBE_CLUSTER, 2, body)
    assert [(b.broker_id, b.is_fenced) for b in answer.brokers] == [(1, False)]


def backoff_synonyms(bootstrap: str, resource: str) -> tuple[str, int, list[tuple[str, int]]]:
    """log.cleaner.backoff.ms of broker resource `resource` ("": the cluster default):
    value, source and synonyms (value, source) as DescribeConfigs v4 answers."""
    describe = {
        "resources": [
            {
                "resource_type": 4,
                "resource_name": resource,
                "configuration_keys": ["log.cleaner.backoff.ms"],
            }
        ],
        "include_synonyms": True,
        "include_documentation": False,
    }
    (result,) = send(bootstrap, apis.ApiKey.DESCRIBE_CONFIGS, 4, describe).results
    (entry,) = result.configs
    synonyms = [(s.value, int(s.source)) for s in entry.synonyms]
    return entry.value, int(entry.config_source), synonyms


def set_backoff(bootstrap: str, resource: str, value: str) -> None:
    change = {
        "resources": [
            {
                "resource_type": 4,
                "resource_name": resource,
                "configs": [
                    {"name": "log.cleaner.backoff.ms", "config_operation": 0, "value": value}
                ],
            }
        ],
        "validate_only": False,
    }
    (altered,) = send(bootstrap, apis.ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, change).responses
    assert int(altered.error_code) == 0, altered.error_message


def test_broker_config_synonyms_layer_by_layer(bootstrap: str) -> None:
    """A broker lists its own dynamic value (DYNAMIC_BROKER_CONFIG), the cluster default
    and the built-in default; the cluster default ("") lists only itself."""
    set_backoff(bootstrap, "", "16000")
    set_backoff(bootstrap, "1", "17000")
    # the alter returns once the controller committed it; the broker answering the describe
    # applies the change from its metadata a moment later (Kafka's brokers alike)
    expected_default = ("16000", 3, [("16000", 3)])
    expected_broker = ("17000", 2, [("17000", 2), ("16000", 3), ("15000", 5)])
    wait_until(
        lambda: backoff_synonyms(bootstrap, "") == expected_default
        and backoff_synonyms(bootstrap, "1") == expected_broker,
        30,
        lambda: f"synonyms {backoff_synonyms(bootstrap, '')} / {backoff_synonyms(bootstrap, '1')}",
    )


def test_list_groups_by_state_leaves_out_an_emptied_group(bootstrap: str) -> None:
    topic = new_topic(bootstrap, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"x")
    producer.flush(30)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def listed(*states: ConsumerGroupState) -> set[str]:
        result = admin.list_consumer_groups(states=set(states)).result(timeout=30)
        return {g.group_id for g in result.valid}

    try:
        consumer.subscribe([topic])
        message = None
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None:
                break
        assert message is not None and message.error() is None
        consumer.commit(asynchronous=False)
        assert group in listed(ConsumerGroupState.STABLE)
    finally:
        consumer.close()  # LeaveGroup: its last member gone, the group is Empty
    assert group not in listed(ConsumerGroupState.STABLE)
    assert group in listed(ConsumerGroupState.EMPTY)


def test_get_offsets_on_a_partition_emptied_by_delete_records(
    kafka: ApacheKafka, strom: StromProcess, java_peers: JavaPeers, tmp_path: Path
) -> None:
    printed = {}
    for name, node in (("kafka", kafka.bootstrap), ("strom", strom.bootstrap)):
        topic = new_topic(node, 1)
        producer = Producer({"bootstrap.servers": node})
        # now (old records would meet Kafka's first retention check, 30 s after its start)
        now_ms = int(time.time() * 1000)
        for step, value in enumerate((b"a", b"b", b"c")):
            producer.produce(topic, value, timestamp=now_ms + step)
        producer.flush(30)
        offsets = tmp_path / f"{name}.json"
        offsets.write_text(
            json.dumps(
                {"partitions": [{"topic": topic, "partition": 0, "offset": 3}], "version": 1}
            )
        )
        java_peers.run(
            DELETE_RECORDS, "--bootstrap-server", node, "--offset-json-file", str(offsets)
        )
        printed[name] = {
            time: java_peers.run(
                GET_OFFSETS, "--bootstrap-server", node, "--topic", topic, "--time", time
            ).stdout.replace(topic, "T")
            for time in ("-1", "-2", "-3", "-4", "-5")
        }
        missing = java_peers.run(
            GET_OFFSETS,
            "--bootstrap-server",
            node,
            "--topic",
            topic,
            "--partitions",
            "5",
            check=False,
        )
        printed[name]["--partitions 5"] = f"{missing.returncode} {missing.stderr.splitlines()[-1]}"
    assert printed["strom"] == printed["kafka"]
    assert "Could not match any topic-partitions" in printed["strom"]["--partitions 5"]
    assert printed["strom"]["-3"] == "T:0:2\n"  # the record with the largest timestamp


def test_get_offsets_on_a_partition_emptied_by_retention(
    strom: StromProcess, java_peers: JavaPeers
) -> None:
    """Records past retention.ms all deleted: the max timestamp (-3) has no answer, and
    kafka-get-offsets prints nothing for it, as against Kafka (seen when its first retention
    check, 30 s after its start, emptied the partition of the test above that used old
    timestamps); earliest, latest and earliest-local are the log end."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": strom.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "60000"})])[topic].result(
        timeout=30
    )
    producer = Producer({"bootstrap.servers": strom.bootstrap})
    for step in range(3):
        producer.produce(topic, b"old", timestamp=1_700_000_000_000 + step)
    producer.flush(30)

    def offsets(spec: str) -> str:
        return java_peers.run(
            GET_OFFSETS, "--bootstrap-server", strom.bootstrap, "--topic", topic, "--time", spec
        ).stdout

    wait_until(lambda: offsets("-2") == f"{topic}:0:3\n", 60.0, "retention emptied the partition")
    assert [offsets(spec) for spec in ("-1", "-3", "-4")] == [
        f"{topic}:0:3\n",
        "",
        f"{topic}:0:3\n",
    ]
