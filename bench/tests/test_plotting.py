from pathlib import Path

import pytest
from strom_bench import figures

pytest.importorskip("matplotlib", reason="bench/requirements.lock is not installed")


def test_plot_is_a_png(tmp_path: Path) -> None:
    from strom_bench import plotting

    rounds = {
        "strom": [{"P1-1KiB": 90.0, "L1-p99": 10.0, "M1-idle": 40.0}, {"P1-1KiB": 95.0}],
        "kafka": [{"P1-1KiB": 50.0, "L1-p99": 12.0}],
    }
    path = plotting.write_plot(tmp_path / "plot.png", figures.build_figures(rounds), "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
