"""Consumer groups with every client: queue semantics inside a group, broadcast across
groups, members that die or join, idle extra members, and commits that survive restarts.

Each member is its own process (group_checks.py for the Python clients,
PeerGroupConsumer.java for the Java consumer) so that one can be SIGKILLed without a
LeaveGroup. Records are produced only while the group is stable, and members commit
synchronously after every poll, so every record must be read exactly once per group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import group_checks as gc
import pytest
from strom_process import StromProcess

PARTITIONS = 6
PER_PARTITION = 25
BALANCE_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 60.0
# A killed member's partitions must move within session.timeout.ms plus this margin
# (the survivors notice on their next heartbeat, then rejoin and sync).
FAILOVER_MARGIN_S = 10.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromProcess]:
    process = StromProcess(tmp_path_factory.mktemp("strom"), overrides=gc.BROKER_OVERRIDES)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(params=gc.CLIENTS)
def client(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def groups(
    request: pytest.FixtureRequest, client: str, tmp_path: Path
) -> Iterator[Callable[[StromProcess, str], gc.Group]]:
    """`groups(broker, topic)`: members of this test's client kind; all stopped at the end."""
    java_argv = None
    if client == "java":
        java_argv = request.getfixturevalue("java_peers").argv
    made: list[gc.Group] = []

    def make(on: StromProcess, topic: str) -> gc.Group:
        group = gc.Group(client, on.bootstrap, topic, tmp_path, java_argv=java_argv)
        made.append(group)
        return group

    yield make
    for group in made:
        group.cleanup()


def wait_read(members: list[gc.Member], expected: int, group: gc.Group) -> None:
    gc.wait_until(
        lambda: len(gc.distinct_read(members)) >= expected,
        READ_TIMEOUT_S,
        lambda: f"{len(gc.distinct_read(members))} of {expected} records read\n" + group.describe(),
    )


def wait_committed(members: list[gc.Member], ends: dict[int, int], group: gc.Group) -> None:
    """Until, for every partition, the latest commit of some member reaches its end."""

    def done() -> bool:
        best: dict[int, int] = {}
        for m in members:
            for p, o in m.committed().items():
                best[p] = max(best.get(p, 0), o)
        return all(best.get(p, 0) >= end for p, end in ends.items() if end > 0)

    gc.wait_until(done, READ_TIMEOUT_S, lambda: f"commits up to {ends}\n" + group.describe())


def ends_of(produced: dict[tuple[int, int], str]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for p, o in produced:
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


@pytest.mark.timeout(300)
def test_group_splits_partitions_survives_a_killed_member_and_groups_broadcast(
    broker: StromProcess,
    groups: Callable[[StromProcess, str], gc.Group],
    client: str,
    topic: str,
) -> None:
    gc.create_topic(broker.bootstrap, topic, PARTITIONS)
    workers = groups(broker, topic)
    a, b, c = (workers.start(name, "workers") for name in ("a", "b", "c"))
    gc.wait_balanced([a, b, c], PARTITIONS, [2, 2, 2], BALANCE_TIMEOUT_S, workers.describe)
    audit = groups(broker, topic)
    auditor = audit.start("auditor", "audit")
    gc.wait_balanced([auditor], PARTITIONS, [PARTITIONS], BALANCE_TIMEOUT_S, audit.describe)

    # Phase 1: three members, two partitions each.
    produced = gc.produce(broker.bootstrap, topic, [PER_PARTITION] * PARTITIONS, "one")
    wait_read([a, b, c], len(produced), workers)
    wait_committed([a, b, c], ends_of(produced), workers)
    for member in (a, b, c):
        assert len(member.owned() or ()) == 2
        assert {r["partition"] for r in member.records()} <= set(member.owned() or ())

    # Phase 2: a dies without leaving; its partitions move to b and c.
    a.kill()
    moved_in = gc.wait_balanced(
        [b, c],
        PARTITIONS,
        [3, 3],
        gc.SESSION_TIMEOUT_MS / 1000 + FAILOVER_MARGIN_S,
        workers.describe,
    )
    more = gc.produce(broker.bootstrap, topic, [PER_PARTITION] * PARTITIONS, "two")
    produced.update(more)
    wait_read([a, b, c], len(produced), workers)
    wait_committed([b, c], ends_of(produced), workers)

    # Phase 3: a new member takes its share.
    d = workers.start("d", "workers")
    gc.wait_balanced([b, c, d], PARTITIONS, [2, 2, 2], BALANCE_TIMEOUT_S, workers.describe)
    more = gc.produce(broker.bootstrap, topic, [PER_PARTITION] * PARTITIONS, "three")
    produced.update(more)
    wait_read([a, b, c, d], len(produced), workers)
    wait_committed([b, c, d], ends_of(produced), workers)
    assert d.records(), "the member that joined read nothing"

    # The other group saw every record once (broadcast), whatever the workers did.
    wait_read([auditor], len(produced), audit)
    workers.stop_all()
    audit.stop_all()

    everyone = [a, b, c, d]
    gc.check_member_errors([*everyone, auditor])
    gc.check_no_shared_reads(everyone)
    gc.check_exactly_once(everyone, produced)
    gc.check_exactly_once([auditor], produced)
    ends = ends_of(produced)
    for group_id in ("workers", "audit"):
        committed = gc.committed_offsets(broker.bootstrap, group_id, topic, PARTITIONS)
        assert {p: o for p, (o, _) in committed.items()} == ends, group_id
    print(f"{client}: partitions of the killed member moved in {moved_in:.1f}s")


@pytest.mark.timeout(180)
def test_extra_member_is_idle(
    broker: StromProcess,
    groups: Callable[[StromProcess, str], gc.Group],
    topic: str,
) -> None:
    gc.create_topic(broker.bootstrap, topic, 2)
    workers = groups(broker, topic)
    members = [workers.start(name, "few-partitions") for name in ("a", "b", "c")]
    gc.wait_balanced(members, 2, [0, 1, 1], BALANCE_TIMEOUT_S, workers.describe)
    produced = gc.produce(broker.bootstrap, topic, [30, 30], "idle")
    wait_read(members, len(produced), workers)
    idle = [m for m in members if not m.owned()]
    workers.stop_all()
    assert len(idle) == 1 and not idle[0].records()
    gc.check_member_errors(members)
    gc.check_exactly_once(members, produced)


# kafka-python 3.0.12 (the newest) hangs here about 1 run in 5 on a loaded machine, with the
# broker before issue 14 too: its main thread waits forever in poll() ->
# ensure_coordinator_ready (a threading.Event of its new network layer) while its network
# thread idles in select(), so poll(timeout_ms=200) never returns; the broker sees the
# member's rejoin answered and then nothing (a faulthandler dump of the member showed it).
# A client bug, not the group's behaviour, which the other three clients check in this test.
KAFKA_PYTHON_HANG = "kafka-python 3.0.12's poll() hangs in ensure_coordinator_ready (client bug)"


@pytest.mark.timeout(240)
def test_restarted_member_resumes_after_its_commits_across_a_broker_crash(
    strom_factory: Callable[..., StromProcess],
    groups: Callable[[StromProcess, str], gc.Group],
    topic: str,
    client: str,
) -> None:
    if client == "kafka-python":
        pytest.skip(KAFKA_PYTHON_HANG)
    broker = strom_factory(overrides=gc.BROKER_OVERRIDES)
    broker.start()
    gc.create_topic(broker.bootstrap, topic, 3)
    produced = gc.produce(broker.bootstrap, topic, [30, 30, 30], "before")
    first = groups(broker, topic).start("first", "resumers", max_records=90, commit_metadata="m1")
    first.wait_closed()
    read_first = gc.distinct_read([first])
    assert read_first == set(produced)
    committed_before = first.committed()
    assert committed_before == {0: 30, 1: 30, 2: 30}
    later = gc.produce(broker.bootstrap, topic, [20, 20, 20], "after")
    produced.update(later)

    # SIGKILL: no clean shutdown of the logs; the commits must still be there.
    broker.kill()
    broker.start()
    committed = gc.committed_offsets(broker.bootstrap, "resumers", topic, 3)
    assert {p: o for p, (o, _) in committed.items() if o >= 0} == committed_before
    # confluent-kafka sends the metadata with its C string's NUL; Kafka keeps it, so do we.
    assert {(meta or "").rstrip("\x00") for _, (o, meta) in committed.items() if o >= 0} == {"m1"}

    second_group = groups(broker, topic)
    second = second_group.start("second", "resumers")
    wait_read([second], len(later), second_group)
    second_group.stop_all()
    gc.check_member_errors([first, second])
    # Exactly the records after the commits, once: together the two read everything.
    gc.check_exactly_once([first, second], produced)


@pytest.mark.timeout(120)
def test_clients_cannot_write_or_delete_consumer_offsets(broker: StromProcess) -> None:
    from confluent_kafka import KafkaError, KafkaException, Message, Producer
    from confluent_kafka.admin import AdminClient

    gc.create_topic(broker.bootstrap, "made-so-offsets-exist", 1)
    gc.committed_offsets(broker.bootstrap, "any", "made-so-offsets-exist", 1)  # creates it
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 20_000})
    producer.produce("__consumer_offsets", value=b"forged", partition=0, on_delivery=report)
    assert producer.flush(30) == 0
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION], errors

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as refused:
        admin.delete_topics(["__consumer_offsets"], operation_timeout=30)[
            "__consumer_offsets"
        ].result(60)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    assert "__consumer_offsets" in admin.list_topics(timeout=30).topics
