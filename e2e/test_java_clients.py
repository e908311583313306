"""The Java kafka-clients (Maven Central, e2e/peers) against a real Strom broker.

PeerProducer creates the topic with the Java Admin client, then sends with KafkaProducer's
default config (acks=all, idempotence on); PeerConsumer reads it back with assign() +
seekToBeginning, no group. Both are in e2e/peers/src.
"""

from __future__ import annotations

import e2e_records
import pytest
from e2e_records import CODECS, Consumed, Record
from java_peers import JavaPeers
from strom_process import StromProcess


@pytest.mark.timeout(240)
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(strom: StromProcess, java_peers: JavaPeers, topic: str, codec: str) -> None:
    records = e2e_records.make_records("java")
    common = ["--bootstrap-server", strom.bootstrap, "--topic", topic]
    acks = java_peers.run_json_lines(
        "PeerProducer",
        *common,
        "--create",
        str(e2e_records.PARTITIONS),
        "--partitions",
        str(e2e_records.PARTITIONS),
        "--count",
        str(len(records)),
        "--compression",
        codec,
        timeout=120,
    )
    acked = {a["index"]: (a["partition"], a["offset"]) for a in acks}
    for a in acks:
        # The broker's ack carries the CreateTime we set (LogAppendTime would differ).
        assert a["timestamp"] == records[a["index"]].timestamp, a

    lines = java_peers.run_json_lines(
        "PeerConsumer", *common, "--count", str(len(records)), "--timeout-ms", "60000", timeout=120
    )
    consumed = []
    for line in lines:
        assert line["timestampType"] == "CreateTime", line
        record = Record(
            partition=line["partition"],
            key=None if line["key"] is None else line["key"].encode(),
            value=None if line["value"] is None else line["value"].encode(),
            headers=e2e_records.headers_of(line["headers"]),
            timestamp=line["timestamp"],
        )
        consumed.append(Consumed(line["partition"], line["offset"], record))
    e2e_records.verify_round_trip(records, acked, consumed)
