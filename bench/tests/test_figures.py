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


def test_pending_figures_stay_pending() -> None:
    rounds = {"strom": [{"P2": 1.0}], "kafka": [{"P2": 1.0}]}
    by_id = {f.spec.id: f for f in figures.build_figures(rounds)}
    for pending in ("P2", "F1"):
        figure = by_id[pending]
        assert figure.spec.pending == figures.PENDING
        assert figure.strom is None and figure.kafka is None and figure.ratio is None
        assert figure.to_json()["pending"].startswith("needs replication")


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
        if spec.unit in ("MB/s", "records/s"):
            assert spec.better == HIGHER, spec.id
        else:
            assert spec.better == LOWER, spec.id
    # the broker's targets from the benchmark issue
    specs = figures.SPECS_BY_ID
    assert str(specs["P1-1KiB"].target) == ">= 0.8"
    assert str(specs["C1"].target) == ">= 1"
    assert str(specs["L1-p99"].target) == "<= 2"
    assert str(specs["M1-idle"].target) == "<= 0.5"
