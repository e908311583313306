"""DescribeAcls, CreateAcls, DeleteAcls without an authorizer: Strom has none (no
`authorizer.class.name`), so it answers as a Kafka broker with none configured does,
SECURITY_DISABLED for the request or each of its entries. Clients read that as "no ACLs
here": MirrorMaker 2 stops syncing topic ACLs, `kafka-acls.sh` says the authorizer is
missing; an unadvertised API made MM2 log an error on every sync instead.

Kafka forwards CreateAcls and DeleteAcls to the active controller; with no authorizer
anywhere in the cluster, every node gives the same answer, so a broker gives it itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.protocol import apis

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

# Kafka's messages (AclApis): DescribeAcls names the broker, the others do not.
DESCRIBE_MESSAGE = "No Authorizer is configured on the broker"
CHANGE_MESSAGE = "No Authorizer is configured."


async def handle_describe_acls(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    return apis.build_response(
        request,
        {
            "error_code": ErrorCode.security_disabled,
            "error_message": DESCRIBE_MESSAGE,
            "resources": [],
        },
    )


async def handle_create_acls(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    refused = {"error_code": ErrorCode.security_disabled, "error_message": CHANGE_MESSAGE}
    return apis.build_response(request, {"results": [refused for _ in request.body.creations]})


async def handle_delete_acls(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    refused = {
        "error_code": ErrorCode.security_disabled,
        "error_message": CHANGE_MESSAGE,
        "matching_acls": [],
    }
    return apis.build_response(request, {"filter_results": [refused for _ in request.body.filters]})
