"""A PNG of the run: throughput, latency percentiles, memory, failover, the Spark pipeline
and the transactional producer, Strom beside Kafka.

Bars are medians; the whiskers span min to max of the runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: render straight to a file

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from strom_bench.figures import Figure, Summary

PANELS: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    ("Throughput (higher is better)", "MB/s", ("P1-1KiB", "P1-100B", "P2", "C1"), False),
    ("Latency at 5,000 msg/s (lower is better)", "ms", ("L1-p50", "L1-p99", "L1-p99.9"), True),
    ("Resident memory (lower is better)", "MiB", ("M1-idle", "M1-P1", "M1-1000p"), False),
    ("Failover, RF 3 (lower is better)", "s", ("F1", "F1-broker", "F1-controller"), False),
    ("Spark clickstream (higher is better)", "records/s", ("SP1",), False),
    ("Transactional produce (higher is better)", "records/s", ("TX1",), False),
)  # fmt: skip
COLOURS = {"Strom": "#1f77b4", "Kafka": "#7f7f7f"}
BAR_WIDTH = 0.38


def _bars(axes: Axes, ids: Sequence[str], by_id: dict[str, Figure], log_scale: bool) -> None:
    for offset, (side, attribute) in zip(
        (-BAR_WIDTH / 2, BAR_WIDTH / 2), (("Strom", "strom"), ("Kafka", "kafka")), strict=True
    ):
        summaries: list[Summary | None] = [
            getattr(by_id[i], attribute) if i in by_id else None for i in ids
        ]
        xs = [n + offset for n, s in enumerate(summaries) if s is not None]
        present = [s for s in summaries if s is not None]
        if not present:
            continue
        medians = [s.median for s in present]
        errors = [
            [s.median - s.min for s in present],
            [s.max - s.median for s in present],
        ]
        axes.bar(xs, medians, BAR_WIDTH, yerr=errors, capsize=3, label=side, color=COLOURS[side])
        for x, median in zip(xs, medians, strict=True):
            axes.annotate(
                f"{median:.3g}", (x, median), ha="center", va="bottom", fontsize=7,
                xytext=(0, 2), textcoords="offset points",
            )  # fmt: skip
    axes.set_xticks(range(len(ids)), list(ids))
    if log_scale:
        axes.set_yscale("log")


def write_plot(path: Path, figures: Sequence[Figure], title: str) -> Path:
    by_id = {figure.spec.id: figure for figure in figures if not figure.spec.pending}
    fig, all_axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 4.8))
    for axes, (panel_title, unit, ids, log_scale) in zip(all_axes, PANELS, strict=True):
        _bars(axes, ids, by_id, log_scale)
        axes.set_title(panel_title, fontsize=10)
        axes.set_ylabel(unit)
        if axes.get_legend_handles_labels()[0]:  # a panel nothing measured has no legend
            axes.legend(fontsize=8)
        axes.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
