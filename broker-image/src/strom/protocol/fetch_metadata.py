"""A fetch request's session id and epoch (KIP-227), Kafka's FetchMetadata: shared by the
broker that keeps sessions and the replica fetchers that use them.

Epoch 0 with session id 0 asks for a full fetch and a new session; epoch 0 with an id
closes that session and asks for a new one; epoch -1 asks for a full fetch without a
session (closing the named one, if any); any other epoch is an incremental fetch of the
named session, which must be the epoch the broker expects next.
"""

from __future__ import annotations

from dataclasses import dataclass

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_INT32_MAX = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: FINAL stays FINAL, and the epoch wraps to 1, never to 0."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


@dataclass(frozen=True, slots=True)
class FetchMetadata:
    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def next_incremental(self) -> FetchMetadata:
        return FetchMetadata(self.session_id, next_epoch(self.epoch))

    def next_close_existing(self) -> FetchMetadata:
        """A full fetch that closes this session and asks for a new one."""
        return FetchMetadata(self.session_id, INITIAL_EPOCH)


INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
