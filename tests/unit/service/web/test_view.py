"""The status page's pieces: sparklines, budget bars, probe states and alert lines."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from sustain.probes.measure.percentiles import quantile
from sustain.probes.measure.sketch import MetricSketch
from sustain.service.db.status import LatestRun, ProbeRow
from sustain.service.history.aggregate import Aggregate, Counts
from sustain.service.web.charts import budget_width, sparkline
from sustain.service.web.view import (
    alert_line,
    chart_windows,
    day_figures,
    down_states,
    probe_state,
    run_notes,
    slo_bar,
)

PROBE = ProbeRow(1, "chat", "vllm", "m", True, 60, None, {})
RUN = LatestRun(7, "succeeded", datetime(2026, 12, 3, tzinfo=UTC), None)


def test_sparkline_scales_high_values_up_and_breaks_on_gaps() -> None:
    chart = sparkline([10.0, 20.0, None, 30.0, None, 15.0, 25.0], width=100, height=20, pad=0)
    assert (chart.low, chart.high) == (10.0, 30.0)
    assert len(chart.segments) == 2
    first = [tuple(map(float, p.split(","))) for p in chart.segments[0].split()]
    assert first == [(0.0, 20.0), (16.7, 10.0)], "low at the bottom, higher is up"
    assert chart.dots == [(50.0, 0.0)], "a value standing alone is a dot"
    assert sparkline([None, None]).segments == []


def test_budget_bar_fill_and_state() -> None:
    assert budget_width(0.5) == 50.0
    assert budget_width(-0.2) == 0.0
    assert budget_width(None) == 0.0
    assert slo_bar("a", 0.99, 0.995, 0.5).state == "healthy"
    assert slo_bar("a", 0.99, 0.991, 0.1).state == "low"
    assert slo_bar("a", 0.99, 0.98, -1.0).state == "exhausted"
    assert slo_bar("a", 0.99, None, None).state == "no data"


def test_probe_state_prefers_firing_down_alerts_over_the_last_run() -> None:
    down = down_states([("SustainEndpointDown", "firing", {"probe": "chat"}),
                        ("SustainNoData", "pending", {"probe": "embed"})])
    assert down == {"chat": "down"}
    assert probe_state(PROBE, RUN, down) == "down"
    assert probe_state(PROBE, RUN, {}) == "ok"
    assert probe_state(PROBE, None, {}) == "waiting"
    failed = LatestRun(8, "failed", RUN.scheduled_for, None)
    assert probe_state(PROBE, failed, {}) == "failing"
    off = ProbeRow(2, "off", "vllm", "m", False, 60, None, {})
    assert probe_state(off, RUN, down) == "disabled"


def test_alert_line_names_its_subject() -> None:
    line = alert_line("SustainSloBurnRate", "page", "firing",
                      {"alertname": "SustainSloBurnRate", "slo": "chat", "tier": "page_fast",
                       "severity": "page"}, {"summary": "burning"}, None)
    assert line.subject == "slo=chat tier=page_fast"
    assert line.summary == "burning"


def test_day_figures_merge_the_hours_instead_of_averaging_their_percentiles() -> None:
    rng = random.Random(3)
    hours = []
    values: list[float] = []
    for hour in range(24):
        agg = Aggregate()
        if hour % 5 == 4:
            hours.append(agg)  # an hour without runs
            continue
        batch = [rng.lognormvariate(4 + (hour == 10), 0.3) for _ in range(50)]
        values += batch
        agg.add_counts(Counts(runs=1, attempts=50, successes=45, good=45, good_measured_s=1,
                              output_tokens=0, measured_s=1))
        agg.add_sketch("ttft", MetricSketch.of(batch).to_bytes())
        hours.append(agg)
    day = day_figures(hours)
    assert day.availability == 0.9
    assert day.ttft_p99_ms is not None
    exact = quantile(sorted(values), 0.99)
    assert abs(day.ttft_p99_ms - exact) <= 0.01 * exact
    assert day.ttft_hourly[4] is None
    assert day.ttft_hourly[10] is not None
    assert day.e2e_p99_ms is None
    assert day.e2e_hourly == [None] * 24


def test_run_notes_say_what_the_run_measured_beyond_latency() -> None:
    assert run_notes(RUN) == []
    run = LatestRun(8, "succeeded", datetime(2026, 12, 4, tzinfo=UTC), None,
                    cache_hit_ratio=0.0, quality={"checked": 10, "passed": 4},
                    sessions={"conversations": 3, "completed": 2, "turns": 8,
                              "failed_turns": 1}, queue_max=6.0,
                    capacity={"unit": "concurrency", "max_passing": 8},
                    efficiency={"cost_per_million_good_tokens": 1.25, "currency": "EUR"})
    assert run_notes(run) == ["cache hits 0%", "canaries 4/10 passed",
                              "2/3 conversations completed", "server queue up to 6",
                              "capacity under SLO: 8 users",
                              "1.25 EUR per million good tokens"]


def test_a_new_probes_chart_draws_from_its_first_runs() -> None:
    now = datetime(2026, 12, 4, 12, 0, 30, tzinfo=UTC)
    fresh = chart_windows(now - timedelta(minutes=10), now, 15)
    assert len(fresh) >= 10  # minute windows, not one hourly dot
    assert all(b - a <= 60 for a, b in fresh)
    assert fresh[-1][1] == now.timestamp()
    sparse = chart_windows(now - timedelta(minutes=30), now, 300)
    assert all(b - a <= 300 for a, b in sparse)
    assert len(sparse) in (6, 7)  # one window per run at least
    day = chart_windows(now - timedelta(hours=24), now)
    assert 24 <= len(day) <= 25
    assert all(b - a <= 3600 for a, b in day)
