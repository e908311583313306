"""DescribeLogDirs: the log directories of this broker and the partition logs in each
(replication/log_dirs.py), a null topic list meaning every log; a directory that cannot
be read answers KAFKA_STORAGE_ERROR alone, as Kafka's offline log dirs do.

AlterReplicaLogDirs (moving a replica to another of the broker's log dirs) is not
advertised: Strom has no future logs to copy a live replica into.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.protocol import apis, shaping
from strom.replication import log_dirs

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
