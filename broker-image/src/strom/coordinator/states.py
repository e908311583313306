"""The classic group's states and which transitions between them are valid.

The table is Kafka's (ClassicGroupState: the valid previous states of each state). A
transition outside it is a bug in the protocol code, so it raises rather than answering
a client with a made-up error.
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# state -> the states a group may be in to move to it
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    # the last member left or expired during a rebalance
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    # the members joined (or the rebalance timed out): waiting for the leader's assignment
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    # deleted (or unloaded) from any state
    GroupState.DEAD: frozenset(GroupState),
}


class InvalidTransition(Exception):
    """A group was asked to move between two states Kafka's table does not connect."""


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    if current not in VALID_PREVIOUS[target]:
        raise InvalidTransition(
            f"group {group_id}: no transition from {current.value} to {target.value}"
        )
