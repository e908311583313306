"""InitProducerId: idempotent producers here; a transactional id goes to the transaction
coordinator (`transactions`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.cluster import topics
from strom.protocol import apis, shaping
from strom.server.handlers import transactions

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

log = logging.getLogger(__name__)


async def handle_init_producer_id(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    body = request.body
    response_type = apis.response_class(request.header.api_key, request.header.api_version)

    def answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Any:
        return shaping.build(
            response_type,
            {
                "throttle_time": 0,
                "error_code": error,
                "producer_id": producer_id,
                "producer_epoch": epoch,
            },
        )

    if body.transactional_id is not None:
        reply = await transactions.init_producer_id(broker, body)
        return answer(reply.error, reply.producer_id, reply.producer_epoch)
    # An idempotent producer that asks again (KIP-360, after UNKNOWN_PRODUCER_ID or a
    # fatal sequence error) gets a fresh id: epoch 0 of a new id is always valid.
    try:
        producer_id = await broker.producer_ids.next_id()
    except topics.MetadataError as error:
        # No block of ids could be recorded (a disk error): retriable, as Kafka answers
        # when its controller cannot allocate.
        log.warning("cannot allocate producer ids: %s", error)
        return answer(ErrorCode.coordinator_load_in_progress)
    return answer(ErrorCode.none, producer_id, 0)
