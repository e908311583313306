"""The leader's replication quota in Fetch: over `leader.replication.throttled.rate`, a
follower that is not in sync gets no records for the partitions named in the topic's
`leader.replication.throttled.replicas`, and the others' records as usual; the bytes sent
for throttled partitions count against the quota."""

from __future__ import annotations

from typing import Any

from broker_calls import call
from kio.schema.errors import ErrorCode
from strom.protocol import apis, outbound
from strom.records import batches
from strom.server import broker as broker_module
from strom.server import dispatch
from strom.storage import validator

FETCH = 1
FETCH_VERSION = 15  # the follower names itself in replica_state
INCREMENTAL_ALTER_CONFIGS = 44
TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
NOW = 1_700_000_000_000
RULES = validator.Rules(max_message_bytes=1_000_000, compacted=False, compression_type="producer")
FOLLOWER = 2  # not a replica of the single-node broker's topic, so never in its ISR


async def alter(broker: broker_module.Broker, kind: int, name: str, key: str, value: str) -> None:
    body = {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [{"name": key, "config_operation": SET, "value": value}],
            }
        ],
        "validate_only": False,
    }
    response = await call(broker, INCREMENTAL_ALTER_CONFIGS, 1, body)
    assert [r.error_code for r in response.responses] == [ErrorCode.none]


async def follower_fetch(broker: broker_module.Broker) -> dict[int, int]:
    """Record bytes answered per partition of "orders" to a follower fetching both."""
    topic_id = broker.metadata.image.topics["orders"].topic_id
    body: dict[str, Any] = {
        "replica_id": -1,
        "replica_state": {"replica_id": FOLLOWER, "replica_epoch": 1},
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition": index,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                    for index in (0, 1)
                ],
            }
        ],
        "forgotten_topics_data": (),
        "rack_id": "",
    }
    # Dispatched as a client's request would be; the answer is not encoded, as its
    # records are file regions (sent with sendfile).
    frame = outbound.encode_request(outbound.Draft(FETCH, body).at(FETCH_VERSION), 3, "t")
    request = apis.decode_request(memoryview(frame)[4:])
    response = await dispatch.Dispatcher(broker.context).dispatch(request, "PLAINTEXT", "x")
    (topic,) = response.responses
    return {int(p.partition_index): len(p.records or b"") for p in topic.partitions}


def fill(broker: broker_module.Broker) -> None:
    for index in (0, 1):
        partition = broker.replicas.partition("orders", index)
        assert partition is not None
        data = bytearray(batches.build_batch([(None, b"x" * 1000, [], NOW)] * 10))
        outcome = partition.append_as_leader(
            data, acks=1, rules=RULES, min_insync_replicas=1, transactional=False, now_ms=NOW
        )
        assert outcome.error is None, outcome


async def test_throttled_partitions_get_no_records_while_the_leader_is_over_quota(
    broker: broker_module.Broker,
) -> None:
    fill(broker)
    await alter(broker, TOPIC, "orders", "leader.replication.throttled.replicas", "0:1")
    # Under quota (nothing sent yet): both partitions come, partition 0's bytes are counted.
    first = await follower_fetch(broker)
    assert first[0] > 10_000 and first[1] > 10_000
    assert broker.replicas.quotas.leader.bytes_total == first[0]

    # 1 000 B/s: what was just sent is far over it.
    await alter(broker, BROKER, "1", "leader.replication.throttled.rate", "1000")
    held = await follower_fetch(broker)
    assert held == {0: 0, 1: first[1]}
    assert broker.replicas.quotas.leader.bytes_total == first[0]

    # kafka-reassign-partitions --verify removes the rate: records flow again at once.
    await alter(broker, BROKER, "1", "leader.replication.throttled.rate", str(2**63 - 1))
    assert await follower_fetch(broker) == first
