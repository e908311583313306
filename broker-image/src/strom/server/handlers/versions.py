"""ApiVersions: what we serve, exactly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from strom.protocol import apis, shaping

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext


async def handle_api_versions(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(
        response_type,
        {
            "error_code": 0,
            "api_keys": apis.api_versions_entries(),
            "throttle_time": 0,
        },
    )
