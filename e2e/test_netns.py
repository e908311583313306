"""e2e/netns.py: hosts in network namespaces reach each other and the root namespace,
partitions and isolation cut exactly what they say and heal() restores it, a strom-server in
a host serves clients in the root namespace, and nothing of a run is left afterwards.

Needs root and `ip netns` (skipped with the reason otherwise). All traffic stays on the
run's private bridge; every connect has a timeout, every loop a deadline.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import netns
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from netns import Host, Hosts
from strom_process import StromProcess

pytestmark = [pytest.mark.netns, pytest.mark.timeout(120)]

ECHO_PORT = 7007
CONNECT_TIMEOUT_S = 1.0
ECHO_LIFETIME_S = 120.0  # the servers exit by themselves even if nothing kills them
READY_TIMEOUT_S = 10.0

# Echo once per connection; accept until the lifetime is over.
ECHO = """
import socket, sys, threading, time
address, port, lifetime = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + lifetime
server = socket.create_server((address, port))
server.settimeout(0.2)
print("listening", flush=True)
def serve(conn):
    with conn:
        conn.settimeout(5)
        conn.sendall(conn.recv(64))
while time.monotonic() < deadline:
    try:
        conn, _ = server.accept()
    except TimeoutError:
        continue
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""

# One echo round trip; exit 0 if it came back, 1 with the error otherwise.
CLIENT = """
import socket, sys
address, port, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
try:
    with socket.create_connection((address, port), timeout=timeout) as s:
        s.sendall(b"ping")
        sys.exit(0 if s.recv(64) == b"ping" else 2)
except OSError as e:
    print(repr(e))
    sys.exit(1)
"""


def echo_from_root(address: str) -> bool:
    try:
        with socket.create_connection((address, ECHO_PORT), timeout=CONNECT_TIMEOUT_S) as s:
            s.sendall(b"ping")
            return s.recv(64) == b"ping"
    except OSError:
        return False


def echo_from(host: Host, address: str) -> bool:
    argv = [sys.executable, "-c", CLIENT, address, str(ECHO_PORT), str(CONNECT_TIMEOUT_S)]
    proc = host.run(argv, timeout=CONNECT_TIMEOUT_S + 10, capture_output=True)
    return proc.returncode == 0


Source = Host | None  # None: the root namespace


def reachability(pairs: list[tuple[Source, Host]]) -> dict[tuple[str, str], bool]:
    """Every (from, to) echo round trip at once; each fails within CONNECT_TIMEOUT_S."""

    def check(pair: tuple[Source, Host]) -> bool:
        source, target = pair
        if source is None:
            return echo_from_root(str(target.address))
        return echo_from(source, str(target.address))

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(pairs)) as pool:
        results = list(pool.map(check, pairs))
    # a cut attempt times out, it does not hang (python and `ip netns exec` start included)
    assert time.monotonic() - started < CONNECT_TIMEOUT_S + 5
    return {
        ("root" if s is None else s.name, t.name): ok
        for (s, t), ok in zip(pairs, results, strict=True)
    }


def all_pairs(hosts: Hosts) -> list[tuple[Source, Host]]:
    sources: list[Source] = [None, *hosts]
    return [(s, t) for s in sources for t in hosts if s is not t]


def start_echo(host: Host) -> subprocess.Popen[bytes]:
    proc = host.popen(
        [sys.executable, "-c", ECHO, str(host.address), str(ECHO_PORT), str(ECHO_LIFETIME_S)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
    line = proc.stdout.readline() if ready else b""
    assert line == b"listening\n", f"echo server on {host} did not start (rc={proc.poll()})"
    return proc


@pytest.fixture(scope="module")
def available() -> None:
    reason = netns.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def hosts(available: None) -> Iterator[Hosts]:
    """Three hosts with an echo server each, shared by the module's tests."""
    with Hosts(3) as made:
        for host in made:
            start_echo(host)
        yield made


@pytest.fixture
def healed(hosts: Hosts) -> Iterator[Hosts]:
    """The shared hosts, healed after the test whatever it did."""
    yield hosts
    hosts.heal()


def test_hosts_reach_each_other_and_are_reached_from_root(healed: Hosts) -> None:
    hosts = healed
    assert hosts.subnet is not None and hosts.gateway == hosts.subnet.network_address + 1
    assert [h.address for h in hosts] == [hosts.subnet.network_address + i for i in (2, 3, 4)]
    assert all(hosts.run_id in h.netns and hosts.run_id in h.veth for h in hosts)
    result = reachability(all_pairs(hosts))
    assert all(result.values()), result


def test_partition_cuts_between_groups_only_and_heal_restores(healed: Hosts) -> None:
    hosts = healed
    h1, h2, h3 = hosts
    hosts.partition({h1, h2}, {h3})
    result = reachability(all_pairs(hosts))
    cut = {("h1", "h3"), ("h3", "h1"), ("h2", "h3"), ("h3", "h2")}
    assert {pair for pair, ok in result.items() if not ok} == cut, result

    hosts.heal()
    result = reachability(all_pairs(hosts))
    assert all(result.values()), result


def test_isolate_cuts_root_too(healed: Hosts) -> None:
    hosts = healed
    h3 = hosts[2]
    hosts.isolate(h3)
    result = reachability(all_pairs(hosts))
    cut = {("root", "h3"), ("h1", "h3"), ("h3", "h1"), ("h2", "h3"), ("h3", "h2")}
    assert {pair for pair, ok in result.items() if not ok} == cut, result

    hosts.heal()
    result = reachability(all_pairs(hosts))
    assert all(result.values()), result


def test_partition_checks_its_groups(healed: Hosts) -> None:
    h1, h2, _ = healed
    with pytest.raises(ValueError, match="two groups"):
        healed.partition({h1})
    with pytest.raises(ValueError, match="in two groups"):
        healed.partition({h1, h2}, {h2})


def test_delay_and_loss_with_netem(healed: Hosts) -> None:
    hosts = healed
    reason = hosts.netem_unavailable()
    if reason is not None:
        with pytest.raises(netns.NetemUnavailable):
            hosts.delay(hosts[2], 100)
        pytest.skip(reason)
    h3 = hosts[2]
    hosts.delay(h3, 300)
    started = time.monotonic()
    assert echo_from_root(str(h3.address))
    assert time.monotonic() - started >= 0.3  # SYN-ACK and the echo both leave h3
    hosts.loss(h3, 100)
    assert not echo_from_root(str(h3.address))
    hosts.heal()
    started = time.monotonic()
    assert echo_from_root(str(h3.address))
    assert time.monotonic() - started < 0.3


def test_strom_server_in_a_host_serves_clients_in_root(
    healed: Hosts, strom_factory: Callable[..., StromProcess], topic: str
) -> None:
    h1 = healed[0]
    broker = strom_factory(wrap=h1.prefix, host=str(h1.address))
    broker.start()
    assert broker.proc is not None and broker.proc.pid in h1.pids()
    bootstrap = broker.bootstrap
    assert bootstrap.startswith(f"{h1.address}:")

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=20)[topic].result(timeout=30)
    metadata = admin.list_topics(timeout=10)
    assert [b.host for b in metadata.brokers.values()] == [str(h1.address)]

    sent = [f"record-{i}".encode() for i in range(50)]
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20_000})
    for value in sent:
        producer.produce(topic, value=value, on_delivery=on_delivery)
    assert producer.flush(30) == 0 and not errors, errors

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "e2e-netns", "enable.auto.commit": False}
    )
    consumer.assign([KafkaTopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value() or b"")
    finally:
        consumer.close()
    assert got == sent
    broker.stop()


def test_nothing_is_left_behind_even_after_a_failure(available: None) -> None:
    with pytest.raises(RuntimeError, match="midway"), Hosts(2) as hosts:
        sleeper = hosts[1].popen(["sleep", "60"])
        hosts.partition({hosts[0]}, {hosts[1]})
        found = hosts.leftovers()
        assert f"netns {hosts[1].netns}" in found and f"link {hosts.bridge}" in found
        assert f"process {sleeper.pid} in {hosts[1].netns}" in found
        raise RuntimeError("a test failing midway")
    assert netns.leftovers(hosts.run_id) == []
    assert sleeper.returncode == -signal.SIGKILL  # killed and reaped
    assert not (netns.RUN_DIR / f"{hosts.run_id}.lock").exists()


CRASHING_RUN = """
import sys, time
sys.path.insert(0, sys.argv[1])
import netns
hosts = netns.Hosts(2)
hosts.open()
hosts[0].popen(["sleep", "60"])
print(hosts.run_id, flush=True)
time.sleep(60)
"""


def test_a_crashed_run_is_swept_by_the_next(available: None) -> None:
    e2e_dir = str(Path(netns.__file__).parent)
    crashed = subprocess.Popen(
        [sys.executable, "-c", CRASHING_RUN, e2e_dir], stdout=subprocess.PIPE
    )
    try:
        assert crashed.stdout is not None
        ready, _, _ = select.select([crashed.stdout], [], [], READY_TIMEOUT_S)
        run_id = crashed.stdout.readline().decode().strip() if ready else ""
        assert run_id, "the crashing run did not start"
        assert netns.leftovers(run_id) != []
        assert run_id not in netns.sweep_stale(), "a live run is not swept"
    finally:
        os.kill(crashed.pid, signal.SIGKILL)  # no atexit, no close(): a crash
        crashed.wait(10)
    found = netns.leftovers(run_id)
    assert any(line.startswith("process ") for line in found), found
    with Hosts(1) as hosts:  # opening sweeps what dead runs left
        assert netns.leftovers(run_id) == []
        assert hosts.leftovers() != []
    assert netns.leftovers(hosts.run_id) == []
