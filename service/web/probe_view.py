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


@dataclass(frozen=True, slots=True)
class SloLine:
    name: str
    objective: float
    compliance: float | None
    budget_remaining: float | None


def _ms(value: Any) -> str:
    return f"{value:,.0f} ms" if isinstance(value, int | float) else "-"


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
    return RunLine(run_id, status, location, scheduled_for,
                   f"{availability:.2%}" if isinstance(availability, int | float) else "-",
                   _ms((summary.get("ttft_ms") or {}).get("p99")),
                   _ms((summary.get("e2e_ms") or {}).get("p99")), note[:200])


@dataclass(frozen=True, slots=True)
class ProbeCharts:
    latency: AxisChart
    e2e: AxisChart
    availability: AxisChart
    capacity: AxisChart | None
    """Capacity probes only."""


def probe_charts(spans: Sequence[tuple[float, float]], windows: Sequence[Aggregate],
                 capacity: Sequence[tuple[datetime, float | None]] | None, start: float,
                 end: float, capacity_unit: str) -> ProbeCharts:
    """The page's charts from each span's aggregate (percentiles from merged sketches, never
    averaged) and a capacity probe's runs (scheduled time, capacity found; None: no level
    met the SLO, drawn as 0)."""
    mids = [(a + b) / 2 for a, b in spans]
    series: dict[str, list[tuple[float, float | None]]] = {
        "ttft p50": [], "ttft p99": [], "e2e p50": [], "e2e p99": [], "availability": []}
    for mid, agg in zip(mids, windows, strict=False):
        for metric in ("ttft", "e2e"):
            sketch: MetricSketch = agg.sketch(metric)
            for stat in ("p50", "p99"):
                series[f"{metric} {stat}"].append(
                    (mid, latency_stat(sketch, stat).value if agg.runs else None))
        series["availability"].append(
            (mid, 100.0 * agg.successes / agg.attempts if agg.attempts else None))
    nothing = "No finished run in this window yet."
    latency = time_chart([("p50", series["ttft p50"]), ("p99", series["ttft p99"])], start,
                         end, "TTFT (ms)", nothing + " TTFT needs a successful request.")
    e2e = time_chart([("p50", series["e2e p50"]), ("p99", series["e2e p99"])], start, end,
                     "end-to-end latency (ms)", nothing)
    availability = time_chart([("availability", series["availability"])], start, end,
                              "availability (%)", nothing)
    found = None
    if capacity is not None:
        found = time_chart([("capacity", [(t.timestamp(), float(c or 0)) for t, c in capacity])],
                           start, end, f"capacity under SLO ({capacity_unit})",
                           "No capacity run in this window yet.")
    return ProbeCharts(latency, e2e, availability, found)


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
