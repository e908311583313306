"""F1's arithmetic on FailoverProbe's lines: no processes."""

from pathlib import Path

import pytest
from strom_bench import failover
from strom_bench.failover import Ack, ProbeLog

KILL = 10_000_000  # microseconds


def _log(*lines: str) -> ProbeLog:
    log = ProbeLog()
    for line in lines:
        log.add_line(line)
    return log


def test_probe_lines_are_read() -> None:
    log = _log(
        "state 100 2 1,2,3 3",
        "ack 0 150 160",
        "error 1 170 30170 TimeoutException",
        "state 200 -1 - -1",
        "",
        "some JVM warning line",
    )
    assert log.acks == [Ack(0, 150, 160)]
    assert log.errors == ["error 1 170 30170 TimeoutException"]
    assert [(s.leader, s.isr, s.controller) for s in log.states] == [
        (2, (1, 2, 3), 3),
        (-1, (), -1),
    ]
    assert log.state is not None and log.state.time_us == 200


def test_isr_full_needs_a_leader_and_every_replica() -> None:
    assert not ProbeLog().isr_full(3)
    assert _log("state 1 2 1,2,3 1").isr_full(3)
    assert not _log("state 1 2 1,2,3 1", "state 2 2 2,3 1").isr_full(3)
    assert not _log("state 1 -1 1,2,3 1").isr_full(3)


def test_failover_is_the_ack_of_the_first_record_sent_after_the_kill() -> None:
    acks = [
        Ack(0, KILL - 20_000, KILL - 19_000),
        Ack(1, KILL - 10_000, KILL + 2_500_000),  # sent before the kill, retried afterwards
        Ack(2, KILL + 1, KILL + 2_500_100),  # the first one sent after it
        Ack(3, KILL + 10_000, KILL + 2_500_200),
    ]
    assert failover.failover_s(acks, KILL) == pytest.approx(2.5001)
    assert failover.failover_s(acks[:2], KILL) is None  # nothing sent since the kill acked yet
    assert failover.failover_s([], KILL) is None


def test_a_response_already_on_its_way_does_not_end_the_failover() -> None:
    # the dead leader's last answer is read just after the kill: not the failover's end
    log = _log(
        f"ack 0 {KILL - 10_000} {KILL - 5_000}",
        f"ack 1 {KILL - 1_000} {KILL + 3_000}",
        f"ack 2 {KILL + 5_000} {KILL + 1_600_000}",
    )
    assert not log.acked_since(KILL + 6_000)
    assert log.acked_since(KILL)
    assert failover.failover_s(log.acks, KILL) == pytest.approx(1.6)
    # the silence is measured between acks: from the late answer to the failover
    assert log.ack_gap_s(KILL) == pytest.approx(1.597)


def test_no_gap_before_the_failover() -> None:
    log = _log(f"ack 0 {KILL - 10_000} {KILL - 5_000}", f"ack 1 {KILL - 1_000} {KILL + 3_000}")
    assert log.ack_gap_s(KILL) is None


def test_reader_takes_only_whole_lines_as_they_come(tmp_path: Path) -> None:
    path = tmp_path / "probe.out"
    reader = failover.ProbeReader(path)
    assert reader.poll().acks == []  # not written yet
    path.write_bytes(b"ack 0 1 2\nack 1 3 ")
    assert [a.seq for a in reader.poll().acks] == [0]
    with path.open("ab") as f:
        f.write(b"4\nstate 5 1 1,2,3 2\n")
    log = reader.poll()
    assert log.acks == [Ack(0, 1, 2), Ack(1, 3, 4)]
    assert log.state is not None and log.state.controller == 2
