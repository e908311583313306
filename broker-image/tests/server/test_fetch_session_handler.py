"""Fetch sessions through the real dispatcher: a full fetch opens a
session, an incremental one answers only the partitions with something new, forgets what
it is told to forget, and a stale epoch or an unknown session is a top-level error."""

from __future__ import annotations

from typing import Any

import pytest
from broker_calls import consumer_fetch
from kio.schema.errors import ErrorCode
from strom.protocol import apis, outbound
from strom.records import batches
from strom.server import broker as broker_module
from strom.server import dispatch
from strom.storage import validator

FETCH = 1
NOW = 1_700_000_000_000
RULES = validator.Rules(max_message_bytes=1_000_000, compacted=False, compression_type="producer")


def append(broker: broker_module.Broker, index: int, count: int = 3) -> None:
    partition = broker.replicas.partition("orders", index)
    assert partition is not None
    data = bytearray(batches.build_batch([(None, b"v", [], NOW)] * count))
    outcome = partition.append_as_leader(
        data, acks=1, rules=RULES, min_insync_replicas=1, transactional=False, now_ms=NOW
    )
    assert outcome.error is None, outcome


class Consumer:
    """A consumer's fetches of "orders" in one session, named as `version` names topics."""

    def __init__(self, broker: broker_module.Broker, version: int) -> None:
        self.broker = broker
        self.version = version
        self.topic: dict[str, Any] = (
            {"topic_id": broker.metadata.image.topics["orders"].topic_id}
            if version >= 13
            else {"topic": "orders"}
        )

    async def fetch(
        self,
        session_id: int,
        epoch: int,
        offsets: dict[int, int],
        forgotten: tuple[int, ...] = (),
    ) -> Any:
        partitions = [
            {
                "partition": index,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": 1 << 20,
            }
            for index, offset in offsets.items()
        ]
        body = consumer_fetch(
            [{**self.topic, "partitions": partitions}] if partitions else [],
            session_id=session_id,
            epoch=epoch,
            forgotten=[{**self.topic, "partitions": list(forgotten)}] if forgotten else [],
        )
        # Encoded as a client would and dispatched; the answer is not encoded, as its
        # records are file regions (sent with sendfile).
        frame = outbound.encode_request(outbound.Draft(FETCH, body).at(self.version), 3, "t")
        request = apis.decode_request(memoryview(frame)[4:])
        return await dispatch.Dispatcher(self.broker.context).dispatch(request, "PLAINTEXT", "x")


def answered(response: Any) -> dict[int, int]:
    """Record bytes by partition index."""
    return {
        int(p.partition_index): len(p.records or b"")
        for topic in response.responses
        for p in topic.partitions
    }


def metric(broker: broker_module.Broker, name: str, **labels: str) -> float:
    return broker.metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize("version", [12, 17])
async def test_incremental_fetches_answer_only_what_changed(
    broker: broker_module.Broker, version: int
) -> None:
    consumer = Consumer(broker, version)
    append(broker, 0)
    full = await consumer.fetch(0, 0, {0: 0, 1: 0})
    assert full.error_code == ErrorCode.none
    session_id = full.session_id
    assert session_id != 0
    assert answered(full).keys() == {0, 1}

    # partition 0 read up to 3: the client sends only that; nothing is new anywhere
    quiet = await consumer.fetch(session_id, 1, {0: 3})
    assert (quiet.error_code, quiet.session_id, answered(quiet)) == (ErrorCode.none, session_id, {})

    append(broker, 1)  # partition 1 (still asked from 0 by the session) gets records
    news = await consumer.fetch(session_id, 2, {})
    assert list(answered(news)) == [1] and answered(news)[1] > 0

    # forgetting partition 1: appends there are no longer answered
    await consumer.fetch(session_id, 3, {1: 3}, forgotten=(1,))
    append(broker, 1)
    append(broker, 0)
    after = await consumer.fetch(session_id, 4, {})
    assert list(answered(after)) == [0]

    assert metric(broker, "strom_fetch_sessions") == 1
    assert metric(broker, "strom_fetch_session_partitions_cached") == 1
    assert (
        metric(
            broker,
            "strom_fetch_requests_by_session_total",
            context="incremental",
            fetcher="consumer",
        )
        == 4
    )


async def test_session_errors_on_the_wire(broker: broker_module.Broker) -> None:
    consumer = Consumer(broker, 17)
    session_id = (await consumer.fetch(0, 0, {0: 0, 1: 0})).session_id
    stale = await consumer.fetch(session_id, 7, {})
    assert (stale.error_code, stale.session_id, stale.responses) == (
        ErrorCode.invalid_fetch_session_epoch,
        0,
        (),
    )
    unknown = await consumer.fetch(session_id + 1, 1, {})
    assert unknown.error_code == ErrorCode.fetch_session_id_not_found
    by_names = await Consumer(broker, 12).fetch(session_id, 1, {})
    assert by_names.error_code == ErrorCode.fetch_session_topic_id_error
    # the session survives its errors; closing it (epoch -1) fetches without one
    closing = await consumer.fetch(session_id, -1, {0: 0})
    assert (closing.error_code, closing.session_id) == (ErrorCode.none, 0)
    assert metric(broker, "strom_fetch_sessions") == 0
