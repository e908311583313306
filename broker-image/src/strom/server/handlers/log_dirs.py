"""DescribeLogDirs: the log directories of this broker and the partition logs in each
(replication/log_dirs.py), a null topic list meaning every log; a directory that cannot
be read answers KAFKA_STORAGE_ERROR alone, as Kafka's offline log dirs do.

AlterReplicaLogDirs: move replicas between this broker's log dirs (`kafka-reassign-partitions
--reassignment-json-file` with "log_dirs"), with Kafka's errors: LOG_DIR_NOT_FOUND for a path
that is not one of log.dirs, KAFKA_STORAGE_ERROR for one that cannot be used,
REPLICA_NOT_AVAILABLE for a replica this broker does not serve. The move runs after the
answer, as Kafka's; unlike Kafka's, which copies into a "future" log while serving, the
replica is not served while its log is closed, moved and opened again.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.protocol import apis, shaping
from strom.replication import log_dirs
from strom.replication import replica_manager as replica_manager_module

if TYPE_CHECKING:
    from strom.server.context import BrokerContext, RequestContext

log = logging.getLogger(__name__)


def _result(described: log_dirs.LogDirDescription) -> dict[str, Any]:
    if described.error is not None:
        log.warning("unable to describe log dir %s: %s", described.path, described.error)
        return {
            "log_dir": described.path,
            "error_code": ErrorCode.kafka_storage_error,
            "topics": [],
        }
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for replica in described.replicas:
        by_topic[replica.topic].append(
            {
                "partition_index": replica.partition,
                "partition_size": replica.size,
                "offset_lag": replica.offset_lag,
                "is_future_key": False,
            }
        )
    return {
        "log_dir": described.path,
        "error_code": ErrorCode.none,
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        "total_bytes": described.total_bytes,
        "usable_bytes": described.usable_bytes,
        "is_cordoned": False,
    }


async def handle_describe_log_dirs(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    topics = request.body.topics
    wanted = (
        None
        if topics is None
        else {(str(t.topic), int(index)) for t in topics for index in t.partitions}
    )
    results = [_result(d) for d in log_dirs.describe_log_dirs(broker.replicas, wanted)]
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(
        response_type, {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}
    )


def _target_dir(broker: BrokerContext, path: str) -> tuple[Path | None, ErrorCode]:
    """The configured log dir named by `path` (absolute, as DescribeLogDirs names it)."""
    for log_dir in broker.replicas.logs.log_dirs:
        if os.path.abspath(log_dir) == os.path.abspath(path):
            usable = os.path.isdir(log_dir) and os.access(log_dir, os.W_OK | os.X_OK)
            return log_dir, ErrorCode.none if usable else ErrorCode.kafka_storage_error
    return None, ErrorCode.log_dir_not_found


async def handle_alter_replica_log_dirs(
    broker: BrokerContext, request: apis.Request, request_context: RequestContext
) -> Any:
    outcomes: dict[str, dict[int, ErrorCode]] = defaultdict(dict)
    for wanted in request.body.dirs:
        target, dir_error = _target_dir(broker, str(wanted.path))
        for topic in wanted.topics:
            name = str(topic.name)
            for index in topic.partitions:
                error = dir_error
                if target is not None and error == ErrorCode.none:
                    try:
                        broker.replicas.begin_move(name, int(index), target)
                    except replica_manager_module.ReplicaNotServedError:
                        error = ErrorCode.replica_not_available
                outcomes[name][int(index)] = error
    results = [
        {
            "topic_name": name,
            "partitions": [
                {"partition_index": index, "error_code": code} for index, code in errors.items()
            ],
        }
        for name, errors in outcomes.items()
    ]
    response_type = apis.response_class(request.header.api_key, request.header.api_version)
    return shaping.build(response_type, {"throttle_time": 0, "results": results})
