"""The metadata quorum as the configuration describes it: voters, how to find them, timeouts.

Kafka's KRaft settings (`QuorumConfig`, `KRaftConfigs`), read into one typed object,
`QuorumSettings`, which `BrokerConfig.quorum` builds after checking the rules that tie the
quorum keys to the roles and listeners (see `broker.py`). Three ways to describe a quorum:

- `controller.quorum.voters` (`id@host:port,...`): a static quorum (Kafka's kraft.version 0);
  `controller.quorum.bootstrap.servers`, when also given, is only where to look for the
  leader first (Kafka's rule: the voters define the quorum).
- `controller.quorum.bootstrap.servers` alone (KIP-853): Kafka learns the voters from the
  metadata log, which `kafka-storage format --standalone` or `--initial-controllers`
  seeded. Strom has no format step: a controller given only bootstrap servers starts as
  a quorum of one, itself (`--standalone`), so they must name only its own controller
  endpoint (Kafka 4's shipped `server.properties` is exactly that); a broker-only node
  starts with no known voters and finds them through the bootstrap servers.
- neither (the Strom default, `make run`): a quorum of one, this node, exactly as a single
  broker has always run.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Voter:
    """One member of the controller quorum: its node id and controller endpoint."""

    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.node_id}@{host}:{self.port}"


@dataclasses.dataclass(frozen=True)
class QuorumSettings:
    """Everything the Raft layer needs from the configuration, already validated."""

    node_id: int
    is_controller: bool
    is_broker: bool
    # The voter set the node starts with, in the order given. Empty only on a broker-only
    # node given bootstrap servers alone: the voters are learned from the quorum.
    voters: tuple[Voter, ...]
    # Whether `voters` came from controller.quorum.voters (a static quorum).
    static_voters: bool
    # Where to look for the quorum: controller.quorum.bootstrap.servers, else the voters'
    # endpoints (what Kafka's KafkaRaftClient falls back to).
    bootstrap_servers: tuple[tuple[str, int], ...]
    # The first of controller.listener.names: the listener a broker uses to reach the
    # controllers, and the one a controller serves the quorum on. None only for the
    # default single node, which has no controller listener.
    controller_listener_name: str | None
    election_timeout_ms: int
    fetch_timeout_ms: int
    election_backoff_max_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    append_linger_ms: int
    broker_heartbeat_interval_ms: int
    broker_session_timeout_ms: int
    metadata_log_dir: Path
    metadata_log_segment_bytes: int
    metadata_max_retention_bytes: int
    metadata_log_max_snapshot_interval_ms: int
    metadata_log_max_record_bytes_between_snapshots: int

    @property
    def voter_ids(self) -> tuple[int, ...]:
        return tuple(voter.node_id for voter in self.voters)

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voter_ids

    @property
    def is_single_node(self) -> bool:
        """The quorum is this node alone: it elects itself, nothing goes over the network."""
        return self.voter_ids == (self.node_id,)

    @property
    def majority(self) -> int:
        """Votes (and replicas of a record) needed to win an election or commit; 0 if the
        voters are not known yet."""
        return len(self.voters) // 2 + 1 if self.voters else 0
