"""ApiVersions: what we serve on the listener asked, exactly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from strom.protocol import apis, shaping

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from strom.server.context import BrokerContext, RequestContext


def api_versions_handler(
    versions: apis.VersionTable,
) -> Callable[[BrokerContext, apis.Request, RequestContext], Awaitable[Any]]:
    """The ApiVersions handler of a listener that serves `versions`."""

    async def handle_api_versions(
        broker: BrokerContext, request: apis.Request, request_context: RequestContext
    ) -> Any:
        served = versions
        if not broker.groups.config.consumer_protocol_enabled:
            served = {k: v for k, v in versions.items() if k not in apis.CONSUMER_PROTOCOL_APIS}
        response_type = apis.response_class(request.header.api_key, request.header.api_version)
        return shaping.build(
            response_type,
            {
                "error_code": 0,
                "api_keys": apis.api_versions_entries(served),
                "throttle_time": 0,
            },
        )

    return handle_api_versions


# The client listeners'.
handle_api_versions = api_versions_handler(apis.SUPPORTED_VERSIONS)
