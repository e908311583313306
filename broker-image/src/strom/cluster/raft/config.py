"""The Raft core's settings, named after Kafka's ``controller.quorum.*`` properties."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RaftConfig:
    # controller.quorum.election.timeout.ms: a voter without a leader starts an election
    # after a random time in [t, 2t)
    election_timeout_ms: int = 1000
    # controller.quorum.fetch.timeout.ms: a follower that has not heard from its leader for
    # this long starts an election; a leader not fetched from by a majority for 1.5 times
    # it resigns (check-quorum)
    fetch_timeout_ms: int = 2000
    # controller.quorum.election.backoff.max.ms: the most a lost election waits to retry
    election_backoff_max_ms: int = 1000
    # controller.quorum.retry.backoff.ms: before resending a request that got no answer
    # or an error; the unit of the exponential election back-off
    retry_backoff_ms: int = 20
    # controller.quorum.request.timeout.ms: a request not answered by then is resent
    request_timeout_ms: int = 2000
    # how long the leader holds a Fetch with nothing new before answering it
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 8 * 1024 * 1024
    snapshot_chunk_bytes: int = 1024 * 1024

    @property
    def check_quorum_timeout_ms(self) -> int:
        return self.fetch_timeout_ms * 3 // 2
