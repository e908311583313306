import pytest
from strom_bench import figures
from strom_bench.figures import HIGHER, LOWER, Figure, FigureSpec, Summary, Target


def test_summary_of_odd_and_even_counts() -> None:
    odd = Summary.of([3.0, 1.0, 2.0])
    assert odd is not None
    assert (odd.median, odd.min, odd.max, odd.runs) == (2.0, 1.0, 3.0, (3.0, 1.0, 2.0))
    even = Summary.of([4.0, 1.0, 2.0, 10.0])
    assert even is not None
    assert even.median == 3.0


def test_summary_of_nothing_is_none() -> None:
    assert Summary.of([]) is None


def _figure(better: str, strom: list[float], kafka: list[float], target: Target | None) -> Figure:
    spec = FigureSpec("X", "MB/s", better, "x", target)
    return Figure(spec, Summary.of(strom), Summary.of(kafka))


def test_ratio_is_strom_median_over_kafka_median() -> None:
    figure = _figure(HIGHER, [80.0, 90.0, 100.0], [100.0, 50.0, 200.0], Target(">=", 0.8))
    assert figure.ratio == pytest.approx(0.9)
    assert figure.meets_target is True


def test_lower_is_better_target() -> None:
    figure = _figure(LOWER, [300.0], [100.0], Target("<=", 2.0))
    assert figure.ratio == pytest.approx(3.0)
    assert figure.meets_target is False


def test_no_ratio_without_both_sides_or_with_zero() -> None:
    assert _figure(HIGHER, [1.0], [], None).ratio is None
    assert _figure(HIGHER, [1.0], [0.0], Target(">=", 1.0)).ratio is None
    assert _figure(HIGHER, [1.0], [0.0], Target(">=", 1.0)).meets_target is None
    assert _figure(HIGHER, [1.0], [2.0], None).meets_target is None


def test_target_text() -> None:
    assert str(Target(">=", 0.8)) == ">= 0.8"
    assert str(Target("<=", 2.0)) == "<= 2"


def test_build_figures_from_rounds() -> None:
    rounds = {
        "strom": [{"P1-1KiB": 90.0, "M1-idle": 40.0}, {"P1-1KiB": 100.0}, {"P1-1KiB": 80.0}],
        "kafka": [{"P1-1KiB": 50.0, "M1-idle": 400.0}, {"P1-1KiB": 40.0}, {"P1-1KiB": 60.0}],
    }
    by_id = {f.spec.id: f for f in figures.build_figures(rounds)}
    assert [s.id for s in figures.SPECS] == list(by_id)
    p1 = by_id["P1-1KiB"]
    assert p1.strom is not None and p1.kafka is not None
    assert (p1.strom.median, p1.kafka.median, p1.ratio) == (90.0, 50.0, 1.8)
    # a figure only some rounds measured summarises those rounds
    idle = by_id["M1-idle"]
    assert idle.strom is not None and idle.strom.runs == (40.0,)
    assert idle.ratio == pytest.approx(0.1)
    # nothing measured: no summary, no ratio
    assert by_id["C1"].strom is None and by_id["C1"].ratio is None


def test_a_pending_figure_stays_pending() -> None:
    spec = FigureSpec("Y", "s", LOWER, "y", Target("<=", 1.0), pending="needs a feature")
    rounds = {"strom": [{"Y": 1.0}], "kafka": [{"Y": 1.0}]}
    (figure,) = figures.build_figures(rounds, [spec])
    assert figure.strom is None and figure.kafka is None and figure.ratio is None
    assert figure.to_json()["pending"] == "needs a feature"


def test_p2_and_f1_are_measured_with_their_targets() -> None:
    rounds = {
        "strom": [{"P2": 40.0}, {"F1": 1.5, "F1-broker": 1.5}, {"F1": 1.7, "F1-broker": 1.7}],
        "kafka": [{"P2": 50.0}, {"F1": 1.6, "F1-broker": 1.6}, {"F1": 5.0, "F1-controller": 5.0}],
    }
    by_id = {f.spec.id: f for f in figures.build_figures(rounds)}
    assert by_id["P2"].ratio == pytest.approx(0.8) and by_id["P2"].meets_target is True
    f1 = by_id["F1"]
    assert f1.strom is not None and f1.strom.runs == (1.5, 1.7)  # every trial is a run
    assert f1.ratio == pytest.approx(1.6 / 3.3) and f1.meets_target is True
    assert str(f1.spec.target) == "<= 1, Strom < 2"
    assert by_id["F1-controller"].strom is None  # no trial of that kind on Strom's side


def test_tx1_reports_records_and_transactions_per_second_without_a_target() -> None:
    rounds = {
        "strom": [{"TX1": 4000.0, "TX1-txns": 40.0}, {"TX1": 5000.0, "TX1-txns": 50.0}],
        "kafka": [{"TX1": 20000.0, "TX1-txns": 200.0}],
    }
    by_id = {f.spec.id: f for f in figures.build_figures(rounds)}
    assert by_id["TX1"].ratio == pytest.approx(0.225)
    assert by_id["TX1-txns"].ratio == pytest.approx(0.225)
    assert by_id["TX1"].meets_target is None  # issue 18 sets no target: the ratio is reported
    assert by_id["TX1-txns"].spec.unit == "transactions/s"


def test_an_absolute_bound_on_strom_can_miss_a_met_ratio() -> None:
    target = Target("<=", 1.0, strom_at_most=2.0)
    assert target.met_by(0.9, 1.9) is True
    assert target.met_by(0.9, 2.5) is False  # Kafka slower still: the ratio alone is met
    assert target.met_by(1.1, 1.5) is False
    assert _figure(LOWER, [2.5], [3.0], target).meets_target is False


def test_figure_json_has_the_documented_shape() -> None:
    figure = _figure(HIGHER, [1.0, 2.0, 3.0], [2.0, 2.0, 2.0], Target(">=", 0.8))
    data = figure.to_json()
    assert data["id"] == "X"
    assert data["unit"] == "MB/s"
    assert data["strom"] == {"median": 2.0, "min": 1.0, "max": 3.0, "runs": [1.0, 2.0, 3.0]}
    assert data["kafka"]["median"] == 2.0
    assert data["ratio"] == 1.0
    assert data["better"] == "higher"
    assert data["target"] == ">= 0.8"
    assert data["meets_target"] is True


def test_every_spec_is_well_formed() -> None:
    ids = [spec.id for spec in figures.SPECS]
    assert len(ids) == len(set(ids))
    assert {spec.better for spec in figures.SPECS} == {HIGHER, LOWER}
    for spec in figures.SPECS:
        if spec.unit in ("MB/s", "records/s", "transactions/s"):
            assert spec.better == HIGHER, spec.id
        else:
            assert spec.better == LOWER, spec.id
    # the broker's targets from the benchmark issue
    specs = figures.SPECS_BY_ID
    assert str(specs["P1-1KiB"].target) == ">= 0.8"
    assert str(specs["C1"].target) == ">= 1"
    assert str(specs["L1-p99"].target) == "<= 2"
    assert str(specs["M1-idle"].target) == "<= 0.5"
    assert str(specs["P2"].target) == ">= 0.8"
    assert str(specs["F1"].target) == "<= 1, Strom < 2"
