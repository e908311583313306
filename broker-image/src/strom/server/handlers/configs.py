"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs, for topics, brokers and
groups (IncrementalAlterConfigs only, as Kafka).

A topic's overrides and the dynamic broker layers live in the cluster metadata; a change
is validated in full before anything is stored, `validate_only` stops right there, and
what is stored applies at once (the broker resolves topic configs again and hands the
open logs their new settings). The broker resource "" is the cluster-wide dynamic
default (`kafka-configs --entity-default`), "<node.id>" this broker. A group's configs
(KIP-848's consumer.session.timeout.ms, ...) are stored like a topic's, for any group id.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import topics as cluster_topics
from strom.config import altering, definitions
from strom.config import broker as broker_config
from strom.config import topics as topic_configs
from strom.protocol import apis, shaping
from strom.server.handlers import topics as topic_handlers

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP = 32

# New topic overrides from the stored ones and the topic's effective config now.
TopicChange = Callable[[dict[str, str], topic_configs.TopicConfig], dict[str, str]]
# A new dynamic broker layer from the stored one and the broker config now.
BrokerChange = Callable[[dict[str, str], broker_config.BrokerConfig], dict[str, str]]
# A group's new configs from the stored ones and the broker config now (None: unsupported).
GroupChange = Callable[[dict[str, str], broker_config.BrokerConfig], dict[str, str]] | None


async def handle_describe_configs(
    broker: BrokerContext, request: apis.Request, context: RequestContext
) -> Any:
    body = request.body
    include_synonyms = bool(getattr(body, "include_synonyms", False))
    include_documentation = bool(getattr(body, "include_documentation", False))
    results = []
    for resource in body.resources:
        resource_type = int(resource.resource_type)
        name = str(resource.resource_name)
        result: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "resource_type": resource_type,
            "resource_name": name,
            "configs": (),
        }
        keys = _names(resource.configuration_keys)
        if resource_type == TOPIC:
            if name not in broker.image.topics:
                result["error_code"] = ErrorCode.unknown_topic_or_partition
                result["error_message"] = f"Topic {name} does not exist"
                results.append(result)
                continue
            entries = broker.configs.topic(name).entries(keys)
        elif resource_type == GROUP:
            if not name:
                result["error_code"] = ErrorCode.invalid_request
                result["error_message"] = "Group name must not be empty"
                results.append(result)
                continue
            entries = broker.configs.group(name).entries(keys)
        elif resource_type == BROKER:
            if name == "":
                entries = broker.config.cluster_default_entries(keys)
            elif name == str(broker.node_id):
                entries = broker.config.entries(keys)
            else:
                result["error_code"] = ErrorCode.invalid_request
                result["error_message"] = (
                    f"Unexpected broker id, expected {broker.node_id} or empty string,"
                    f" but received {name}"
                )
                results.append(result)
                continue
        else:
            result["error_code"] = ErrorCode.invalid_request
            result["error_message"] = f"Unsupported resource type {resource_type}"
            results.append(result)
            continue
        result["configs"] = [
            {
                "name": entry.name,
                "value": entry.value,
                "read_only": entry.read_only,
                "config_source": entry.source,
                "is_sensitive": entry.is_sensitive,
                "synonyms": [
                    {"name": s.name, "value": s.value, "source": s.source} for s in entry.synonyms
                ]
                if include_synonyms
                else (),
                "config_type": entry.type,
                "documentation": entry.documentation if include_documentation else None,
            }
            for entry in entries
        ]
        results.append(result)
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "results": results})


async def handle_incremental_alter_configs(
    broker: BrokerContext, request: apis.Request, context: RequestContext
) -> Any:
    """SET, DELETE, APPEND and SUBTRACT on single configs; the rest stays as it is."""

    async def alter(resource: Any) -> None:
        changes = altering.parse_changes(
            (str(c.name), int(c.config_operation), c.value) for c in resource.configs
        )
        await _alter_resource(
            broker,
            int(resource.resource_type),
            str(resource.resource_name),
            lambda stored, effective: altering.altered_topic_configs(stored, changes, effective),
            lambda stored, config: altering.altered_broker_layer(stored, changes, config),
            lambda stored, config: altering.altered_group_configs(stored, changes, config),
            validate_only=bool(request.body.validate_only),
            forwarded=_forwarded(broker, context),
        )

    return await _respond(broker, request, context, alter)


async def handle_alter_configs(
    broker: BrokerContext, request: apis.Request, context: RequestContext
) -> Any:
    """The legacy AlterConfigs: the given configs replace all of the resource's."""

    async def alter(resource: Any) -> None:
        configs = [(str(c.name), c.value) for c in resource.configs]
        await _alter_resource(
            broker,
            int(resource.resource_type),
            str(resource.resource_name),
            lambda stored, effective: altering.replaced_topic_configs(configs),
            lambda stored, config: altering.replaced_broker_layer(configs),
            None,  # the legacy AlterConfigs has no group resources, as in Kafka
            validate_only=bool(request.body.validate_only),
            forwarded=_forwarded(broker, context),
        )

    return await _respond(broker, request, context, alter)


async def _respond(
    broker: BrokerContext,
    request: apis.Request,
    context: RequestContext,
    alter: Callable[[Any], Awaitable[None]],
) -> Any:
    """Run `alter` on each resource and answer with one error (or none) per resource."""
    resources = list(request.body.resources)
    seen = collections.Counter(_resource_key(resource) for resource in resources)
    responses = []
    for resource in resources:
        response: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "resource_type": int(resource.resource_type),
            "resource_name": str(resource.resource_name),
        }
        try:
            if seen[_resource_key(resource)] > 1:
                raise altering.InvalidConfigRequest("Each resource must appear at most once.")
            await alter(resource)
        except (
            altering.InvalidConfigRequest,
            definitions.ConfigError,
            cluster_topics.MetadataError,
        ) as error:
            response["error_code"] = _error_code_of(error)
            response["error_message"] = str(error)
            api = apis.ApiKey(request.header.api_key).name
            broker.metrics.request_errors.labels(
                api, response["error_code"].name, context.listener
            ).inc()
        responses.append(response)
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "responses": responses})


def _forwarded(broker: BrokerContext, context: RequestContext) -> bool:
    """Whether the request came through the controller listener: forwarded by the broker
    a client sent it to."""
    return context.listener in {listener.name for listener in broker.config.controller_listeners}


def _resource_key(resource: Any) -> tuple[int, str]:
    return int(resource.resource_type), str(resource.resource_name)


def _error_code_of(error: Exception) -> ErrorCode:
    if isinstance(error, altering.InvalidConfigRequest):
        return ErrorCode.invalid_request
    return topic_handlers.error_code_of(error)


async def _alter_resource(
    broker: BrokerContext,
    resource_type: int,
    name: str,
    topic_change: TopicChange,
    broker_change: BrokerChange,
    group_change: GroupChange,
    *,
    validate_only: bool,
    forwarded: bool,
) -> None:
    if resource_type == TOPIC:
        await _alter_topic(broker, name, topic_change, validate_only)
    elif resource_type == BROKER:
        await _alter_broker(broker, name, broker_change, validate_only, forwarded=forwarded)
    elif resource_type == GROUP and group_change is not None:
        if not name:
            raise altering.InvalidConfigRequest("Group name must not be empty")
        configs = group_change(broker.image.group_overrides(name), broker.config)
        if not validate_only:
            await broker.controller.set_group_configs(name, configs)
    else:
        raise altering.InvalidConfigRequest(f"Unsupported resource type {resource_type}")


async def _alter_topic(
    broker: BrokerContext, name: str, change: TopicChange, validate_only: bool
) -> None:
    if not name:
        raise altering.InvalidConfigRequest("Default topic resources are not allowed.")
    stored = broker.image.topics.get(name)
    # Validated before the existence check, as Kafka's controller does: a bad value is
    # INVALID_CONFIG even for a topic that does not exist.
    overrides = change(dict(stored.configs) if stored else {}, broker.configs.topic(name))
    if stored is None:
        raise cluster_topics.UnknownTopicError(f"The topic '{name}' does not exist.")
    if not validate_only:
        await broker.controller.set_topic_configs(name, overrides)


async def _alter_broker(
    broker: BrokerContext,
    name: str,
    change: BrokerChange,
    validate_only: bool,
    *,
    forwarded: bool,
) -> None:
    cluster_defaults = name == ""
    if not cluster_defaults:
        _check_node_id(broker, name, forwarded=forwarded)
    # The stored layer of the broker named (the Admin client sends a broker's change to
    # that broker, which forwards it here when it is not the active controller).
    stored = broker.image.dynamic_broker_configs(name)
    layer = change(stored, broker.config)
    # Checked as a whole (rules that tie keys together) before anything is stored.
    altering.broker_layers_with(broker.config, cluster_defaults=cluster_defaults, layer=layer)
    if not validate_only:
        await broker.controller.set_broker_configs(name, layer)


def _check_node_id(broker: BrokerContext, name: str, *, forwarded: bool) -> None:
    """Kafka's rule: a broker's configs are changed through that broker (its receiving
    broker checked it before forwarding the request to the controller)."""
    try:
        node_id = int(name)
    except ValueError:
        raise altering.InvalidConfigRequest(
            f"Node id must be an integer, but it is: {name}"
        ) from None
    if not forwarded and node_id != broker.node_id:
        raise altering.InvalidConfigRequest(
            f"Unexpected broker id, expected {broker.node_id}, but received {name}"
        )


def _names(keys: Iterable[Any] | None) -> list[str] | None:
    return None if not keys else [str(key) for key in keys]
