"""The run's report: a JSON document other tools can read and a Markdown table for people."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from strom_bench.figures import Figure, Summary

PENDING = "pending"
NOT_MEASURED = "n/a"


def format_value(value: float) -> str:
    """Three or so significant digits, thousands separated: 93.6, 1,234, 0.412."""
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def format_summary(summary: Summary | None) -> str:
    """`median (min-max)`, the way the table quotes one side."""
    if summary is None:
        return NOT_MEASURED
    return (
        f"{format_value(summary.median)} ({format_value(summary.min)}-{format_value(summary.max)})"
    )


def format_ratio(ratio: float | None) -> str:
    return NOT_MEASURED if ratio is None else f"{ratio:.2f}"


def target_cell(figure: Figure) -> str:
    if figure.spec.pending:
        return figure.spec.pending
    if figure.spec.target is None:
        return ""
    verdict = {True: "met", False: "missed", None: NOT_MEASURED}[figure.meets_target]
    return f"{figure.spec.target}: {verdict}"


def markdown_table(figures: Sequence[Figure]) -> str:
    rows = [
        "| figure | unit | Strom median (min-max) | Kafka median (min-max) "
        "| Strom/Kafka | better | target |",
        "| --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for figure in figures:
        if figure.spec.pending:
            strom = kafka = PENDING
        else:
            strom, kafka = format_summary(figure.strom), format_summary(figure.kafka)
        cells = [
            figure.spec.id,
            figure.spec.unit,
            strom,
            kafka,
            format_ratio(figure.ratio),
            figure.spec.better,
            target_cell(figure),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def json_document(
    *,
    timestamp: str,
    mode: str,
    figures: Sequence[Figure],
    machine: Mapping[str, Any],
    settings: Mapping[str, Any],
    errors: Sequence[str],
    duration_s: float,
) -> dict[str, Any]:
    return {
        "timestamp": timestamp,
        "mode": mode,
        "figures": [figure.to_json() for figure in figures],
        "machine": dict(machine),
        "settings": dict(settings),
        "errors": list(errors),
        "duration_s": round(duration_s, 1),
    }


def markdown_document(document: Mapping[str, Any], figures: Sequence[Figure]) -> str:
    machine = document["machine"]
    settings = document["settings"]
    lines = [
        f"# Strom vs Apache Kafka {settings.get('kafka_version', '')}: "
        f"{document['mode']} run {document['timestamp']}",
        "",
        f"Machine: {machine.get('cpu_model', '?')}, {machine.get('logical_cpus', '?')} logical "
        f"CPUs, {machine.get('memory_gib', '?')} GiB RAM, {machine.get('os', '?')}, "
        f"load average {machine.get('load_average_start', '?')} at start and "
        f"{machine.get('load_average_end', '?')} at the end. "
        f"Strom at commit {machine.get('strom_commit', '?')}.",
        "",
        f"Medians of {settings.get('rounds', '?')} runs per side, alternating Strom and Kafka "
        f"(A B A B); ratios are Strom's median over Kafka's. The run took "
        f"{document['duration_s']:.0f} s.",
        "",
        markdown_table(figures),
    ]
    if document["errors"]:
        lines += ["Errors (the affected runs are left out of the figures):", ""]
        lines += [f"- {error.splitlines()[0]}" for error in document["errors"]]
        lines.append("")
    return "\n".join(lines)


def write_reports(
    results_dir: Path, stem: str, document: Mapping[str, Any], figures: Sequence[Figure]
) -> tuple[Path, Path]:
    results_dir.mkdir(parents=True, exist_ok=True)
    json_path = results_dir / f"{stem}.json"
    markdown_path = results_dir / f"{stem}.md"
    json_path.write_text(json.dumps(document, indent=2) + "\n")
    markdown_path.write_text(markdown_document(document, figures))
    return json_path, markdown_path
