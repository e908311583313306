"""The command line's options, as they shape the plan (no run)."""

import pytest
from strom_bench import cli, plan


def _plan(*argv: str) -> plan.Plan:
    parser = cli.argument_parser()
    return cli.plan_for(parser.parse_args(list(argv)), parser)


def test_full_runs_p2_and_f1_with_everything_else() -> None:
    full = _plan("full")
    assert full == plan.FULL
    assert (full.p2_rounds, full.f1_rounds, full.f1_trials) == (3, 1, 10)


def test_only_p2f1_runs_their_rounds_and_quick_runs_them_once() -> None:
    full = _plan("full", "--only-p2f1")
    assert (full.rounds, full.p2_rounds, full.f1_rounds, full.f1_trials) == (3, 3, 1, 10)
    quick = _plan("quick", "--only-p2f1")
    assert (quick.rounds, quick.p2_rounds, quick.f1_rounds, quick.f1_trials) == (1, 1, 1, 3)
    assert _plan("quick").p2_rounds == _plan("quick").f1_rounds == 0


def test_full_runs_sp1_in_its_rounds_and_only_sp1_runs_it_alone() -> None:
    assert (_plan("full").sp1_rounds, _plan("full").rounds) == (3, 5)
    assert _plan("quick").sp1_rounds == 0  # a Spark JVM per side is past quick's budget
    full = _plan("full", "--only-sp1")
    assert (full.rounds, full.sp1_rounds) == (3, 3)
    quick = _plan("quick", "--only-sp1")
    assert (quick.rounds, quick.sp1_rounds, quick.sp1_records) == (1, 1, 300_000)
    assert quick.sp1_records // quick.sp1_max_offsets_per_trigger >= 3  # several batches
    more = _plan("quick", "--only-sp1", "--rounds", "3")
    assert (more.rounds, more.sp1_rounds) == (3, 3)


def test_full_runs_tx1_in_its_rounds_and_only_tx1_runs_it_alone() -> None:
    full = _plan("full")
    assert (full.tx1_rounds, full.tx1_transactions, full.tx1_warmup_transactions) == (3, 1000, 200)
    assert full.tx1_records_per_transaction == 100 and full.tx1_record_size == 1024
    assert "acks=all" in full.tx1_producer_properties  # a transactional producer's only acks
    assert _plan("quick").tx1_rounds == 1  # once per side, a smoke check (~15 s in all)
    only = _plan("full", "--only-tx1")
    assert (only.rounds, only.tx1_rounds) == (3, 3)
    quick = _plan("quick", "--only-tx1")
    assert (quick.rounds, quick.tx1_rounds, quick.tx1_transactions) == (1, 1, 200)
    more = _plan("quick", "--only-tx1", "--rounds", "3")
    assert (more.rounds, more.tx1_rounds) == (3, 3)


def test_the_broker_session_is_set_for_both_sides_at_once() -> None:
    changed = _plan(
        "full", "--broker-session-timeout-ms", "9000", "--broker-heartbeat-interval-ms", "2000"
    )
    assert changed.replication_settings()["broker.session.timeout.ms"] == "9000"
    assert changed.replication_settings()["broker.heartbeat.interval.ms"] == "2000"


def test_contradicting_options_are_refused() -> None:
    with pytest.raises(SystemExit):
        _plan("full", "--only-c2", "--only-p2f1")
    with pytest.raises(SystemExit):
        _plan("profile", "--only-p2f1")
    with pytest.raises(SystemExit):
        _plan("full", "--only-sp1", "--only-c2")
    with pytest.raises(SystemExit):
        _plan("profile", "--only-sp1")
    with pytest.raises(SystemExit):
        _plan("full", "--only-tx1", "--only-sp1")
    with pytest.raises(SystemExit):
        _plan("profile", "--only-tx1")
