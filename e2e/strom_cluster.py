"""A cluster of real `strom-server` processes in combined mode, for whole-system tests.

Node i (1..N) is broker and controller with a client listener and a controller listener
on free loopback ports (or on its own address in a network namespace), one data dir
each, one shared cluster id and one `controller.quorum.voters`: the same settings
`strom-dev-cluster` writes. The nodes start together (each waits for a majority before it
is ready); any node can be killed, stopped and restarted on its own dir and ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import wire_requests
from kio.schema.describe_quorum.v2.request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32
from strom.config import cluster_id as cluster_ids
from strom_process import READY_TIMEOUT_S, StromProcess, free_port

CONTROLLER_LISTENER = "CONTROLLER"


class StromCluster:
    def __init__(
        self,
        root: Path,
        brokers: int = 3,
        *,
        overrides: Mapping[str, str] | None = None,
        hosts: Sequence[str] | None = None,
        wraps: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """`hosts[i]`/`wraps[i]`: node i+1's address and argv prefix (a netns.Host's)."""
        self.cluster_id = cluster_ids.new_cluster_id()
        addresses = list(hosts) if hosts else ["127.0.0.1"] * brokers
        prefixes = list(wraps) if wraps else [()] * brokers
        self.controller_ports = [free_port() for _ in range(brokers)]
        voters = ",".join(
            f"{i + 1}@{addresses[i]}:{self.controller_ports[i]}" for i in range(brokers)
        )
        replication = str(min(3, brokers))
        self.nodes: dict[int, StromProcess] = {}
        for i in range(brokers):
            node_id = i + 1
            port = free_port()
            host = addresses[i]
            settings = {
                "node.id": str(node_id),
                "process.roles": "broker,controller",
                "listeners": (
                    f"PLAINTEXT://{host}:{port},{CONTROLLER_LISTENER}://{host}:"
                    f"{self.controller_ports[i]}"
                ),
                "advertised.listeners": f"PLAINTEXT://{host}:{port}",
                "controller.listener.names": CONTROLLER_LISTENER,
                "listener.security.protocol.map": (
                    f"PLAINTEXT:PLAINTEXT,{CONTROLLER_LISTENER}:PLAINTEXT"
                ),
                "controller.quorum.voters": voters,
                "cluster.id": self.cluster_id,
                "default.replication.factor": replication,
                "offsets.topic.replication.factor": replication,
                "log.retention.ms": "-1",
                **(overrides or {}),
            }
            self.nodes[node_id] = StromProcess(
                root / f"node-{node_id}",
                overrides=settings,
                port=port,
                host=host,
                wrap=prefixes[i],
            )

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes.values())

    def controller_bootstrap(self, node_id: int) -> str:
        return f"{self.nodes[node_id].host}:{self.controller_ports[node_id - 1]}"

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        for node in self.nodes.values():
            node.launch()
        for node in self.nodes.values():
            node.wait_ready(timeout)

    def stop(self) -> None:
        """Stop every running node gracefully (each must exit 0); raises the first failure
        after trying them all."""
        failures = []
        for node in self.nodes.values():
            if not node.running:
                continue  # killed by the test
            try:
                node.stop()
            except AssertionError as error:
                failures.append(str(error))
        assert not failures, "\n\n".join(failures)

    @contextlib.contextmanager
    def started(self) -> Iterator[StromCluster]:
        """Started for a `with` block; every node still running is SIGKILLed after it (a
        test that stops nodes itself, or kills them, need not leave them stoppable)."""
        self.start()
        try:
            yield self
        finally:
            for node in self.nodes.values():
                if node.running:
                    node.kill()

    def running(self) -> list[int]:
        return [node_id for node_id, node in self.nodes.items() if node.running]


@dataclasses.dataclass(frozen=True)
class Quorum:
    """A node's answer to DescribeQuorum."""

    leader: int
    epoch: int
    high_watermark: int
    ends: dict[int, int]  # voter -> log end offset (-1 where this node does not know it)

    @property
    def voters(self) -> list[int]:
        return sorted(self.ends)


def describe_quorum(node: StromProcess) -> Quorum:
    """DescribeQuorum sent to `node`'s client listener (a broker forwards it to the leader)."""
    request = DescribeQuorumRequest(
        topics=(
            TopicData(
                topic_name=TopicName("__cluster_metadata"),
                partitions=(PartitionData(partition_index=i32(0)),),
            ),
        )
    )
    answer = asyncio.run(wire_requests.send(node.port, request, host=node.host, timeout_s=5))
    (partition,) = answer.topics[0].partitions
    return Quorum(
        leader=int(partition.leader_id),
        epoch=int(partition.leader_epoch),
        high_watermark=int(partition.high_watermark),
        ends={int(v.replica_id): int(v.log_end_offset) for v in partition.current_voters},
    )
