"""Vote, BeginQuorumEpoch, EndQuorumEpoch, the metadata log's Fetch and FetchSnapshot on
the controller listener: handed as they are to the Raft driver (`BrokerContext.quorum_rpc`).

A node without a Raft driver (a quorum of one) answers them with a top-level
UNKNOWN_SERVER_ERROR: no correct peer sends them one, and a peer's Raft client treats a
top-level error as a failed request. A request the driver finds malformed
(`raft_wire.RaftWireError`) gets INVALID_REQUEST, as Kafka answers it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import raft_wire
from strom.protocol import apis

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

log = logging.getLogger(__name__)


async def handle_quorum_rpc(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    if broker.quorum_rpc is None:
        return raft_wire.error_response(request.body, ErrorCode.unknown_server_error)
    try:
        return await broker.quorum_rpc.handle(request.body)
    except raft_wire.RaftWireError as error:
        log.warning("invalid quorum request from %s: %s", request_context.client_host, error)
        return raft_wire.error_response(request.body, ErrorCode.invalid_request)
