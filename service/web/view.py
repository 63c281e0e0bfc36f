"""The status page's content, shaped from plain data: how many probes are in each state, a
card per probe of one page, links to the other pages, a bar per SLO, a line per active alert.
Pure; service.web.routes reads the database and renders."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from sustain.probes.measure.sketch import MetricSketch
from sustain.service.db.status import STATE_ORDER, LatestRun, LocationRun, ProbeRow, ProbeState
from sustain.service.history.aggregate import Aggregate, StatValue, latency_stat
from sustain.service.history.windows import aligned_windows
from sustain.service.web.charts import AxisChart, budget_width, time_chart

PROBES_PER_PAGE = 100
MAX_PAGE = 1_000_000
"""Highest ?page= accepted: far beyond any deployment (SUSTAIN_MAX_PROBES is at most 10^6)."""
"""Probe rows on one page: the page's size and work stay bounded however many probes exist."""
ALERTS_SHOWN = 100
"""Active alerts listed at most (firing first); the rest are counted and linked."""
SLOS_SHOWN = 100
"""SLO bars shown at most, least budget left first; the rest are counted and linked."""


@dataclass(frozen=True, slots=True)
class ProbeCard:
    id: int
    name: str
    endpoint: str
    model: str
    schedule: str
    state: str
    """ok, failing, down, no data, degraded, waiting or disabled."""
    last_run: LatestRun | None
    availability: float | None
    """Successful / attempted requests over the last 24 h."""
    ttft_p99_ms: float | None
    e2e_p99_ms: float | None
    ttft_chart: AxisChart
    e2e_chart: AxisChart
    notes: list[str]
    """The newest run's figures beyond latency: cache hits, canaries, conversations, the
    server's queue (each where the run has it)."""
    locations: list[LocationRun] = field(default_factory=list)
    """A probe of several locations: its newest run in each, side by side."""
    ttft_p99_low: bool = False
    """Whether ttft_p99_ms is marked: too few samples for a 99 % confidence bound."""
    e2e_p99_low: bool = False
    all_levels: bool = False
    """A capacity probe: its figures include every level its searches loaded, those past
    capacity that failed the SLO too, and are labelled so."""


@dataclass(frozen=True, slots=True)
class SloBar:
    name: str
    objective: float
    compliance: float | None
    budget_remaining: float | None
    fill_percent: float
    state: str
    """healthy (over a quarter left), low, exhausted or no data."""


@dataclass(frozen=True, slots=True)
class AlertLine:
    alertname: str
    severity: str
    state: str
    subject: str
    summary: str
    since: datetime | None


@dataclass(frozen=True, slots=True)
class DayFigures:
    """A probe's last 24 h (or since its first run), from its windows' aggregates."""

    availability: float | None
    ttft_p99_ms: float | None
    e2e_p99_ms: float | None
    ttft_hourly: list[float | None]
    e2e_hourly: list[float | None]
    ttft_p99_low: bool = False
    """Whether the span's TTFT p99 had too few samples for a 99 % confidence bound."""
    e2e_p99_low: bool = False


CHART_POINTS = 24
MIN_WINDOW_S = 60
YOUNG_S = 2 * 3600
"""A probe whose first run in the last 24 h is younger than this gets a finer chart."""


def chart_windows(start: datetime, now: datetime, interval_s: int = 0
                  ) -> list[tuple[float, float]]:
    """The windows of a probe's chart over [start, now) (its first run in the last 24 h, or
    24 h ago), clipped to that span: hours, or, for a probe younger than YOUNG_S, CHART_POINTS
    windows of at least a minute and at least its interval (so each holds a run), aligned on
    multiples of their width: a new probe's chart draws from its first runs instead of
    staying one dot for an hour."""
    span = (now - start).total_seconds()
    width = 3600
    if span < YOUNG_S:
        width = max(MIN_WINDOW_S, interval_s,
                    math.ceil(span / CHART_POINTS / MIN_WINDOW_S) * MIN_WINDOW_S)
        width = math.ceil(width / MIN_WINDOW_S) * MIN_WINDOW_S
    first, edge = start.timestamp(), now.timestamp()
    return [(max(float(a), first), min(float(b), edge))
            for a, b in aligned_windows(start, now, width)]


def day_figures(hourly: Sequence[Aggregate]) -> DayFigures:
    """Each window's p99, and the whole span's availability and p99s: counts summed and
    sketches merged over the windows (never an average of their percentiles)."""
    attempts = sum(a.attempts for a in hourly)
    successes = sum(a.successes for a in hourly)
    per_hour: dict[str, list[float | None]] = {}
    day: dict[str, StatValue] = {}
    for metric in ("ttft", "e2e"):
        merged = MetricSketch()
        per_hour[metric] = []
        for agg in hourly:
            sketch = agg.sketch(metric)
            merged.merge(sketch)
            per_hour[metric].append(latency_stat(sketch, "p99").value if agg.runs else None)
        day[metric] = latency_stat(merged, "p99")
    return DayFigures(successes / attempts if attempts else None, day["ttft"].value,
                      day["e2e"].value, per_hour["ttft"], per_hour["e2e"],
                      day["ttft"].value is not None and day["ttft"].low_count,
                      day["e2e"].value is not None and day["e2e"].low_count)


def small_chart(spans: Sequence[tuple[float, float]], values: Sequence[float | None],
                label: str, now: float) -> AxisChart:
    """A card's chart of one p99 over its windows: time (UTC) across, ms up, both ticked; it
    spans only the time the probe has run (a young probe's chart covers minutes, and its
    ticks say so)."""
    start = spans[0][0] if spans else now - 86_400
    return time_chart([(label, [((a + b) / 2, v) for (a, b), v in zip(spans, values,
                                                                       strict=False)])],
                      start, now, f"{label} p99 (ms)", "no successful request yet",
                      width=260, height=84, small=True)


def probe_card(probe: ProbeRow, last: LatestRun | None, day: DayFigures,
               locations: list[LocationRun] | None = None,
               spans: Sequence[tuple[float, float]] = (), now: float = 0.0,
               capacity: bool = False) -> ProbeCard:
    """A probe's row; `capacity`: it searches for its capacity, so its day's figures take in
    the saturated levels too (the card says so)."""
    schedule = f"cron {probe.cron}" if probe.cron else f"every {probe.interval_s} s"
    return ProbeCard(probe.id, probe.name, probe.endpoint, probe.model, schedule, probe.state,
                     last, day.availability, day.ttft_p99_ms, day.e2e_p99_ms,
                     small_chart(spans, day.ttft_hourly, "TTFT", now),
                     small_chart(spans, day.e2e_hourly, "E2E", now),
                     [] if last is None else run_notes(last), locations or [],
                     day.ttft_p99_low, day.e2e_p99_low, capacity)


@dataclass(frozen=True, slots=True)
class StateCount:
    state: str
    count: int
    href: str
    """This page listing only probes in the state."""


@dataclass(frozen=True, slots=True)
class Paging:
    """Where one page of probes stands among all (in the state filtered on, if any)."""

    page: int
    """1-based."""
    pages: int
    total: int
    first: int
    """1-based position of the page's first probe (0 when the page is empty)."""
    last: int
    state: str | None
    previous_href: str | None
    next_href: str | None
    first_href: str
    last_href: str


def page_href(page: int, state: str | None) -> str:
    """The status page's URL for one page of probes (in one state)."""
    query = urlencode({k: v for k, v in (("state", state), ("page", page)) if v and v != 1})
    return ("/?" + query if query else "/") + "#probes"


def state_counts(counts: Mapping[ProbeState, int]) -> list[StateCount]:
    """Each state that has probes, worst first, with the link that lists just those."""
    return [StateCount(state, counts[state], page_href(1, state))
            for state in STATE_ORDER if counts.get(state)]


def offset_of(page: int, per_page: int = PROBES_PER_PAGE) -> int:
    return (page - 1) * per_page


def paging(page: int, total: int, state: str | None, per_page: int = PROBES_PER_PAGE,
           shown: int | None = None) -> Paging:
    """Page `page` of `total` probes; `shown` is how many rows it really holds (the counts
    and the rows are read apart, so they may differ by a probe created in between)."""
    pages = max(1, math.ceil(total / per_page))
    first = offset_of(page, per_page) + 1
    rows = min(per_page, max(0, total - first + 1)) if shown is None else shown
    return Paging(page, pages, total, first if rows else 0, first + rows - 1 if rows else 0,
                  state, page_href(min(page - 1, pages), state) if page > 1 else None,
                  page_href(page + 1, state) if page < pages else None,
                  page_href(1, state), page_href(pages, state))


def run_notes(run: LatestRun) -> list[str]:
    """Short lines on what a run measured beyond latency, where it measured it."""
    notes = []
    if run.cache_hit_ratio is not None:
        notes.append(f"cache hits {run.cache_hit_ratio:.0%}")
    quality = run.quality or {}
    if isinstance(quality.get("checked"), int) and isinstance(quality.get("passed"), int):
        notes.append(f"canaries {quality['passed']}/{quality['checked']} passed")
    sessions = run.sessions or {}
    if isinstance(sessions.get("conversations"), int) and \
            isinstance(sessions.get("completed"), int):
        notes.append(f"{sessions['completed']}/{sessions['conversations']} conversations "
                     "completed")
    if run.item_throughput is not None:
        notes.append(f"{run.item_throughput:,.1f} items/s")
    if run.rtf_p50 is not None:
        notes.append(f"real-time factor {run.rtf_p50:.3g} (median)")
    if run.retrieval_hit_rate is not None:
        notes.append(f"retrieval hit rate {run.retrieval_hit_rate:.0%}")
    if run.queue_max is not None:
        notes.append(f"server queue up to {run.queue_max:g}")
    capacity = run.capacity or {}
    if "max_passing" in capacity:
        best = capacity["max_passing"]
        unit = "users" if capacity.get("unit") == "concurrency" else "requests/s"
        notes.append("no load met the SLO" if best is None
                     else f"capacity under SLO: {best} {unit}")
    cost = (run.efficiency or {}).get("cost_per_million_good_tokens")
    if isinstance(cost, int | float):
        notes.append(f"{cost:,.4g} {(run.efficiency or {}).get('currency', '')} per million "
                     "good tokens")
    energy = (run.efficiency or {}).get("joules_per_good_token")
    if not isinstance(energy, int | float):
        energy = (run.efficiency or {}).get("joules_per_output_token")
        kind = "output"
    else:
        kind = "good"
    if isinstance(energy, int | float):
        source = (run.efficiency or {}).get("power_source") or "declared"
        notes.append(f"{energy:,.3g} J per {kind} token ({source} power)")
    return notes


def slo_bar(name: str, objective: float, compliance: float | None,
            budget_remaining: float | None) -> SloBar:
    if budget_remaining is None:
        state = "no data"
    elif budget_remaining <= 0:
        state = "exhausted"
    elif budget_remaining < 0.25:
        state = "low"
    else:
        state = "healthy"
    return SloBar(name, objective, compliance, budget_remaining, budget_width(budget_remaining),
                  state)


def worst_slos(bars: Sequence[SloBar], limit: int = SLOS_SHOWN) -> list[SloBar]:
    """The `limit` bars with the least error budget left (those without data after them)."""
    return sorted(bars, key=lambda b: (b.budget_remaining is None, b.budget_remaining or 0.0)
                  )[:limit]


def alert_line(alertname: str, severity: str, state: str, labels: Mapping[str, str],
               annotations: Mapping[str, str], since: datetime | None) -> AlertLine:
    subject = " ".join(f"{k}={v}" for k, v in sorted(labels.items())
                       if k not in ("alertname", "severity"))
    return AlertLine(alertname, severity, state, subject, annotations.get("summary", ""), since)
