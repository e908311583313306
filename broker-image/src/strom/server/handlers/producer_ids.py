"""InitProducerId for idempotent producers (transactions come later)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.protocol import apis, shaping

if TYPE_CHECKING:
    from strom.server.broker import Broker
    from strom.server.dispatch import RequestContext


async def handle_init_producer_id(
    broker: Broker, request: apis.Request, context: RequestContext
) -> Any:
    body = request.body
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    if body.transactional_id is not None:
        return shaping.build(
            response_type,
            {
                "throttle_time": 0,
                "error_code": ErrorCode.coordinator_not_available,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
    # An idempotent producer that asks again (KIP-360, after UNKNOWN_PRODUCER_ID or a
    # fatal sequence error) gets a fresh id: epoch 0 of a new id is always valid.
    producer_id = broker.metadata.allocate_producer_id()
    return shaping.build(
        response_type,
        {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "producer_id": producer_id,
            "producer_epoch": 0,
        },
    )
