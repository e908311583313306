"""ListConfigResources (KIP-1142; v0 was ListClientMetricsResources): the resources that
have configs, per resource type, as Kafka 4.1+ lists them — every topic, every registered
broker, the groups with configs of their own, the client metrics subscriptions (Strom
has none). An empty type filter means all of them; a type not listed is
UNSUPPORTED_VERSION, as Kafka answers.

One difference: Strom has no broker loggers resource (type 8, DescribeConfigs of log4j
loggers), so it lists none and refuses the type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import image as images
from strom.protocol import apis, shaping

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

TOPIC = 2
BROKER = 4
CLIENT_METRICS = 16
GROUP = 32
LISTED_TYPES = (TOPIC, BROKER, CLIENT_METRICS, GROUP)


def resources_of(image: images.MetadataImage, resource_type: int) -> list[str]:
    if resource_type == TOPIC:
        return sorted(image.topics)
    if resource_type == BROKER:
        return [str(node_id) for node_id in sorted(image.brokers)]
    if resource_type == GROUP:
        return sorted(image.group_configs)
    return []  # CLIENT_METRICS: no subscriptions in Strom


async def handle_list_config_resources(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    if request.header.api_version == 0:
        wanted: tuple[int, ...] = (CLIENT_METRICS,)  # ListClientMetricsResources
    else:
        wanted = tuple(int(t) for t in request.body.resource_types) or LISTED_TYPES
    error = ErrorCode.none
    resources: list[dict[str, Any]] = []
    if any(t not in LISTED_TYPES for t in wanted):
        error = ErrorCode.unsupported_version
    else:
        image = broker.image
        resources = [
            {"resource_name": name, "resource_type": resource_type}
            for resource_type in dict.fromkeys(wanted)
            for name in resources_of(image, resource_type)
        ]
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(
        response_type, {"throttle_time": 0, "error_code": error, "config_resources": resources}
    )
