"""The rolling restart's order and its min-ISR safety (Strimzi's KafkaRoller rules)."""

from __future__ import annotations

import random

from strom_operator.reconcile.model import (
    BrokerPod,
    Done,
    KafkaState,
    PartitionState,
    Restart,
    TopicPartition,
    Wait,
)
from strom_operator.reconcile.rolling import next_restart, restart_blockers

NEW, OLD = "rev-new", "rev-old"


def pod(broker_id: int, revision: str = OLD, *, ready: bool = True, **kw: bool) -> BrokerPod:
    return BrokerPod(
        broker_id=broker_id,
        name=f"c-broker-{broker_id}",
        exists=kw.get("exists", True),
        ready=ready,
        deleting=kw.get("deleting", False),
        revision=revision,
        claim_exists=True,
    )


def part(
    topic: str, index: int, replicas: tuple[int, ...], isr: tuple[int, ...], min_isr: int = 2
) -> PartitionState:
    return PartitionState(topic, index, replicas, isr, isr[0] if isr else None, min_isr)


def state(
    *partitions: PartitionState,
    controller: int | None = 1,
    live: frozenset[int] = frozenset({0, 1, 2}),
    reassigning: frozenset[TopicPartition] = frozenset(),
) -> KafkaState:
    return KafkaState("cid", controller, live, partitions, reassigning)


HEALTHY = state(
    part("t", 0, (0, 1, 2), (0, 1, 2)),
    part("t", 1, (1, 2, 0), (1, 2, 0)),
)


def test_a_spare_in_sync_replica_means_no_blocker() -> None:
    assert restart_blockers(0, HEALTHY) == []


def test_a_partition_at_its_min_isr_blocks_the_brokers_in_its_isr_only() -> None:
    s = state(part("orders", 3, (0, 1, 2), (0, 1)))
    blockers = restart_blockers(0, s)
    assert len(blockers) == 1
    assert (
        "orders-3" in blockers[0]
        and "[0,1]" in blockers[0]
        and "min.insync.replicas 2" in (blockers[0])
    )
    assert restart_blockers(1, s) != []
    # broker 2 is out of the ISR: restarting it changes nothing for the partition
    assert restart_blockers(2, s) == []


def test_a_partition_already_below_min_isr_blocks_every_broker_with_a_replica() -> None:
    # Strimzi: the replica out of the ISR may be the first to catch up
    s = state(part("t", 0, (0, 1, 2), (0,)))
    assert restart_blockers(0, s) != []
    assert restart_blockers(1, s) != []
    assert "already below its min ISR" in restart_blockers(2, s)[0]
    assert restart_blockers(3, s) == []


def test_replication_factor_at_or_below_min_isr_never_blocks() -> None:
    # RF 2 with min ISR 2 (or RF 1): any restart takes it below; Strimzi rolls anyway
    s = state(part("t", 0, (0, 1), (0, 1)), part("u", 0, (0,), (0,), min_isr=2))
    assert restart_blockers(0, s) == []
    assert restart_blockers(1, s) == []


def test_min_isr_one_with_a_single_in_sync_replica_blocks_it() -> None:
    s = state(part("t", 0, (0, 1, 2), (2,), min_isr=1))
    assert restart_blockers(2, s) != []
    assert restart_blockers(0, s) == []


def test_done_when_every_pod_runs_the_target_revision() -> None:
    pods = [pod(i, NEW) for i in range(3)]
    assert next_restart(pods, NEW, HEALTHY) == Done()
    assert next_restart(pods, NEW, None) == Done()


def test_non_controllers_by_id_then_the_controller_last() -> None:
    pods = [pod(0), pod(1), pod(2)]
    order = []
    for _ in range(3):
        decision = next_restart(pods, NEW, HEALTHY)
        assert isinstance(decision, Restart)
        order.append(decision.broker_id)
        pods[decision.broker_id] = pod(decision.broker_id, NEW)
    assert order == [0, 2, 1]
    assert next_restart(pods, NEW, HEALTHY) == Done()


def test_a_blocked_broker_is_skipped_for_the_next_stale_one() -> None:
    # broker 7 (no pod: lost) left the ISR at its min; broker 0 is in it, 2 holds nothing
    s = state(part("t", 0, (0, 1, 7), (0, 1)), controller=1)
    pods = [pod(0), pod(1), pod(2)]
    decision = next_restart(pods, NEW, s)
    assert isinstance(decision, Restart) and decision.broker_id == 2


def test_wait_with_the_blockers_when_every_stale_pod_is_blocked() -> None:
    s = state(part("t", 0, (0, 1, 7), (0, 1)))
    pods = [pod(0), pod(1), pod(2, NEW)]
    decision = next_restart(pods, NEW, s)
    assert isinstance(decision, Wait)
    assert "t-0" in decision.reason and "c-broker-0" in decision.reason


def test_wait_while_a_pod_is_not_ready_or_being_deleted() -> None:
    assert isinstance(next_restart([pod(0), pod(1, NEW, ready=False), pod(2)], NEW, HEALTHY), Wait)
    deleting = next_restart([pod(0), pod(1, deleting=True), pod(2)], NEW, HEALTHY)
    assert isinstance(deleting, Wait) and "deleted" in deleting.reason
    missing = next_restart([pod(0), pod(1, NEW, exists=False), pod(2)], NEW, HEALTHY)
    assert isinstance(missing, Wait)


def test_wait_until_the_restarted_brokers_replicas_are_back_in_sync() -> None:
    # broker 0 was just restarted: its pod is ready but it is still out of an ISR
    s = state(part("t", 0, (0, 1, 2), (1, 2)), part("t", 1, (1, 2, 0), (1, 2)))
    decision = next_restart([pod(0, NEW), pod(1), pod(2)], NEW, s)
    assert isinstance(decision, Wait) and "broker 0" in decision.reason


def test_wait_while_a_broker_is_not_registered_or_a_reassignment_runs() -> None:
    pods = [pod(0, NEW), pod(1), pod(2)]
    unregistered = state(*HEALTHY.partitions, live=frozenset({1, 2}))
    assert isinstance(next_restart(pods, NEW, unregistered), Wait)
    moving = state(*HEALTHY.partitions, reassigning=frozenset({TopicPartition("t", 0)}))
    decision = next_restart(pods, NEW, moving)
    assert isinstance(decision, Wait) and "reassignment" in decision.reason


def test_state_unknown_waits_while_some_pod_is_ready() -> None:
    decision = next_restart([pod(0), pod(1, ready=False), pod(2)], NEW, None)
    assert isinstance(decision, Wait) and "cannot be asked" in decision.reason


def test_a_cluster_that_never_came_up_restarts_every_stale_pod_in_turn() -> None:
    pods = [pod(i, ready=False) for i in range(3)]
    restarted = []
    for _ in range(3):
        decision = next_restart(pods, NEW, None)
        assert isinstance(decision, Restart)
        restarted.append(decision.broker_id)
        # the new pod starts, not ready yet (the same bad config would still fail)
        pods[decision.broker_id] = pod(decision.broker_id, NEW, ready=False)
    assert restarted == [0, 1, 2]
    assert next_restart(pods, NEW, None) == Done()


def test_a_stale_pod_stuck_not_ready_is_restarted_first_when_safe() -> None:
    # brokers 0 and 2 run; broker 1 crash-loops on the old template
    s = state(part("t", 0, (0, 1, 2), (0, 2)), controller=0, live=frozenset({0, 2}))
    decision = next_restart([pod(0), pod(1, ready=False), pod(2)], NEW, s)
    assert isinstance(decision, Restart) and decision.broker_id == 1


def test_roll_invariants_over_200_random_clusters() -> None:
    rng = random.Random(15)
    for _ in range(200):
        size = rng.randint(1, 5)
        live = frozenset(b for b in range(size) if rng.random() > 0.2)
        partitions = []
        for index in range(rng.randint(0, 10)):
            replicas = tuple(rng.sample(range(size), rng.randint(1, size)))
            isr = tuple(b for b in replicas if b in live and rng.random() > 0.2)
            partitions.append(part("t", index, replicas, isr, min_isr=rng.randint(1, 3)))
        controller = rng.choice(sorted(live)) if live else None
        s = state(*partitions, controller=controller, live=live)
        pods = [
            pod(b, rng.choice([OLD, NEW]), ready=b in live and rng.random() > 0.1)
            for b in range(size)
        ]
        decision = next_restart(pods, NEW, s)
        stale = {p.broker_id for p in pods if p.revision != NEW}
        if not stale:
            assert decision == Done()
            continue
        if isinstance(decision, Restart):
            assert decision.broker_id in stale
            assert restart_blockers(decision.broker_id, s) == [], "never below min ISR"
            chosen = pods[decision.broker_id]
            if chosen.ready and decision.broker_id == controller:
                others = stale - {controller}
                assert all(restart_blockers(b, s) for b in others), "the controller last"
        else:
            assert isinstance(decision, Wait) and decision.reason
