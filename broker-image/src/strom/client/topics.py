"""Topic and config operations: describing, creating, growing and deleting topics, and
describing and altering the configs of topics and brokers.

Each operation is a generator of `steps` (see there) that `admin.Admin` runs blocking and
`admin.AsyncAdmin` awaits; the topic names come from librdkafka's metadata call, which has
no future and is asked in slices instead (`topic_names`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import confluent_kafka
from confluent_kafka import admin as kafka_admin
from kio.schema.describe_configs.v4 import request as describe_request
from kio.schema.describe_configs.v4 import response as describe_response
from kio.schema.incremental_alter_configs.v1 import request as alter_request
from kio.schema.incremental_alter_configs.v1 import response as alter_response
from kio.static.primitive import i8

from strom.client import cluster, errors, results, steps

_RETRIABLE_METADATA = frozenset(
    {confluent_kafka.KafkaError._TRANSPORT, confluent_kafka.KafkaError._TIMED_OUT}
)


def describe_topics(
    session: steps.Session, names: Sequence[str]
) -> steps.Operation[dict[str, results.TopicInfo]]:
    if not names:
        return {}
    futures = session.client.describe_topics(
        confluent_kafka.TopicCollection(list(names)), request_timeout=session.timeout
    )
    out: dict[str, results.TopicInfo] = {}
    for name in names:
        described = yield steps.Future(futures[name], f"the description of topic '{name}'", name)
        out[name] = results.TopicInfo(
            name=described.name,
            topic_id=kafka_topic_id(str(described.topic_id)),
            internal=bool(described.is_internal),
            partitions=tuple(
                sorted(
                    (
                        results.PartitionInfo(
                            partition=p.id,
                            leader=None if p.leader is None or p.leader.id < 0 else p.leader.id,
                            replicas=tuple(node.id for node in p.replicas),
                            isr=tuple(node.id for node in p.isr),
                        )
                        for p in described.partitions
                    ),
                    key=lambda p: p.partition,
                )
            ),
        )
    return out


def create_topic(
    session: steps.Session,
    name: str,
    partitions: int | None,
    replication_factor: int | None,
    configs: Mapping[str, str] | None,
    replica_assignment: Sequence[Sequence[int]] | None,
    if_not_exists: bool,
) -> steps.Operation[bool]:
    kwargs: dict[str, Any] = {"config": dict(configs or {})}
    if replica_assignment:
        kwargs["replica_assignment"] = [list(r) for r in replica_assignment]
        # confluent-kafka 2.16 refuses the default count (-1) beside an assignment
        kwargs["num_partitions"] = len(replica_assignment)
    else:
        kwargs["num_partitions"] = -1 if partitions is None else partitions
        kwargs["replication_factor"] = -1 if replication_factor is None else replication_factor
    new_topic = kafka_admin.NewTopic(name, **kwargs)
    futures = session.client.create_topics(
        [new_topic], operation_timeout=session.timeout, request_timeout=session.timeout
    )
    try:
        yield steps.Future(futures[name], f"the creation of topic '{name}'", name)
    except errors.AlreadyExistsError:
        if if_not_exists:
            return False
        raise
    return True


def create_partitions(
    session: steps.Session,
    name: str,
    total: int,
    replica_assignment: Sequence[Sequence[int]] | None,
) -> steps.Operation[None]:
    if replica_assignment:
        assignment = [list(r) for r in replica_assignment]
        new = kafka_admin.NewPartitions(name, total, assignment)
    else:
        new = kafka_admin.NewPartitions(name, total)
    futures = session.client.create_partitions(
        [new], operation_timeout=session.timeout, request_timeout=session.timeout
    )
    yield steps.Future(futures[name], f"new partitions of topic '{name}'", name)


def delete_topics(session: steps.Session, names: Sequence[str]) -> steps.Operation[None]:
    if not names:
        return
    futures = session.client.delete_topics(
        list(names), operation_timeout=session.timeout, request_timeout=session.timeout
    )
    for name in names:
        yield steps.Future(futures[name], f"the deletion of topic '{name}'", name)


# --- configs --------------------------------------------------------------------------


def topic_configs(
    session: steps.Session, names: Sequence[str]
) -> steps.Operation[dict[str, list[results.ConfigEntry]]]:
    resources = [kafka_admin.ConfigResource(kafka_admin.ResourceType.TOPIC, name) for name in names]
    described = yield from _describe_configs(session, resources)
    return {resource.name: entries for resource, entries in described}


def broker_configs(
    session: steps.Session, broker: str
) -> steps.Operation[list[results.ConfigEntry]]:
    if broker == "":
        return (yield from _broker_default_configs(session))
    yield from _check_broker(session, broker)
    resource = kafka_admin.ConfigResource(kafka_admin.ResourceType.BROKER, broker)
    [(_, entries)] = yield from _describe_configs(session, [resource])
    return entries


def alter_configs(
    session: steps.Session,
    resource_type: str,
    name: str,
    set_configs: Mapping[str, str],
    delete_configs: Sequence[str],
) -> steps.Operation[None]:
    if resource_type == "broker" and name == "":
        yield from _alter_broker_defaults(session, set_configs, delete_configs)
        return
    if resource_type == "broker":
        yield from _check_broker(session, name)
    op = kafka_admin.AlterConfigOpType
    entries = [
        kafka_admin.ConfigEntry(key, value, incremental_operation=op.SET)
        for key, value in set_configs.items()
    ] + [
        kafka_admin.ConfigEntry(key, None, incremental_operation=op.DELETE)
        for key in delete_configs
    ]
    restype = (
        kafka_admin.ResourceType.TOPIC
        if resource_type == "topic"
        else kafka_admin.ResourceType.BROKER
    )
    resource = kafka_admin.ConfigResource(restype, name, incremental_configs=entries)
    futures = session.client.incremental_alter_configs([resource], request_timeout=session.timeout)
    yield steps.Future(futures[resource], f"the configs of {resource_type} '{name}'", name)


def _check_broker(session: steps.Session, broker: str) -> steps.Operation[None]:
    """An unknown broker id is an error at once: librdkafka would wait for that broker to
    appear until the request times out."""
    described = yield from cluster.describe_cluster(session)
    if broker not in {str(node.id) for node in described.nodes}:
        raise errors.NotFoundError(f"Broker {broker} is not in the cluster")


def _broker_default_configs(session: steps.Session) -> steps.Operation[list[results.ConfigEntry]]:
    """DescribeConfigs of the cluster-wide broker defaults (the broker resource "", sent by
    `wire`: librdkafka refuses an empty resource name): only what is set there."""
    request = describe_request.DescribeConfigsRequest(
        resources=(
            describe_request.DescribeConfigsResource(
                resource_type=i8(int(kafka_admin.ResourceType.BROKER.value)),
                resource_name="",
                configuration_keys=None,
            ),
        ),
        include_synonyms=True,
        include_documentation=False,
    )
    what = "the default configs of brokers"
    response = yield cluster.any_broker(
        session, request, describe_response.DescribeConfigsResponse, what
    )
    (result,) = response.results
    cluster.raise_for(result.error_code, result.error_message, what)
    return [
        results.ConfigEntry(
            name=str(c.name),
            value=c.value,
            source=_source_name(int(c.config_source)),
            sensitive=bool(c.is_sensitive),
            read_only=bool(c.read_only),
            synonyms=tuple(
                results.ConfigSynonym(str(s.name), s.value, _source_name(int(s.source)))
                for s in c.synonyms
            ),
        )
        for c in result.configs
    ]


def _alter_broker_defaults(
    session: steps.Session, set_configs: Mapping[str, str], delete_configs: Sequence[str]
) -> steps.Operation[None]:
    """IncrementalAlterConfigs of the cluster-wide broker defaults (the broker resource
    "", `--entity-default`), sent by `wire`: librdkafka refuses an empty resource name."""
    set_op, delete_op = (
        int(kafka_admin.AlterConfigOpType.SET.value),
        int(kafka_admin.AlterConfigOpType.DELETE.value),
    )
    changes = [(key, set_op, value) for key, value in set_configs.items()] + [
        (key, delete_op, None) for key in delete_configs
    ]
    request = alter_request.IncrementalAlterConfigsRequest(
        resources=(
            alter_request.AlterConfigsResource(
                resource_type=i8(int(kafka_admin.ResourceType.BROKER.value)),
                resource_name="",
                configs=tuple(
                    alter_request.AlterableConfig(name=key, config_operation=i8(op), value=value)
                    for key, op, value in changes
                ),
            ),
        ),
        validate_only=False,
    )
    what = "the default configs of brokers"
    response = yield cluster.any_broker(
        session, request, alter_response.IncrementalAlterConfigsResponse, what
    )
    for result in response.responses:
        cluster.raise_for(result.error_code, result.error_message, what)


def _describe_configs(
    session: steps.Session, resources: list[kafka_admin.ConfigResource]
) -> steps.Operation[list[tuple[kafka_admin.ConfigResource, list[results.ConfigEntry]]]]:
    if not resources:
        return []
    futures = session.client.describe_configs(resources, request_timeout=session.timeout)
    out = []
    for resource in resources:
        entity = f"{resource.restype.name.lower()} '{resource.name}'"
        described = yield steps.Future(futures[resource], f"the configs of {entity}", resource.name)
        out.append((resource, [_config_entry(entry) for entry in described.values()]))
    return out


# --- topic names (metadata) -----------------------------------------------------------


def metadata(session: steps.Session) -> Any:
    """Cluster metadata (topics and brokers), failing fast when nothing answers.

    list_topics blocks, so it is asked in short slices with callbacks served between."""
    deadline = time.monotonic() + session.timeout
    while True:
        slice_s = max(0.05, min(0.5, deadline - time.monotonic()))
        try:
            listed = session.client.list_topics(timeout=slice_s)
        except confluent_kafka.KafkaException as e:
            error = errors.kafka_error(e)
            if error is None or error.code() not in _RETRIABLE_METADATA:
                raise steps.translate(e, None) from None
        else:
            session.watch.connected()
            return listed
        session.client.poll(0)
        session.watch.check()
        if time.monotonic() >= deadline:
            raise errors.ClientError(
                f"timed out after {session.timeout:g}s waiting for the cluster metadata"
            )


def topic_names(session: steps.Session, include_internal: bool) -> list[str]:
    names = sorted(metadata(session).topics)
    if include_internal:
        return names
    return [name for name in names if not _is_internal(name)]


def kafka_topic_id(text: str) -> str:
    """librdkafka prints topic ids in standard base64; Kafka in URL-safe base64."""
    return text.replace("+", "-").replace("/", "_").rstrip("=")


def _is_internal(name: str) -> bool:
    return name in ("__consumer_offsets", "__transaction_state", "__share_group_state")


def _source_name(source: Any) -> str:
    try:
        return kafka_admin.ConfigSource(source).name
    except ValueError:
        return "UNKNOWN_CONFIG"


def _config_entry(entry: Any) -> results.ConfigEntry:
    return results.ConfigEntry(
        name=entry.name,
        value=entry.value,
        source=_source_name(entry.source),
        sensitive=bool(entry.is_sensitive),
        read_only=bool(entry.is_read_only),
        synonyms=tuple(
            results.ConfigSynonym(s.name, s.value, _source_name(s.source))
            for s in (entry.synonyms or {}).values()
        ),
    )
