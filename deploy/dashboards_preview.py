"""Render Strom's Grafana dashboards from a Prometheus into PNG plots (Grafana does not run
here): one PNG per dashboard of charts/strom/dashboards/, one plot per panel, each query
of the panel evaluated over a time window through Prometheus's HTTP API.

    python deploy/dashboards_preview.py --prometheus http://localhost:9090 [--minutes 30]

`make dashboards-preview` runs it (PROMETHEUS=... for a running Prometheus, e.g. docker
compose's; without it, e2e/test_dashboards.py renders from its dev cluster's Prometheus).
Template variables ($job, $topic, ...) take their "All" value (.*), $__rate_interval the
--rate-interval given. Matplotlib comes from bench/requirements.lock.

e2e/test_dashboards.py uses the loading and querying half of this module too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
DASHBOARDS_DIR = REPOSITORY / "charts" / "strom" / "dashboards"
DEFAULT_OUT = REPOSITORY / ".strom-data" / "dashboards-preview"
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    dashboard: str  # the file's stem, e.g. cluster-overview
    title: str
    kind: str  # timeseries, stat, table
    unit: str
    queries: tuple[Query, ...]


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    points: list[tuple[float, float]]  # (unix time, value)


class PromQLError(Exception):
    """Prometheus refused a query (a parse or evaluation error)."""


def load_dashboards(directory: Path = DASHBOARDS_DIR) -> dict[str, dict[str, Any]]:
    """Each dashboard JSON by its file's stem, in name order."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}


def _walk(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        if panel.get("type") == "row":
            yield from _walk(panel.get("panels", []))  # a collapsed row holds its panels
        else:
            yield panel


def panels(stem: str, dashboard: dict[str, Any]) -> list[Panel]:
    """The dashboard's panels (rows left out, the panels of collapsed rows in)."""
    return [
        Panel(
            dashboard=stem,
            title=panel["title"],
            kind=panel["type"],
            unit=panel.get("fieldConfig", {}).get("defaults", {}).get("unit", ""),
            queries=tuple(
                Query(target["expr"], target.get("legendFormat", ""))
                for target in panel.get("targets", [])
            ),
        )
        for panel in _walk(dashboard["panels"])
    ]


def expand(expr: str, rate_interval: str) -> str:
    """Grafana's variables as a dashboard showing "All" would send them."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in ("__rate_interval", "__interval"):
            return rate_interval
        return ".*"

    return _VARIABLE.sub(value, expr)


def legend(template: str, labels: dict[str, str]) -> str:
    if not template:
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "value"
    return _LEGEND.sub(lambda m: labels.get(m.group(1), ""), template)


class Prometheus:
    """The few calls of Prometheus's HTTP API (v1) the preview and the test make."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str, **params: str) -> Any:
        # queries go as a form (POST): long expressions do not fit a URL
        body = urllib.parse.urlencode(params).encode() if params else None
        request = urllib.request.Request(f"{self.url}{path}", data=body)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as error:  # 400/422: a bad query, with its message
            answer = json.load(error)
        if answer.get("status") != "success":
            raise PromQLError(f"{answer.get('errorType')}: {answer.get('error')}")
        return answer["data"]

    def query(self, expr: str) -> list[Series]:
        """An instant query at the latest time."""
        data = self._get("/api/v1/query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            when, value = data["result"]
            return [Series({}, [(float(when), float(value))])]
        return [
            Series(item["metric"], [(float(item["value"][0]), float(item["value"][1]))])
            for item in data["result"]
        ]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        data = self._get(
            "/api/v1/query_range", query=expr, start=str(start), end=str(end), step=str(step)
        )
        return [
            Series(item["metric"], [(float(t), float(v)) for t, v in item["values"]])
            for item in data["result"]
        ]

    def alerts(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/alerts")["alerts"])

    def rule_groups(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/rules")["groups"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/targets")["activeTargets"])


def evaluate(
    prometheus: Prometheus, panel: Panel, start: float, end: float, rate_interval: str
) -> list[list[Series]]:
    """Every query of the panel over [start, end], about 200 points each."""
    step = max(1.0, math.ceil((end - start) / 200))
    return [
        prometheus.query_range(expand(query.expr, rate_interval), start, end, step)
        for query in panel.queries
    ]


def _with_gaps(points: list[tuple[float, float]]) -> tuple[list[datetime], list[float]]:
    """The points as a line that breaks where samples are missing (a broker down)."""
    steps = sorted(b[0] - a[0] for a, b in itertools.pairwise(points)) or [0.0]
    step = steps[len(steps) // 2]
    times: list[datetime] = []
    values: list[float] = []
    for (t, v), following in itertools.zip_longest(points, points[1:]):
        times.append(datetime.fromtimestamp(t))
        values.append(v)
        if following is not None and following[0] - t > 1.5 * step:
            times.append(datetime.fromtimestamp(t + step))
            values.append(math.nan)
    return times, values


def render(
    title: str,
    shown: list[tuple[Panel, list[list[Series]]]],
    window: tuple[float, float],
    out: Path,
) -> None:
    """One PNG: a grid of plots, one per panel, each series a line with its legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    columns = 3
    rows = math.ceil(len(shown) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(6 * columns, 3.2 * rows), squeeze=False)
    figure.suptitle(title, fontsize=16, fontweight="bold")
    for ax in axes.flat[len(shown) :]:
        ax.set_visible(False)
    for ax, (panel, results) in zip(axes.flat, shown, strict=False):
        ax.set_title(panel.title, fontsize=10, loc="left")
        lines = 0
        last = None
        for query, result in zip(panel.queries, results, strict=True):
            for series in result[:12]:  # a readable number of lines
                times, values = _with_gaps(series.points)
                ax.plot(times, values, linewidth=1.2, label=legend(query.legend, series.labels))
                lines += 1
                last = values[-1] if values else last
        if lines == 0:
            ax.text(
                0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey"
            )
        elif panel.kind == "stat" and last is not None:
            ax.set_title(f"{panel.title}: {last:g}", fontsize=10, loc="left")
        if 0 < lines <= 8:
            ax.legend(fontsize=6, loc="upper left")
        ax.set_xlim(datetime.fromtimestamp(window[0]), datetime.fromtimestamp(window[1]))
        ax.set_ylabel(panel.unit, fontsize=7)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))  # type: ignore[no-untyped-call]
        ax.grid(alpha=0.3)
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=80)
    plt.close(figure)


def render_all(
    prometheus: Prometheus, start: float, end: float, rate_interval: str, out_dir: Path
) -> list[Path]:
    """A PNG per dashboard into out_dir; returns their paths."""
    written = []
    for stem, dashboard in load_dashboards().items():
        shown = [
            (panel, evaluate(prometheus, panel, start, end, rate_interval))
            for panel in panels(stem, dashboard)
        ]
        path = out_dir / f"{stem}.png"
        render(dashboard["title"], shown, (start, end), path)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prometheus", required=True, help="e.g. http://localhost:9090")
    parser.add_argument("--minutes", type=float, default=30, help="the window, up to now")
    parser.add_argument(
        "--rate-interval", default="1m", help="$__rate_interval (4 scrape intervals or more)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    end = time.time()
    try:
        written = render_all(
            Prometheus(args.prometheus), end - args.minutes * 60, end, args.rate_interval, args.out
        )
    except (OSError, PromQLError) as error:
        print(f"dashboards_preview: {args.prometheus}: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
