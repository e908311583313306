import json
from pathlib import Path

from strom_bench import figures, report
from strom_bench.figures import Summary


def test_format_value() -> None:
    assert report.format_value(93.634) == "93.6"
    assert report.format_value(1234.6) == "1,235"
    assert report.format_value(299580.5) == "299,580"
    assert report.format_value(6.456) == "6.46"
    assert report.format_value(0.4123) == "0.412"


def test_format_summary_and_ratio() -> None:
    assert report.format_summary(Summary.of([1.0, 2.0, 30.0])) == "2.00 (1.00-30.0)"
    assert report.format_summary(None) == "n/a"
    assert report.format_ratio(None) == "n/a"
    assert report.format_ratio(0.8249) == "0.82"


def _rounds() -> dict[str, list[dict[str, float]]]:
    return {
        "strom": [{"P1-1KiB": 90.0, "L1-p99": 10.0}, {"P1-1KiB": 100.0, "L1-p99": 30.0}],
        "kafka": [{"P1-1KiB": 50.0, "L1-p99": 10.0}, {"P1-1KiB": 50.0, "L1-p99": 10.0}],
    }


def test_markdown_table_rows() -> None:
    table = report.markdown_table(figures.build_figures(_rounds()))
    lines = table.splitlines()
    assert lines[0].startswith("| figure | unit | Strom median (min-max) |")
    assert lines[1].startswith("| --- |")
    assert len(lines) == 2 + len(figures.SPECS)
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in lines[2:]}
    assert rows["P1-1KiB"] == (
        "| P1-1KiB | MB/s | 95.0 (90.0-100) | 50.0 (50.0-50.0) | 1.90 | higher | >= 0.8: met |"
    )
    assert rows["L1-p99"] == (
        "| L1-p99 | ms | 20.0 (10.0-30.0) | 10.0 (10.0-10.0) | 2.00 | lower | <= 2: met |"
    )
    assert rows["P2"] == "| P2 | MB/s | n/a | n/a | n/a | higher | >= 0.8: n/a |"
    assert rows["F1"] == "| F1 | s | n/a | n/a | n/a | lower | <= 1, Strom < 2: n/a |"
    assert rows["C1"] == "| C1 | MB/s | n/a | n/a | n/a | higher | >= 1: n/a |"
    assert rows["L1-p50"].endswith("| lower |  |")


def test_reports_are_written(tmp_path: Path) -> None:
    results = figures.build_figures(_rounds())
    document = report.json_document(
        timestamp="20260101T000000Z",
        mode="quick",
        figures=results,
        machine={"cpu_model": "Test CPU", "logical_cpus": 2},
        settings={"rounds": 2, "kafka_version": "4.3.1"},
        errors=["[round 1/2 kafka] C1: exited with 1\nmore detail"],
        duration_s=12.34,
    )
    json_path, markdown_path = report.write_reports(tmp_path, "run", document, results)
    loaded = json.loads(json_path.read_text())
    assert loaded["figures"][0]["id"] == "P1-1KiB"
    assert set(loaded["figures"][0]) >= {"id", "unit", "strom", "kafka", "ratio", "better"}
    assert loaded["machine"]["cpu_model"] == "Test CPU"
    assert loaded["settings"]["rounds"] == 2
    assert loaded["duration_s"] == 12.3
    text = markdown_path.read_text()
    assert text.startswith("# Strom vs Apache Kafka 4.3.1: quick run 20260101T000000Z")
    assert "Test CPU, 2 logical CPUs" in text
    assert "| P1-1KiB | MB/s |" in text
    assert "- [round 1/2 kafka] C1: exited with 1\n" in text
    assert "more detail" not in text
