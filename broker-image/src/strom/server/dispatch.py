"""Route a decoded request to the handler of its API family.

Two tables, one per kind of listener, each asserted to handle exactly what its listener
advertises: HANDLERS for the client listeners (SUPPORTED_VERSIONS), CONTROLLER_HANDLERS
for the controller listener (CONTROLLER_VERSIONS). The admin APIs a broker forwards to
the active controller are wrapped by `forwarding.forwarded` in the client table only: on
the controller listener they are always handled here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from strom.protocol import apis
from strom.server.context import BrokerContext, RequestContext
from strom.server.handlers import (
    acls,
    broker_lifecycle,
    cluster_info,
    config_resources,
    configs,
    consumer_groups,
    elections,
    fetching,
    forwarding,
    groups,
    leader_epochs,
    log_dirs,
    offsets,
    producer_ids,
    producing,
    quorum,
    quorum_rpcs,
    reassignments,
    topic_partitions,
    topics,
    transactions,
    versions,
)

Handler = Callable[[BrokerContext, apis.Request, RequestContext], Awaitable[Any | None]]

HANDLERS: dict[apis.ApiKey, Handler] = {
    apis.ApiKey.API_VERSIONS: versions.handle_api_versions,
    apis.ApiKey.METADATA: cluster_info.handle_metadata,
    apis.ApiKey.DESCRIBE_CLUSTER: cluster_info.handle_describe_cluster,
    apis.ApiKey.DESCRIBE_TOPIC_PARTITIONS: topic_partitions.handle_describe_topic_partitions,
    apis.ApiKey.DESCRIBE_QUORUM: forwarding.forwarded(quorum.handle_describe_quorum),
    apis.ApiKey.PRODUCE: producing.handle_produce,
    apis.ApiKey.FETCH: fetching.handle_fetch,
    apis.ApiKey.LIST_OFFSETS: offsets.handle_list_offsets,
    apis.ApiKey.DELETE_RECORDS: offsets.handle_delete_records,
    apis.ApiKey.OFFSET_FOR_LEADER_EPOCH: leader_epochs.handle_offset_for_leader_epoch,
    apis.ApiKey.DESCRIBE_LOG_DIRS: log_dirs.handle_describe_log_dirs,
    apis.ApiKey.ALTER_REPLICA_LOG_DIRS: log_dirs.handle_alter_replica_log_dirs,
    apis.ApiKey.CREATE_TOPICS: forwarding.forwarded(topics.handle_create_topics),
    apis.ApiKey.DELETE_TOPICS: forwarding.forwarded(topics.handle_delete_topics),
    apis.ApiKey.CREATE_PARTITIONS: forwarding.forwarded(topics.handle_create_partitions),
    apis.ApiKey.ELECT_LEADERS: forwarding.forwarded(elections.handle_elect_leaders),
    apis.ApiKey.ALTER_PARTITION_REASSIGNMENTS: forwarding.forwarded(
        reassignments.handle_alter_partition_reassignments
    ),
    apis.ApiKey.LIST_PARTITION_REASSIGNMENTS: forwarding.forwarded(
        reassignments.handle_list_partition_reassignments
    ),
    apis.ApiKey.DESCRIBE_ACLS: acls.handle_describe_acls,
    apis.ApiKey.CREATE_ACLS: acls.handle_create_acls,
    apis.ApiKey.DELETE_ACLS: acls.handle_delete_acls,
    apis.ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs,
    apis.ApiKey.LIST_CONFIG_RESOURCES: config_resources.handle_list_config_resources,
    apis.ApiKey.ALTER_CONFIGS: forwarding.forwarded(configs.handle_alter_configs),
    apis.ApiKey.INCREMENTAL_ALTER_CONFIGS: forwarding.forwarded(
        configs.handle_incremental_alter_configs
    ),
    apis.ApiKey.INIT_PRODUCER_ID: producer_ids.handle_init_producer_id,
    apis.ApiKey.ADD_PARTITIONS_TO_TXN: transactions.handle_add_partitions_to_txn,
    apis.ApiKey.ADD_OFFSETS_TO_TXN: transactions.handle_add_offsets_to_txn,
    apis.ApiKey.END_TXN: transactions.handle_end_txn,
    apis.ApiKey.WRITE_TXN_MARKERS: transactions.handle_write_txn_markers,
    apis.ApiKey.TXN_OFFSET_COMMIT: transactions.handle_txn_offset_commit,
    apis.ApiKey.DESCRIBE_PRODUCERS: transactions.handle_describe_producers,
    apis.ApiKey.DESCRIBE_TRANSACTIONS: transactions.handle_describe_transactions,
    apis.ApiKey.LIST_TRANSACTIONS: transactions.handle_list_transactions,
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
    apis.ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_groups.handle_consumer_group_heartbeat,
    apis.ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_groups.handle_consumer_group_describe,
}

assert set(HANDLERS) == set(apis.SUPPORTED_VERSIONS), "advertise exactly what is handled"

CONTROLLER_HANDLERS: dict[apis.ApiKey, Handler] = {
    apis.ApiKey.API_VERSIONS: versions.api_versions_handler(apis.CONTROLLER_VERSIONS),
    apis.ApiKey.VOTE: quorum_rpcs.handle_quorum_rpc,
    apis.ApiKey.BEGIN_QUORUM_EPOCH: quorum_rpcs.handle_quorum_rpc,
    apis.ApiKey.END_QUORUM_EPOCH: quorum_rpcs.handle_quorum_rpc,
    apis.ApiKey.FETCH: quorum_rpcs.handle_quorum_rpc,  # the Raft Fetch of the metadata log
    apis.ApiKey.FETCH_SNAPSHOT: quorum_rpcs.handle_quorum_rpc,
    apis.ApiKey.DESCRIBE_QUORUM: quorum.handle_describe_quorum,
    apis.ApiKey.DESCRIBE_CLUSTER: cluster_info.handle_describe_controllers,
    apis.ApiKey.BROKER_REGISTRATION: broker_lifecycle.handle_broker_registration,
    apis.ApiKey.BROKER_HEARTBEAT: broker_lifecycle.handle_broker_heartbeat,
    apis.ApiKey.ALLOCATE_PRODUCER_IDS: broker_lifecycle.handle_allocate_producer_ids,
    apis.ApiKey.ALTER_PARTITION: broker_lifecycle.handle_alter_partition,
    apis.ApiKey.ELECT_LEADERS: elections.handle_elect_leaders,
    apis.ApiKey.ALTER_PARTITION_REASSIGNMENTS: reassignments.handle_alter_partition_reassignments,
    apis.ApiKey.LIST_PARTITION_REASSIGNMENTS: reassignments.handle_list_partition_reassignments,
    apis.ApiKey.CREATE_TOPICS: topics.handle_create_topics,
    apis.ApiKey.DELETE_TOPICS: topics.handle_delete_topics,
    apis.ApiKey.CREATE_PARTITIONS: topics.handle_create_partitions,
    apis.ApiKey.ALTER_CONFIGS: configs.handle_alter_configs,
    apis.ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
    apis.ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs,
}

assert set(CONTROLLER_HANDLERS) == set(apis.CONTROLLER_VERSIONS), (
    "advertise exactly what is handled"
)


class Dispatcher:
    """Calls the handler of a request's API from `handlers` (HANDLERS: a client listener;
    CONTROLLER_HANDLERS: the controller listener)."""

    def __init__(
        self, broker: BrokerContext, *, handlers: dict[apis.ApiKey, Handler] = HANDLERS
    ) -> None:
        self._broker = broker
        self._handlers = handlers

    async def dispatch(self, request: apis.Request, listener: str, client_host: str) -> Any | None:
        handler = self._handlers[apis.ApiKey(request.header.api_key)]
        return await handler(self._broker, request, RequestContext(listener, client_host))
