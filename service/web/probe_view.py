"""A probe's page, shaped from plain data (pure): what it measures and how often, its latency
and availability over a window as charts with axes, its capacity over time, the SLOs that
cover it, its drift, and its newest runs with links to their pages. service.web.routes reads
the database and renders probe.html."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sustain.probes.measure.sketch import MetricSketch
from sustain.service.history.aggregate import Aggregate, latency_stat
from sustain.service.history.windows import aligned_windows
from sustain.service.web.charts import AxisChart, time_chart

WINDOWS: dict[str, int] = {"1h": 3600, "24h": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400}
"""The spans a probe page offers, seconds."""
DEFAULT_WINDOW = "24h"
CHART_POINTS = 48
"""Windows of a probe page's charts at most: fine enough to see a change, few enough to read
cheaply from hourly and daily rollups."""
RUNS_SHOWN = 50
CHART_METRICS = ("ttft", "tpot", "itl", "e2e")
"""The latency sketches a probe page charts (ms): first token, time per output token, the
gaps between tokens, the whole request."""
LOW_COUNT_MARK = "*"
"""What follows a percentile computed from too few samples for a 99 % confidence bound, as
`sustain probe`'s tables mark it (probes/report_tables.py), explained by its
LOW_COUNT_CAPTION."""


def chart_spans(start: datetime, now: datetime, interval_s: int) -> list[tuple[float, float]]:
    """[a, b) windows (epoch s) over [start, now): about CHART_POINTS of them, each at least
    a minute and at least the probe's interval (so each can hold a run), whole hours once
    they are an hour or more (so they come from hourly rollups), aligned on multiples of
    their width and clipped to [start, now)."""
    span = max((now - start).total_seconds(), 60.0)
    width = max(60, interval_s, math.ceil(span / CHART_POINTS / 60) * 60)
    width = math.ceil(width / 3600) * 3600 if width >= 3600 else math.ceil(width / 60) * 60
    first, edge = start.timestamp(), now.timestamp()
    return [(max(float(a), first), min(float(b), edge))
            for a, b in aligned_windows(start, now, width)]


@dataclass(frozen=True, slots=True)
class RunLine:
    id: int
    status: str
    location: str
    scheduled_for: datetime
    availability: str
    ttft_p99: str
    e2e_p99: str
    note: str
    """The run's error, or what it found (its capacity), in a few words."""
    low_count: bool = False
    """Whether a p99 shown is marked: computed from too few samples to bound it."""


@dataclass(frozen=True, slots=True)
class SloLine:
    name: str
    objective: float
    compliance: float | None
    budget_remaining: float | None


def _ms(value: Any) -> str:
    return f"{value:,.0f} ms" if isinstance(value, int | float) else "-"


def _p99(distribution: Any) -> tuple[str, bool]:
    """A stored distribution's p99 in ms and whether it is marked (LOW_COUNT_MARK): the run's
    summary lists the percentiles it had too few samples to bound in `low_count`."""
    if not isinstance(distribution, Mapping):
        return "-", False
    text = _ms(distribution.get("p99"))
    low = text != "-" and "p99" in (distribution.get("low_count") or ())
    return text + (LOW_COUNT_MARK if low else ""), low


def run_line(run_id: int, status: str, location: str, scheduled_for: datetime,
             summary: Mapping[str, Any] | None, error: str | None) -> RunLine:
    """One row of the runs table from a run's columns and stored summary."""
    summary = summary or {}
    availability = summary.get("availability")
    note = error or ""
    capacity = summary.get("capacity")
    if not note and isinstance(capacity, Mapping):
        best = capacity.get("max_passing")
        unit = "users" if capacity.get("unit") == "concurrency" else "requests/s"
        note = "no load met the SLO" if best is None else f"capacity {best} {unit}"
    errors = summary.get("errors")
    if not note and isinstance(errors, Mapping) and errors:
        note = ", ".join(f"{k} {v}" for k, v in sorted(errors.items(), key=lambda kv: -kv[1]))
    ttft, ttft_low = _p99(summary.get("ttft_ms"))
    e2e, e2e_low = _p99(summary.get("e2e_ms"))
    return RunLine(run_id, status, location, scheduled_for,
                   f"{availability:.2%}" if isinstance(availability, int | float) else "-",
                   ttft, e2e, note[:200], ttft_low or e2e_low)


@dataclass(frozen=True, slots=True)
class ProbeCharts:
    latency: AxisChart
    """TTFT."""
    tpot: AxisChart
    itl: AxisChart
    e2e: AxisChart
    availability: AxisChart
    capacity: AxisChart | None
    """Capacity probes only."""


LATENCY_CHARTS = {
    "ttft": ("TTFT (ms)", "No request in this window succeeded."),
    "tpot": ("TPOT (ms)", "No successful request in this window had two output tokens or "
                          "more."),
    "itl": ("ITL (ms)", "No successful request in this window streamed two tokens or more."),
    "e2e": ("end-to-end latency (ms)", "No request in this window succeeded."),
}
"""Each latency chart's y axis, and why it is empty when the window has finished runs."""


def probe_charts(spans: Sequence[tuple[float, float]], windows: Sequence[Aggregate],
                 capacity: Sequence[tuple[datetime, float | None]] | None, start: float,
                 end: float, capacity_unit: str) -> ProbeCharts:
    """The page's charts from each span's aggregate (percentiles from merged sketches, never
    averaged) and a capacity probe's runs (scheduled time, capacity found; None: no level
    met the SLO, drawn as 0)."""
    mids = [(a + b) / 2 for a, b in spans]
    series: dict[str, list[tuple[float, float | None]]] = {"availability": []}
    for mid, agg in zip(mids, windows, strict=False):
        for metric in CHART_METRICS:
            sketch: MetricSketch = agg.sketch(metric)
            for stat in ("p50", "p99"):
                series.setdefault(f"{metric} {stat}", []).append(
                    (mid, latency_stat(sketch, stat).value if agg.runs else None))
        series["availability"].append(
            (mid, 100.0 * agg.successes / agg.attempts if agg.attempts else None))
    nothing = "No finished run in this window yet."
    ran = any(agg.runs for agg in windows)
    latency = {metric: time_chart([("p50", series.get(f"{metric} p50", [])),
                                   ("p99", series.get(f"{metric} p99", []))], start, end,
                                  label, why if ran else nothing)
               for metric, (label, why) in LATENCY_CHARTS.items()}
    availability = time_chart([("availability", series["availability"])], start, end,
                              "availability (%)", nothing)
    found = None
    if capacity is not None:
        found = time_chart([("capacity", [(t.timestamp(), float(c or 0)) for t, c in capacity])],
                           start, end, f"capacity under SLO ({capacity_unit})",
                           "No capacity run in this window yet.")
    return ProbeCharts(latency["ttft"], latency["tpot"], latency["itl"], latency["e2e"],
                       availability, found)


def describe_profile(profile: Mapping[str, Any]) -> str:
    """A load profile in a few words: `constant 2 req/s for 5 s`, `capacity 1 to 16 users`."""
    kind = str(profile.get("kind", "?"))
    duration = profile.get("duration_s")
    for_s = f" for {duration:g} s" if isinstance(duration, int | float) else ""
    if kind in ("constant", "poisson") and isinstance(profile.get("rate"), int | float):
        return f"{kind} {profile['rate']:g} req/s{for_s}"
    if kind == "concurrency" and isinstance(profile.get("users"), int):
        return f"{profile['users']} concurrent users{for_s}"
    if kind == "capacity":
        low, high = profile.get("minimum"), profile.get("maximum")
        unit = "req/s" if profile.get("unit") == "rate" else "users"
        return f"capacity search {low} to {high} {unit}, {duration:g} s a level" \
            if isinstance(duration, int | float) else f"capacity search {low} to {high} {unit}"
    return kind + for_s


def thresholds_text(ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None,
                    ttfo_ms: float | None = None) -> str:
    """A probe's goodput thresholds in words: `TTFT <= 200 ms, E2E <= 2000 ms` ("" for none)."""
    return ", ".join(f"{label} <= {value:g} ms" for label, value in (
        ("TTFT", ttft_ms), ("TPOT", tpot_ms), ("TTFO", ttfo_ms), ("E2E", e2e_ms))
        if value is not None)


def state_text(runs: Sequence[RunLine]) -> str:
    """What the newest of a probe's runs (newest first) is doing."""
    if not runs:
        return "no run yet"
    return f"newest run {runs[0].status}, scheduled {runs[0].scheduled_for:%H:%M:%S} UTC"
