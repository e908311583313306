"""Faults across the metadata quorum of three Strom processes (issue 12 acceptance).

A network partition between the active controller and the other two (each node in its own
network namespace): the majority elects a leader and keeps serving metadata changes, the
minority refuses them with a retriable error and keeps serving reads, and after healing
there is one history. A lost majority (two of three killed): admin requests fail
retriably, reads of existing data keep working, and the quorum comes back with the nodes.
Bad configurations across nodes (another cluster.id, a node.id used twice, voter lists
that differ) are refused or fenced with a clear message, never two clusters.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import netns
import pytest
import wire_requests
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta
from strom.config import cluster_id as cluster_ids
from strom.records import batches
from strom_cluster import Quorum, StromCluster, describe_quorum
from strom_process import StromProcess, free_port
from waiting import wait_until

pytestmark = pytest.mark.timeout(180)

REQUEST_TIMEOUT_S = 30
# What Kafka's controller answers when it cannot take a metadata change now.
RETRIABLE = (ErrorCode.not_controller, ErrorCode.request_timed_out)
CLIENT_RETRIABLE = (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_CONTROLLER)
# The deadline of the admin request the minority must refuse (CreateTopics timeout_ms).
REFUSE_TIMEOUT_MS = 5_000
# How long a broker tries to forward an admin request to the active controller.
FORWARD_TIMEOUT_S = 30
RECORDS = [f"record-{n}".encode() for n in range(5)]


def quorum_or_none(node: StromProcess) -> Quorum | None:
    try:
        return describe_quorum(node)
    except Exception:
        return None


def create_raw(node: StromProcess, name: str, timeout_ms: int) -> ErrorCode:
    """CreateTopics (1 partition, RF 1) sent to `node` itself: the topic's error code."""
    request = CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name=TopicName(name),
                num_partitions=i32(1),
                replication_factor=i16(1),
                assignments=(),
                configs=(),
            ),
        ),
        timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
    )
    answer = asyncio.run(
        wire_requests.send(node.port, request, host=node.host, timeout_s=FORWARD_TIMEOUT_S + 15)
    )
    (topic,) = answer.topics
    return ErrorCode(topic.error_code)


def admin(node: StromProcess) -> AdminClient:
    """An admin client that knows only this node (so its requests go through it)."""
    return AdminClient({"bootstrap.servers": node.bootstrap})


def topic_names(node: StromProcess) -> set[str]:
    listed = admin(node).list_topics(timeout=REQUEST_TIMEOUT_S).topics
    return {name for name in listed if not name.startswith("__")}


def lists_all(node: StromProcess, names: set[str], who: str) -> None:
    def listed() -> bool:
        return names <= topic_names(node)

    wait_until(listed, 30, f"{who} lists {sorted(names)}")


def create_until_done(node: StromProcess, topic: NewTopic, timeout: float) -> float:
    """Create through `node`, retrying retriable failures until the deadline; seconds taken."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        client = admin(node)  # kept alive until the answer is in
        try:
            client.create_topics([topic], request_timeout=10)[topic.topic].result(15)
            return time.monotonic() - started
        except KafkaException as error:
            if not error.args[0].retriable() or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def produce(node: StromProcess, topic: str) -> None:
    producer = Producer(
        {"bootstrap.servers": node.bootstrap, "acks": "all", "message.timeout.ms": 20_000}
    )
    for value in RECORDS:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(REQUEST_TIMEOUT_S) == 0


def fetch(node: StromProcess, topic: str) -> list[bytes]:
    """The values in partition 0 of `topic`, fetched from `node` itself (a client would
    follow the metadata to the other nodes, which no longer name `node` as the leader
    once it is cut off from them: a partition of a fenced broker has no leader there)."""
    request = wire_requests.fetch_from_start(topic)
    answer = asyncio.run(
        wire_requests.send(node.port, request, api_version=12, host=node.host, timeout_s=10)
    )
    data = answer.responses[0].partitions[0]
    assert data.error_code == ErrorCode.none, data
    return [
        record.value or b""
        for batch in batches.iter_batches(data.records)
        for record in batches.iter_records(
            data.records[batch.position : batch.position + batch.size]
        )
    ]


def make_kept_topic(cluster: StromCluster, on: int) -> str:
    """An RF 1 topic whose only partition `on` leads, with RECORDS in it."""
    name = f"kept-on-{on}"
    node = cluster.nodes[on]
    client = admin(node)  # kept alive until the answer is in
    topic = NewTopic(name, num_partitions=1, replica_assignment=[[on]])
    client.create_topics([topic])[name].result(REQUEST_TIMEOUT_S)
    wait_until(lambda: name in topic_names(node), 30, f"node {on} lists {name}")
    produce(node, name)
    return name


def ready(node: StromProcess) -> bool:
    try:
        with urllib.request.urlopen(f"{node.metrics_url}/readyz", timeout=1.0) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def log_of(node: StromProcess) -> str:
    return "".join(
        path.read_text("utf-8", "replace") for path in sorted(node.data_dir.glob("stderr.*.txt"))
    )


# 1. A partition between the controller and the other two --------------------------------


@pytest.fixture
def hosts() -> Iterator[netns.Hosts]:
    reason = netns.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with netns.Hosts(3) as made:
        yield made


@pytest.mark.netns
def test_a_partitioned_controller_is_replaced_and_rejoins_one_history(
    tmp_path: Path, hosts: netns.Hosts
) -> None:
    cluster = StromCluster(
        tmp_path, hosts=[str(h.address) for h in hosts], wraps=[h.prefix for h in hosts]
    )
    cluster.start()
    try:
        before = describe_quorum(cluster.nodes[1])
        old = before.leader
        assert old in (1, 2, 3), before
        majority = [n for n in (1, 2, 3) if n != old]
        kept = make_kept_topic(cluster, old)

        hosts.partition({hosts[old - 1]}, {hosts[n - 1] for n in majority})
        cut_at = time.monotonic()

        def new_leader() -> int | None:
            views = [quorum_or_none(cluster.nodes[n]) for n in majority]
            if (
                all(
                    v is not None and v.leader in majority and v.epoch > before.epoch for v in views
                )
                and len({(v.leader, v.epoch) for v in views if v is not None}) == 1
            ):
                return views[0].leader if views[0] is not None else None
            return None

        elected = wait_until(new_leader, 20, "the majority elects a leader of a later epoch")
        took = create_until_done(cluster.nodes[majority[0]], NewTopic("by-majority", 2, 2), 20)
        elected_after = time.monotonic() - cut_at
        assert elected_after < 20, f"the majority served a change {elected_after:.1f} s after"

        # the minority refuses a change, retriably, and makes nothing of it
        started = time.monotonic()
        refused = create_raw(cluster.nodes[old], "by-minority", REFUSE_TIMEOUT_MS)
        took = time.monotonic() - started
        print(f"minority: {refused.name} after {took:.1f} s")
        assert refused in RETRIABLE, refused
        assert took < FORWARD_TIMEOUT_S + 10
        assert "by-minority" not in topic_names(cluster.nodes[old])
        # and keeps serving what it has
        assert fetch(cluster.nodes[old], kept) == RECORDS

        hosts.heal()

        def one_history() -> bool:
            views = [quorum_or_none(node) for node in cluster.nodes.values()]
            if any(v is None for v in views):
                return False
            agreed = {(v.leader, v.epoch) for v in views if v is not None}
            if len(agreed) != 1:
                return False
            leader, _ = agreed.pop()
            led = describe_quorum(cluster.nodes[leader])
            return len(set(led.ends.values())) == 1 and led.ends[old] == led.high_watermark

        wait_until(
            one_history,
            30,
            lambda: "one leader, epoch and log end: "
            + repr([quorum_or_none(node) for node in cluster.nodes.values()]),
        )
        for node_id, node in cluster.nodes.items():
            lists_all(node, {kept, "by-majority"}, f"node {node_id}")
            assert "by-minority" not in topic_names(node), node_id
        print(f"elected node {elected}; first change served {took:.1f} s after asking")
    finally:
        cluster.stop()


# 2. A lost majority (loopback) -----------------------------------------------------------


def test_a_lost_majority_refuses_changes_retriably_and_keeps_serving_reads(
    tmp_path: Path,
) -> None:
    cluster = StromCluster(tmp_path)
    cluster.start()
    try:
        leader = describe_quorum(cluster.nodes[1]).leader
        survivor = next(n for n in (1, 2, 3) if n != leader)  # a follower keeps the data
        others = [n for n in (1, 2, 3) if n != survivor]
        kept = make_kept_topic(cluster, survivor)
        for node_id in others:
            cluster.nodes[node_id].kill()
        node = cluster.nodes[survivor]

        # the broker forwards to the active controller until its own request timeout
        # (Kafka's request.timeout.ms, 30 s) whatever the CreateTopics timeout says
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            started = time.monotonic()
            raw = pool.submit(create_raw, node, "without-majority", REFUSE_TIMEOUT_MS)
            # a client sees a retriable error within its timeout
            client = admin(node)
            topic = NewTopic("client-without-majority", 1, 1)
            future = client.create_topics([topic], request_timeout=5)[topic.topic]
            with pytest.raises(KafkaException) as caught:
                future.result(20)
            # the client's own timeout (librdkafka does not flag _TIMED_OUT retriable)
            assert caught.value.args[0].code() in CLIENT_RETRIABLE, caught.value
            assert time.monotonic() - started < 20
            assert fetch(node, kept) == RECORDS
            refused = raw.result(FORWARD_TIMEOUT_S + 15)
            took = time.monotonic() - started
        print(f"lost majority: {refused.name} after {took:.1f} s; client: {caught.value}")
        assert refused in RETRIABLE, refused
        assert took < FORWARD_TIMEOUT_S + 10
        assert "without-majority" not in topic_names(node)

        for node_id in others:
            cluster.nodes[node_id].launch()
        for node_id in others:
            cluster.nodes[node_id].wait_ready()
        create_until_done(node, NewTopic("with-majority", 1, 1), 30)
        for node_id, each in cluster.nodes.items():
            lists_all(each, {"with-majority"}, f"node {node_id}")
    finally:
        cluster.stop()


# 3. Bad configurations across nodes ------------------------------------------------------


def start_some(cluster: StromCluster, good: list[int]) -> None:
    for node in cluster.nodes.values():
        node.launch()
    for node_id in good:
        cluster.nodes[node_id].wait_ready()


def test_a_node_of_another_cluster_id_is_refused_and_never_ready(tmp_path: Path) -> None:
    cluster = StromCluster(tmp_path)
    stranger = cluster.nodes[3]
    other_id = cluster_ids.new_cluster_id()
    stranger.overrides["cluster.id"] = other_id
    start_some(cluster, [1, 2])
    try:
        create_until_done(cluster.nodes[1], NewTopic("without-the-stranger", 1, 1), 20)
        message = f"from cluster {cluster.cluster_id}: this node is in cluster {other_id}"
        wait_until(
            lambda: message in log_of(stranger), 20, f"node 3 logs that it refused {message}"
        )
        assert stranger.running and not ready(stranger)
        for node_id in (1, 2):
            quorum = describe_quorum(cluster.nodes[node_id])
            assert quorum.leader in (1, 2) and quorum.ends.get(3, -1) in (-1, 0), quorum
    finally:
        stranger.kill()
        cluster.stop()


@pytest.mark.parametrize("twin_of", ["the leader", "a follower"])
def test_a_second_process_with_a_node_id_in_use_is_refused(tmp_path: Path, twin_of: str) -> None:
    """A second process with the node.id of a running node, its own log directory and
    ports. A twin of a follower: the quorum's leader tells the two apart by their log
    directory ids (KIP-853's ReplicaDirectoryId) and refuses the second's fetches. A twin of
    the leader: the others name its id as the leader, which it knows it never was. Either
    way the second never catches up nor registers, and says why; the first serves on."""
    cluster = StromCluster(tmp_path)
    cluster.start()
    leader = describe_quorum(cluster.nodes[1]).leader
    target = leader if twin_of == "the leader" else next(n for n in (1, 2, 3) if n != leader)
    first = cluster.nodes[target]
    settings = dict(first.overrides)
    port = free_port()
    settings["listeners"] = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{free_port()}"
    settings["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
    twin = StromProcess(tmp_path / "twin", overrides=settings, port=port)
    twin.launch()
    try:
        wait_until(
            lambda: f"another node with node.id {target}" in log_of(twin),
            30,
            lambda: f"the second node {target} is refused and says so; its log:\n"
            + log_of(twin)[-4000:],
        )
        if target != leader:
            assert f"two nodes with node.id {target}" in log_of(cluster.nodes[leader])
        assert not ready(twin)
        assert first.running and ready(first)
        other = next(n for n in (1, 2, 3) if n != target)
        create_until_done(cluster.nodes[other], NewTopic("with-the-first", 1, 1), 20)
        listed = admin(cluster.nodes[other]).list_topics(timeout=REQUEST_TIMEOUT_S)
        assert listed.brokers[target].port == first.port
    finally:
        twin.kill()
        cluster.stop()


def test_a_node_with_another_voter_list_is_refused_and_says_so(tmp_path: Path) -> None:
    """Node 3 is configured as a quorum of its own ({3}); nodes 1 and 2 list 1, 2 and 3.
    Node 3 refuses their Vote and BeginQuorumEpoch requests with Kafka's
    INCONSISTENT_VOTER_SET (they are not voters in its set), so they never follow it: they
    elect one of themselves. Every side says in its log that the voter lists differ."""
    cluster = StromCluster(tmp_path)
    odd = cluster.nodes[3]
    voters = odd.overrides["controller.quorum.voters"].split(",")
    odd.overrides["controller.quorum.voters"] = voters[2]  # {3}: a quorum of its own
    start_some(cluster, [1, 2])
    try:
        create_until_done(cluster.nodes[1], NewTopic("after-start", 1, 1), 20)
        majority = [describe_quorum(cluster.nodes[n]) for n in (1, 2)]
        assert {q.leader for q in majority} <= {1, 2}, majority
        assert len({(q.leader, q.epoch) for q in majority}) == 1, majority
        wait_until(
            lambda: "controller.quorum.voters differs between nodes" in odd.log_tail(100_000),
            20,
            "node 3 says the voter lists differ",
        )
        leader = cluster.nodes[majority[0].leader]
        wait_until(
            lambda: "controller.quorum.voters differs between nodes" in leader.log_tail(100_000),
            20,
            "the majority's leader says node 3 refused it",
        )
    finally:
        odd.kill()
        cluster.stop()
