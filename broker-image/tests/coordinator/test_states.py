"""The group state machine walks only Kafka's transitions (ClassicGroupState's valid
previous states); anything else raises."""

from __future__ import annotations

import itertools

import pytest
from strom.coordinator import group as group_model
from strom.coordinator import states

S = states.GroupState
# Kafka's table, written out pair by pair rather than read back from ours.
KAFKA_TRANSITIONS = {
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
} | {(state, S.DEAD) for state in S}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)))
def test_every_pair_of_states_follows_kafkas_table(
    current: states.GroupState, target: states.GroupState
) -> None:
    group = group_model.Group("g", now_ms=0)
    group.restore_state(current, 0)
    if (current, target) in KAFKA_TRANSITIONS:
        group.transition(target, 5)
        assert (group.state, group.state_timestamp_ms) == (target, 5)
    else:
        with pytest.raises(states.InvalidTransition, match=f"{current.value} to {target.value}"):
            group.transition(target, 5)
        assert (group.state, group.state_timestamp_ms) == (current, 0)


def test_the_table_names_every_state() -> None:
    assert set(states.VALID_PREVIOUS) == set(S)
