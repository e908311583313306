"""The Java kafka-clients (Maven Central, e2e/peers) against a real Strom broker.

PeerProducer creates the topic with the Java Admin client, then sends with KafkaProducer's
default config (acks=all, idempotence on); PeerConsumer reads it back with assign() +
seekToBeginning, no group. Both are in e2e/peers/src.
"""

from __future__ import annotations

import time
from pathlib import Path

import e2e_records
import pytest
import strom_process
from e2e_records import CODECS, Consumed, Record
from java_peers import JavaPeers
from strom_process import StromProcess


@pytest.mark.timeout(240)
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(strom: StromProcess, java_peers: JavaPeers, topic: str, codec: str) -> None:
    round_trip(strom, java_peers, topic, codec)


@pytest.mark.timeout(240)
def test_round_trip_across_maintenance_passes(
    tmp_path: Path, java_peers: JavaPeers, topic: str
) -> None:
    """The shared broker's settings keep the workload's records through retention passes.

    The workload's CreateTimes are from November 2023, past the default retention.ms; a pass
    between PeerProducer and PeerConsumer used to delete them all, and the consumer, reset
    to the new log start (the high watermark), read 0 of 300 records. Passes run every
    100 ms here instead of every 30 s, so a JVM start is enough to straddle several.
    """
    overrides = {**strom_process.SHARED_BROKER_OVERRIDES, "log.retention.check.interval.ms": "100"}
    with strom_process.running_broker(tmp_path, overrides=overrides) as broker:
        round_trip(broker, java_peers, topic, "zstd", pause_s=0.5)


def round_trip(
    broker: StromProcess, java_peers: JavaPeers, topic: str, codec: str, pause_s: float = 0.0
) -> None:
    records = e2e_records.make_records("java")
    common = ["--bootstrap-server", broker.bootstrap, "--topic", topic]
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

    time.sleep(pause_s)
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
