"""Route a decoded request to the handler of its API family."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from strom.protocol import apis
from strom.server.context import BrokerContext, RequestContext
from strom.server.handlers import (
    cluster_info,
    configs,
    fetching,
    groups,
    offsets,
    producer_ids,
    producing,
    quorum,
    topics,
    versions,
)

Handler = Callable[[BrokerContext, apis.Request, RequestContext], Awaitable[Any | None]]

HANDLERS: dict[apis.ApiKey, Handler] = {
    apis.ApiKey.API_VERSIONS: versions.handle_api_versions,
    apis.ApiKey.METADATA: cluster_info.handle_metadata,
    apis.ApiKey.DESCRIBE_CLUSTER: cluster_info.handle_describe_cluster,
    apis.ApiKey.DESCRIBE_QUORUM: quorum.handle_describe_quorum,
    apis.ApiKey.PRODUCE: producing.handle_produce,
    apis.ApiKey.FETCH: fetching.handle_fetch,
    apis.ApiKey.LIST_OFFSETS: offsets.handle_list_offsets,
    apis.ApiKey.DELETE_RECORDS: offsets.handle_delete_records,
    apis.ApiKey.CREATE_TOPICS: topics.handle_create_topics,
    apis.ApiKey.DELETE_TOPICS: topics.handle_delete_topics,
    apis.ApiKey.CREATE_PARTITIONS: topics.handle_create_partitions,
    apis.ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs,
    apis.ApiKey.ALTER_CONFIGS: configs.handle_alter_configs,
    apis.ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
    apis.ApiKey.INIT_PRODUCER_ID: producer_ids.handle_init_producer_id,
    apis.ApiKey.FIND_COORDINATOR: groups.handle_find_coordinator,
    apis.ApiKey.JOIN_GROUP: groups.handle_join_group,
    apis.ApiKey.SYNC_GROUP: groups.handle_sync_group,
    apis.ApiKey.HEARTBEAT: groups.handle_heartbeat,
    apis.ApiKey.LEAVE_GROUP: groups.handle_leave_group,
    apis.ApiKey.OFFSET_COMMIT: groups.handle_offset_commit,
    apis.ApiKey.OFFSET_FETCH: groups.handle_offset_fetch,
    apis.ApiKey.OFFSET_DELETE: groups.handle_offset_delete,
    apis.ApiKey.LIST_GROUPS: groups.handle_list_groups,
    apis.ApiKey.DESCRIBE_GROUPS: groups.handle_describe_groups,
    apis.ApiKey.DELETE_GROUPS: groups.handle_delete_groups,
}

assert set(HANDLERS) == set(apis.SUPPORTED_VERSIONS), "advertise exactly what is handled"


class Dispatcher:
    def __init__(self, broker: BrokerContext) -> None:
        self._broker = broker

    async def dispatch(self, request: apis.Request, listener: str, client_host: str) -> Any | None:
        handler = HANDLERS[apis.ApiKey(request.header.api_key)]
        return await handler(self._broker, request, RequestContext(listener, client_host))
