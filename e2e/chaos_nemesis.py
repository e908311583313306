"""The chaos test's nemesis: one broker at a time, a fault that lasts a few seconds, then
healing and waiting (with a deadline) for a healthy cluster before the next.

Targets: the active controller (DescribeQuorum), the leader of one of the topic's
partitions (Metadata), or any node. Faults: SIGKILL and restart on the same data dir,
SIGSTOP and SIGCONT, and a network cut between the target and the other brokers (network
namespaces, e2e/netns.py: clients keep reaching every broker, as clients on the target's
side of a real partition would). Every choice comes from one seeded RNG, so a seed names a
run's schedule (the cluster's own timing still varies).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import signal
import threading
from collections.abc import Callable

import netns
import wire_requests
from chaos_workload import Clock
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName
from strom_cluster import StromCluster, describe_quorum
from strom_process import StromProcess
from waiting import wait_until

HEALTHY_TIMEOUT_S = 60.0
FAULT_S = (2.0, 8.0)  # how long a fault lasts, drawn uniformly
GAP_S = (1.0, 3.0)  # a healthy pause between two faults
TARGETS = ("controller", "leader", "any")
FAULTS = ("kill", "pause", "cut")


@dataclasses.dataclass
class Fault:
    kind: str  # kill, pause or cut
    node: int
    role: str  # what the target was chosen as: controller, leader of partition P, any
    started: float
    healed: float | None = None
    healthy: float | None = None  # when the cluster was healthy again

    def __str__(self) -> str:
        healed = "not healed" if self.healed is None else f"healed {self.healed:6.1f}s"
        healthy = "" if self.healthy is None else f", healthy {self.healthy:6.1f}s"
        return (
            f"{self.started:6.1f}s {self.kind:5} node {self.node} ({self.role}), {healed}{healthy}"
        )


class Nemesis(threading.Thread):
    def __init__(
        self,
        cluster: StromCluster,
        hosts: netns.Hosts | None,
        topic: str,
        partitions: int,
        clock: Clock,
        seed: int,
    ) -> None:
        super().__init__(name="chaos-nemesis", daemon=True)
        self.cluster, self.hosts, self.topic, self.partitions = cluster, hosts, topic, partitions
        self.clock = clock
        self.rng = random.Random(seed)
        self.faults_available = FAULTS if hosts is not None else ("kill", "pause")
        self.stop_at = float("inf")
        self.faults: list[Fault] = []
        self.error: BaseException | None = None
        self._ending = threading.Event()

    def stop(self) -> None:
        """End the fault in progress now (healed), and no new one."""
        self.stop_at = 0.0
        self._ending.set()

    def run(self) -> None:
        try:
            while self.clock.now() < self.stop_at:
                self._one_fault()
                self._ending.wait(self.rng.uniform(*GAP_S))
        except BaseException as error:  # the test reports it
            self.error = error
        finally:
            try:
                self.heal_everything()
            except BaseException as error:
                self.error = self.error or error

    def _one_fault(self) -> None:
        node_id, role = self._choose_target(self.rng.choice(TARGETS))
        kind = self.rng.choice(self.faults_available)
        duration = self.rng.uniform(*FAULT_S)
        fault = Fault(kind, node_id, role, self.clock.now())
        self.faults.append(fault)
        print(f"nemesis: {fault.started:6.1f}s {kind} node {node_id} ({role})", flush=True)
        node = self.cluster.nodes[node_id]
        heal = self._inflict(kind, node_id, node)
        try:
            self._ending.wait(duration)
        finally:
            heal()
            fault.healed = self.clock.now()
        self.wait_healthy()
        fault.healthy = self.clock.now()
        print(f"nemesis: {fault}", flush=True)

    def _choose_target(self, wanted: str) -> tuple[int, str]:
        """A node chosen as `wanted`; any node if the cluster cannot say (it just healed)."""
        try:
            if wanted == "controller":
                leader = describe_quorum(self._any_node()).leader
                if leader in self.cluster.nodes:
                    return leader, "controller"
            if wanted == "leader":
                partition = self.rng.randrange(self.partitions)
                _, leaders = topic_metadata(self._any_node(), self.topic)
                if leaders.get(partition, -1) in self.cluster.nodes:
                    return leaders[partition], f"leader of partition {partition}"
        except Exception as error:
            print(f"nemesis: no {wanted} known ({error!r}): any node", flush=True)
        return self.rng.choice(sorted(self.cluster.nodes)), "any"

    def _inflict(self, kind: str, node_id: int, node: StromProcess) -> Callable[[], None]:
        """Start the fault; return what heals it."""
        if kind == "kill":
            node.kill()

            def restart() -> None:
                node.start(HEALTHY_TIMEOUT_S)

            return restart
        if kind == "pause":
            assert node.proc is not None
            pid = node.proc.pid
            os.kill(pid, signal.SIGSTOP)
            return lambda: os.kill(pid, signal.SIGCONT)
        assert self.hosts is not None
        target = self.hosts[node_id - 1]
        self.hosts.partition({target}, {h for h in self.hosts if h is not target})
        return self.hosts.heal

    def heal_everything(self) -> None:
        """Whatever happened: every broker running and reachable (idempotent)."""
        if self.hosts is not None:
            self.hosts.heal()
        for node in self.cluster.nodes.values():
            if node.proc is not None and node.running:
                os.kill(node.proc.pid, signal.SIGCONT)
        for node in self.cluster.nodes.values():
            if not node.running:
                node.start(HEALTHY_TIMEOUT_S)

    def wait_healthy(self) -> None:
        last = f"after the fault {self.faults[-1]}" if self.faults else ""
        wait_healthy(self.cluster, self.topic, self.partitions, last)

    def _any_node(self) -> StromProcess:
        return self.cluster.nodes[self.rng.choice(sorted(self.cluster.running()))]


def topic_metadata(node: StromProcess, topic: str) -> tuple[set[int], dict[int, int]]:
    """Metadata from `node` itself (one connection to it, not a client that may ask
    another broker): the brokers it lists and the leader of each partition of `topic`
    (-1: none)."""
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    answer = asyncio.run(wire_requests.send(node.port, request, host=node.host, timeout_s=5))
    brokers = {int(broker.node_id) for broker in answer.brokers}
    (described,) = answer.topics
    if described.error_code != 0:
        raise AssertionError(f"Metadata of {topic}: error {described.error_code}")
    return brokers, {
        int(p.partition_index): int(p.leader_id) if p.error_code == 0 else -1
        for p in described.partitions
    }


def wait_healthy(
    cluster: StromCluster,
    topic: str,
    partitions: int,
    when: str = "",
    timeout: float = HEALTHY_TIMEOUT_S,
) -> None:
    """Every node runs, and every node's Metadata lists all the brokers (registered and
    unfenced) and a leader for every partition of `topic`."""
    wait_until(
        lambda: unhealthy(cluster, topic, partitions) is None,
        timeout,
        lambda: f"a healthy cluster {when}: {unhealthy(cluster, topic, partitions)}",
    )


def unhealthy(cluster: StromCluster, topic: str, partitions: int) -> str | None:
    """What keeps the cluster from being healthy now, or None."""
    everyone = set(cluster.nodes)
    for node_id, node in cluster.nodes.items():
        if not node.running:
            return f"node {node_id} is not running"
        try:
            brokers, leaders = topic_metadata(node, topic)
        except Exception as error:
            return f"node {node_id}'s Metadata: {error!r}"
        if brokers != everyone:
            return f"node {node_id} lists brokers {sorted(brokers)}"
        if len(leaders) != partitions or min(leaders.values()) < 0:
            return f"node {node_id} sees leaders {leaders}"
    return None
