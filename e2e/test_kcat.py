"""kcat (Debian's, on its own librdkafka) against a real Strom broker: metadata listing and a
keyed -P / -C round trip with headers under every codec."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_records import CODECS
from strom_process import StromProcess


def run_kcat(kcat: str, *args: str, stdin: str = "", timeout: float = 60) -> str:
    argv = [kcat, *args]
    done = subprocess.run(
        argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"kcat exited with {done.returncode}\nargv: {argv}\n"
        f"--- stdout ---\n{done.stdout[-4000:]}\n--- stderr ---\n{done.stderr[-4000:]}"
    )
    assert "ERROR" not in done.stderr, f"argv: {argv}\n--- stderr ---\n{done.stderr[-4000:]}"
    return done.stdout


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic].result(60)


@pytest.mark.timeout(120)
def test_metadata_listing(strom: StromProcess, kcat: str, topic: str) -> None:
    create_topic(strom.bootstrap, topic, 3)

    plain = run_kcat(kcat, "-L", "-b", strom.bootstrap)
    assert re.search(r"^ 1 brokers:$", plain, re.M), plain
    broker_line = re.search(r"^  broker (\d+) at (\S+)", plain, re.M)
    assert broker_line, plain
    assert broker_line.group(2) == strom.bootstrap, plain
    assert f'  topic "{topic}" with 3 partitions:' in plain, plain
    leader = broker_line.group(1)
    for p in range(3):
        line = f"    partition {p}, leader {leader}, replicas: {leader}, isrs: {leader}"
        assert line in plain, plain

    meta = json.loads(run_kcat(kcat, "-L", "-J", "-b", strom.bootstrap, "-t", topic))
    assert [b["name"] for b in meta["brokers"]] == [strom.bootstrap], meta
    [t] = meta["topics"]
    assert t["topic"] == topic, meta
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2], meta
    assert all(p["leader"] == int(leader) for p in t["partitions"]), meta


def kcat_headers(raw: object) -> list[tuple[str, str]]:
    """kcat -J prints headers as a flat ["k1", "v1", "k2", "v2"] list."""
    if not raw:
        return []
    assert isinstance(raw, list), raw
    return list(zip(raw[0::2], raw[1::2], strict=True))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_keyed(strom: StromProcess, kcat: str, topic: str, codec: str) -> None:
    partitions, per_partition = 3, 50
    create_topic(strom.bootstrap, topic, partitions)
    expected: dict[int, list[tuple[str, str]]] = {}
    for p in range(partitions):
        pairs = [(f"key-{p}-{i}", f"value-{p}-{i}-" + "xyz" * i) for i in range(per_partition)]
        expected[p] = pairs
        run_kcat(
            kcat,
            "-P",
            "-b",
            strom.bootstrap,
            "-t",
            topic,
            "-p",
            str(p),
            "-K:",
            "-z",
            codec,
            "-H",
            f"partition={p}",
            "-H",
            "tool=kcat",
            stdin="".join(f"{k}:{v}\n" for k, v in pairs),
        )

    out = run_kcat(
        kcat, "-C", "-b", strom.bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-q"
    )
    got: dict[int, list[dict[str, object]]] = {p: [] for p in range(partitions)}
    for line in out.splitlines():
        if line.strip():
            m = json.loads(line)
            got[m["partition"]].append(m)
    for p in range(partitions):
        msgs = got[p]
        assert [m["offset"] for m in msgs] == list(range(per_partition)), f"partition {p}"
        assert [(m["key"], m["payload"]) for m in msgs] == expected[p], f"partition {p}"
        for m in msgs:
            assert kcat_headers(m.get("headers")) == [("partition", str(p)), ("tool", "kcat")], m
            assert m["tstype"] == "create", m
            assert isinstance(m["ts"], int) and m["ts"] > 0, m
