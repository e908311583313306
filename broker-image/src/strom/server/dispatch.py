"""Route a decoded request to the handler of its API family."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from strom.protocol import apis
from strom.server.handlers import (
    cluster_info,
    configs,
    fetching,
    offsets,
    producer_ids,
    producing,
    topics,
    versions,
)

if TYPE_CHECKING:
    from strom.server.broker import Broker


@dataclass(frozen=True, slots=True)
class RequestContext:
    listener: str


Handler = Callable[["Broker", apis.Request, RequestContext], Awaitable[Any | None]]

HANDLERS: dict[apis.ApiKey, Handler] = {
    apis.ApiKey.API_VERSIONS: versions.handle_api_versions,
    apis.ApiKey.METADATA: cluster_info.handle_metadata,
    apis.ApiKey.DESCRIBE_CLUSTER: cluster_info.handle_describe_cluster,
    apis.ApiKey.PRODUCE: producing.handle_produce,
    apis.ApiKey.FETCH: fetching.handle_fetch,
    apis.ApiKey.LIST_OFFSETS: offsets.handle_list_offsets,
    apis.ApiKey.DELETE_RECORDS: offsets.handle_delete_records,
    apis.ApiKey.CREATE_TOPICS: topics.handle_create_topics,
    apis.ApiKey.DELETE_TOPICS: topics.handle_delete_topics,
    apis.ApiKey.CREATE_PARTITIONS: topics.handle_create_partitions,
    apis.ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs,
    apis.ApiKey.INIT_PRODUCER_ID: producer_ids.handle_init_producer_id,
}

assert set(HANDLERS) == set(apis.SUPPORTED_VERSIONS), "advertise exactly what is handled"


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def dispatch(self, request: apis.Request, listener: str) -> Any | None:
        handler = HANDLERS[apis.ApiKey(request.header.api_key)]
        return await handler(self._broker, request, RequestContext(listener))
