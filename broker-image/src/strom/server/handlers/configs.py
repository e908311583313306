"""DescribeConfigs: every config of a topic or broker with its value, source and default."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.protocol import apis, shaping

if TYPE_CHECKING:
    from strom.server.broker import Broker
    from strom.server.dispatch import RequestContext

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


async def handle_describe_configs(
    broker: Broker, request: apis.Request, context: RequestContext
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
        if resource_type == TOPIC:
            if name not in broker.metadata.image.topics:
                result["error_code"] = ErrorCode.unknown_topic_or_partition
                result["error_message"] = f"Topic {name} does not exist"
                results.append(result)
                continue
            entries = broker.topic_config(name).entries()
        elif resource_type == BROKER:
            if name not in ("", str(broker.node_id)):
                result["error_code"] = ErrorCode.invalid_request
                result["error_message"] = f"Unexpected broker id, expected {broker.node_id}"
                results.append(result)
                continue
            entries = broker.config.entries()
        else:
            result["error_code"] = ErrorCode.invalid_request
            result["error_message"] = f"Unsupported resource type {resource_type}"
            results.append(result)
            continue
        keys = resource.configuration_keys
        if keys:
            wanted = {str(k) for k in keys}
            entries = [e for e in entries if e.name in wanted]
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
