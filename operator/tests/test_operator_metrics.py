"""The operator's gauges of its resources' status: each condition as 1/0, a SparkJob's
state, gone when the resource is; and the process collector in its registry."""

from __future__ import annotations

from typing import Any

from strom_operator import metrics


def condition(kind: str, name: str, type_: str) -> float | None:
    labels = {"kind": kind, "namespace": "ns", "name": name, "type": type_}
    return metrics.REGISTRY.get_sample_value("strom_operator_conditions", labels)


def state(name: str, value: str) -> float | None:
    labels = {"namespace": "ns", "name": name, "state": value}
    return metrics.REGISTRY.get_sample_value("strom_operator_sparkjob_state", labels)


def status(*conditions: tuple[str, str], **fields: Any) -> dict[str, Any]:
    return {"conditions": [{"type": t, "status": s} for t, s in conditions], **fields}


def test_conditions_follow_the_status_written() -> None:
    metrics.record_status(
        "KafkaCluster", "ns", "c1", status(("Ready", "False"), ("Degraded", "True"))
    )
    assert condition("KafkaCluster", "c1", "Ready") == 0
    assert condition("KafkaCluster", "c1", "Degraded") == 1

    # a later status without Degraded: its series goes rather than keep its last value
    metrics.record_status("KafkaCluster", "ns", "c1", status(("Ready", "True")))
    assert condition("KafkaCluster", "c1", "Ready") == 1
    assert condition("KafkaCluster", "c1", "Degraded") is None


def test_a_sparkjob_shows_its_state_and_a_deleted_one_nothing() -> None:
    written = status(("Running", "True"), ("Completed", "False"), state="Running")
    metrics.record_status("SparkJob", "ns", "job", written)
    assert condition("SparkJob", "job", "Running") == 1
    assert state("job", "Running") == 1
    assert state("job", "Succeeded") == 0

    metrics.record_status("SparkJob", "ns", "job", status(("Completed", "True"), state="Succeeded"))
    assert (state("job", "Running"), state("job", "Succeeded")) == (0, 1)

    metrics.forget("SparkJob", "ns", "job")
    assert condition("SparkJob", "job", "Completed") is None
    assert state("job", "Succeeded") is None


def test_the_process_collector_is_registered() -> None:
    resident = metrics.REGISTRY.get_sample_value("process_resident_memory_bytes")
    assert resident is not None and resident > 0
    assert (metrics.REGISTRY.get_sample_value("process_open_fds") or 0) > 0
